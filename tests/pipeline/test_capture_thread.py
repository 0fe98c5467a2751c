"""The vault's capture runs in the writer's capture thread (``Writer.start_capture``),
started before the main thread transforms the group, in group order: the same vault
and store as a capture in the main thread (``CTXKEEP_WRITER=0`` path); a capture that
fails (a pack that cannot be written) fails the run before its group commits, so the
file's watermark stays and the next run reads it again."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
import uuid
from pathlib import Path

import pytest

from ctxkeep.pipeline import engine, plan
from ctxkeep.sinks.vault import capture
from session_lines import claude_lines

START = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def _tree(tmp_path: Path, files: int = 3, n: int = 12) -> list[Path]:
    out = []
    for i in range(files):
        sid = str(uuid.uuid4())
        path = tmp_path / "user" / ".claude" / "projects" / f"-tmp-cap{i}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(claude_lines(sid, n, START, word=f"wombat{i}")) + "\n")
        out.append(path)
    return out


def _manifest(home: Path) -> list[tuple]:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return c.execute(
            "SELECT f.path, g.length, g.stored, s.offset, s.length, s.sha FROM vault_files f "
            "JOIN vault_generations g USING (vfile_id) JOIN vault_segments s USING (gen_id) "
            "ORDER BY f.path, s.offset"
        ).fetchall()


def _watermarks(home: Path) -> int:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return c.execute("SELECT count(*) FROM watermarks").fetchone()[0]


def test_captures_run_in_the_capture_thread_in_group_order(tmp_path, monkeypatch):
    paths = _tree(tmp_path)
    monkeypatch.setattr(plan, "PART_BYTES", 1)  # a part, so a group, per file
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)  # (however small)
    seen: list[tuple[str, list[str]]] = []
    real = capture.Capturer.prepare

    def spying(self, raws, *a, **k):
        seen.append((threading.current_thread().name, [str(r.path) for r in raws]))
        return real(self, raws, *a, **k)

    monkeypatch.setattr(capture.Capturer, "prepare", spying)
    home = tmp_path / "home"
    s = engine.run_ingest(home, paths=paths)
    assert s.entries_new == 36
    assert [t.split("_")[0] for t, _ in seen] == ["ctxkeep-capture"] * 3
    assert [p for _, p in seen] == [[str(p)] for p in paths]  # one call per group, in group order

    # the same vault as a capture in the caller's thread (no writer thread)
    monkeypatch.setattr(capture.Capturer, "prepare", real)
    monkeypatch.setattr("ctxkeep.pipeline.writer.WRITER", False)
    other = tmp_path / "home2"
    engine.run_ingest(other, paths=paths)
    a, b = _manifest(home), _manifest(other)
    assert len(a) == 3 and a == b


def test_a_capture_that_fails_fails_the_run_before_its_group_commits(tmp_path, monkeypatch):
    paths = _tree(tmp_path)
    monkeypatch.setattr(plan, "PART_BYTES", 1)
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)
    real = capture.Capturer.prepare
    calls = [0]

    def failing(self, raws, *a, **k):
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(28, "No space left on device (test)")
        return real(self, raws, *a, **k)

    monkeypatch.setattr(capture.Capturer, "prepare", failing)
    home = tmp_path / "home"
    with pytest.raises(OSError, match="No space left"):
        engine.run_ingest(home, paths=paths)
    assert _watermarks(home) == 1  # the first file's group only
    assert len(_manifest(home)) == 1
    monkeypatch.setattr(capture.Capturer, "prepare", real)
    s = engine.run_ingest(home, paths=paths)  # the rest read again
    assert s.entries_new == 24 and _watermarks(home) == 3 and len(_manifest(home)) == 3


def test_a_pack_sealed_late_is_waited_for_where_its_manifest_rows_go(tmp_path, monkeypatch):
    """A group whose bytes the early reader seals after it sent them (``Group.pack_late``)
    is loaded while its pack is still being made: the writer waits for the pack only
    where the manifest rows go, before the watermarks and the COMMIT, so the pack is
    still durable before the rows naming it commit. The same vault and store; a late
    pack that fails takes back its own group's rows alone (a savepoint): the groups
    before it in the transaction commit, the next run reads the rest again."""
    from ctxkeep.pipeline import writer as writer_mod
    from ctxkeep.sinks import sqlite as sqlite_store

    paths = _tree(tmp_path)
    monkeypatch.setattr(plan, "PART_BYTES", 1)
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)
    engine.run_ingest(tmp_path / "before", paths=paths)  # each pack waited for before the load

    real_put, real_load, real_prepare = (
        writer_mod.Writer.put,
        sqlite_store.load_batch,
        capture.Capturer.prepare,
    )

    def put(self, g):
        g.pack_late = g.vault_pending is not None  # as the early reader's groups come
        return real_put(self, g)

    loads = threading.Semaphore(0)
    seen: list[bool] = []  # per pack: whether its group's load had started when it was made
    fail_at = [0]

    def load_batch(*a, **k):
        loads.release()
        return real_load(*a, **k)

    def prepare(self, raws, *a, **k):
        after = 0 < fail_at[0] <= len(seen)  # a group after the failed one: never loaded
        seen.append(after or loads.acquire(timeout=3))
        if len(seen) == fail_at[0]:
            raise OSError(28, "No space left on device (test)")
        return real_prepare(self, raws, *a, **k)

    monkeypatch.setattr(writer_mod.Writer, "put", put)
    monkeypatch.setattr(sqlite_store, "load_batch", load_batch)
    monkeypatch.setattr(capture.Capturer, "prepare", prepare)
    engine.run_ingest(tmp_path / "late", paths=paths)
    assert seen == [True, True, True]  # each pack made while its rows were being loaded
    assert (
        _manifest(tmp_path / "late") == _manifest(tmp_path / "before") and _watermarks(tmp_path / "late") == 3
    )

    seen.clear()
    fail_at[0] = 2
    home = tmp_path / "home"
    with pytest.raises(OSError, match="No space left"):
        engine.run_ingest(home, paths=paths)
    assert seen[:2] == [True, True]
    assert _watermarks(home) == 1 and len(_manifest(home)) == 1  # the first group committed
    fail_at[0] = 0
    s = engine.run_ingest(home, paths=paths)  # the rest read again
    assert s.entries_new == 24 and _watermarks(home) == 3
    assert _manifest(home) == _manifest(tmp_path / "before")
