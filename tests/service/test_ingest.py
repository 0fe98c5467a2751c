"""``service.ingest``: what ``ctxkeep ingest`` decides, asked without the CLI.

The outcome's ``--json`` object validates against ``shapes.IngestResult`` (the model
docs/cli.md documents it from); the plan's problems reach the front end before the
run; a run with nothing new stores nothing and says what is held back; a dry run
creates no store; a bad task runner is a usage error.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.service import ingest as svc
from ctxkeep.service.shapes import IngestResult
from session_lines import claude_lines


def _session(tmp_path, n: int = 6):
    sid = str(uuid.uuid4())
    path = tmp_path / "user" / ".claude" / "projects" / "-tmp-svc" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(claude_lines(sid, n, dt.datetime(2026, 11, 30, tzinfo=dt.UTC))) + "\n")
    return path


def test_ingest_of_a_file_then_nothing_new(tmp_path):
    home, path = tmp_path / "home", _session(tmp_path)
    said: list[str] = []
    missing = tmp_path / "gone.jsonl"
    req = svc.IngestRequest(paths=(path, missing), prefect=False)
    out = svc.ingest(home, req, svc.IngestProgress(on_problem=said.append))
    data = out.as_json()
    IngestResult.model_validate(data)
    assert data["schema"] == 1 and data["entries_new"] == 6 and data["per_agent"] == {"claude-code": 6}
    assert said == data["problems"] and any(str(missing) in p for p in said)
    assert data["held_back"] == [] and out.held_note is None
    again = svc.ingest(home, svc.IngestRequest(paths=(path,), prefect=False)).as_json()
    IngestResult.model_validate(again)
    assert again["entries_new"] == 0 and again["files"] == 1 and again["files_read"] == 0


def test_dry_run_creates_no_store(tmp_path):
    home, path = tmp_path / "home", _session(tmp_path)
    rep = svc.dry_run(home, svc.IngestRequest(paths=(path,))).as_json()
    IngestResult.model_validate(rep)
    assert rep["dry_run"] is True and rep["files"] == 1 and rep["bytes"] == path.stat().st_size
    assert rep["store"] is None and not (home / "store.db").exists()


def test_a_first_ingest_opens_the_store_for_writing_once(tmp_path, monkeypatch):
    """With no store yet, the plan runs on no connection and the engine's open creates
    the store: one writable open in the whole run (the plan's own writable open created
    it, its close checkpointed the WAL, the engine's open made it again: 4 more fsyncs
    before the early reader got its files, issue 26); the store holds the session."""
    import sqlite3

    from ctxkeep.sinks.sqlite import connection

    home, path = tmp_path / "home", _session(tmp_path)
    opens: list[tuple[bool, bool]] = []  # (store.db there before the open, read-only)
    real = connection._connect

    def spy(h, **kw):
        opens.append(((h / "store.db").exists(), kw["readonly"]))
        return real(h, **kw)

    monkeypatch.setattr(connection, "_connect", spy)
    out = svc.ingest(home, svc.IngestRequest(paths=(path,), prefect=False)).as_json()
    assert out["entries_new"] == 6
    assert [o for o in opens if not o[1]] == [(False, False)]
    with sqlite3.connect(home / "store.db") as c:
        assert c.execute("SELECT count(*) FROM entries").fetchone()[0] == 6
    # nothing to read into a new home: the store is made by the plan, as before
    empty = tmp_path / "empty"
    out = svc.ingest(empty, svc.IngestRequest(paths=(tmp_path / "none",), prefect=False)).as_json()
    assert out["files"] == 0 and (empty / "store.db").exists()


def test_a_first_ingest_into_a_home_that_held_data_stops_before_its_plan(tmp_path, monkeypatch):
    """store.db gone from a home that held data (here its identity file): the home is
    checked as the writable open did, before the plan (which would send the early
    reader its files), so the ingest stops with "store.db is missing", plans nothing
    and creates no store."""
    from ctxkeep.pipeline import plan as plan_mod
    from ctxkeep.sinks.sqlite.store_safety import StoreDamaged

    home, path = tmp_path / "home", _session(tmp_path)
    home.mkdir()
    (home / "store.id").write_text("0123456789abcdef 2026-12-01T00:00:00Z\n")
    planned: list[int] = []
    real = plan_mod.plan
    monkeypatch.setattr(plan_mod, "plan", lambda *a, **k: planned.append(1) or real(*a, **k))
    with pytest.raises(StoreDamaged, match="store.db is missing"):
        svc.ingest(home, svc.IngestRequest(paths=(path,), prefect=False))
    assert planned == [] and not (home / "store.db").exists()


def test_a_bad_task_runner_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        svc.ingest(tmp_path / "home", svc.IngestRequest(task_runner="spark"))
    assert not (tmp_path / "home" / "store.db").exists()


def test_a_first_ingest_that_took_its_early_reader_leaves_the_collector_off_for_its_exit(
    tmp_path, monkeypatch
):
    """A first ingest whose engine took the reader started with the command ends its
    process next (``prestart.exit_now``): the collector stays off after the pause (the
    young collection its next allocation ran walked the run's objects, ~2-3 ms, and
    freed none); any other run turns it back on (above), also in a process where an
    earlier run took one."""
    import gc

    from ctxkeep.pipeline import engine, prestart

    real = engine.run_ingest

    def taking(*a, **k):
        prestart._taken.append(True)  # what take / take_ahead record
        return real(*a, **k)

    monkeypatch.setattr(prestart, "_taken", [])
    monkeypatch.setattr(engine, "run_ingest", taking)
    try:
        data = svc.ingest(tmp_path / "home", svc.IngestRequest(paths=(_session(tmp_path),), prefect=False))
        assert data.summary["entries_new"] == 6 and not gc.isenabled()
        gc.enable()
        more = _session(tmp_path / "more")
        data = svc.ingest(tmp_path / "home", svc.IngestRequest(paths=(more,), prefect=False))
        assert data.summary["entries_new"] == 6 and gc.isenabled()  # taken by the run before
    finally:
        gc.enable()


@pytest.mark.parametrize("bound", [svc.GC_PAUSE_BYTES, 0])
def test_a_small_run_pauses_the_cyclic_collector_and_gives_it_back(tmp_path, monkeypatch, bound):
    """At most ``GC_PAUSE_BYTES`` new bytes in-process: the engine runs with Python's
    cyclic collector off, on again after (also when the run fails); a bigger run
    collects as usual. The entries are the same either way."""
    import gc

    from ctxkeep.pipeline import engine

    monkeypatch.setattr(svc, "GC_PAUSE_BYTES", bound)
    seen: list[bool] = []
    real = engine.run_ingest

    def spying(*a, **k):
        seen.append(gc.isenabled())
        return real(*a, **k)

    monkeypatch.setattr(engine, "run_ingest", spying)
    assert gc.isenabled()
    path = _session(tmp_path)
    data = svc.ingest(tmp_path / "home", svc.IngestRequest(paths=(path,), prefect=False)).as_json()
    assert data["entries_new"] == 6 and seen == [bound == 0] and gc.isenabled()

    def failing(*a, **k):
        seen.append(gc.isenabled())
        raise OSError("disk full")

    monkeypatch.setattr(engine, "run_ingest", failing)
    more = path.with_name("more.jsonl")
    more.write_text(path.read_text())
    with pytest.raises(OSError):
        svc.ingest(tmp_path / "home2", svc.IngestRequest(paths=(more,), prefect=False))
    assert seen[-1] == (bound == 0) and gc.isenabled()


def test_the_plan_runs_with_the_collector_off_and_it_is_on_again_after(tmp_path, monkeypatch):
    """The plan's objects (a ``SourceFile``, path and ``stat`` per file) set off full
    collections that freed nothing (~0.12 CPU s of a no-op ingest at 25,728 files): the
    collector is off while ``plan`` runs, on again while the engine runs and after the
    call, whether it read something or nothing was new."""
    import gc

    from ctxkeep.pipeline import engine, plan

    seen: list[tuple[str, bool]] = []
    real_plan, real_run = plan.plan, engine.run_ingest

    def planning(*a, **k):
        seen.append(("plan", gc.isenabled()))
        return real_plan(*a, **k)

    def running(*a, **k):
        seen.append(("engine", gc.isenabled()))
        return real_run(*a, **k)

    monkeypatch.setattr(plan, "plan", planning)
    monkeypatch.setattr(engine, "run_ingest", running)
    monkeypatch.setattr(svc, "GC_PAUSE_BYTES", 0)  # (a small run's own pause: tested above)
    req = svc.IngestRequest(paths=(_session(tmp_path),), prefect=False)
    assert gc.isenabled()
    assert svc.ingest(tmp_path / "home", req).summary["entries_new"] == 6
    assert gc.isenabled() and seen == [("plan", False), ("engine", True)], seen
    # nothing new, DuckDB left behind (the hooks' worker): no engine
    quiet = svc.IngestRequest(paths=req.paths, prefect=False, catch_up_analytics=False)
    assert svc.ingest(tmp_path / "home", quiet).summary["entries_new"] == 0
    assert gc.isenabled() and seen[2:] == [("plan", False)], seen
    # nothing new, DuckDB behind: the engine catches it up, the collector on
    assert svc.ingest(tmp_path / "home", req).summary["entries_new"] == 0
    assert gc.isenabled() and seen[3:] == [("plan", False), ("engine", True)], seen


def test_the_runs_tail_is_named_after_its_last_bytes(tmp_path, monkeypatch):
    """newuser24 F7: the bar sat at 48.2/48.2 MB while the run synced DuckDB; the
    engine now names the tail (``hooks.on_phase("analytics")``) after every byte was
    counted, and the service hands the front end's ``on_phase`` to it."""
    from ctxkeep.pipeline import engine

    path = _session(tmp_path)
    events: list[tuple[str, object]] = []
    monkeypatch.setattr(engine.hooks, "on_bytes", lambda n: events.append(("bytes", n)))
    monkeypatch.setattr(engine.hooks, "on_phase", lambda name: events.append(("phase", name)))
    s = engine.run_ingest(tmp_path / "home", paths=[path], defer_analytics=False)
    assert s.entries_new == 6 and "analytics" in s.analytics
    assert [e for e in events if e[0] == "phase"] == [("phase", "analytics")]
    assert events[-1] == ("phase", "analytics")
    assert sum(n for k, n in events if k == "bytes") == path.stat().st_size
    # the service's wiring: the front end's on_phase reaches the engine, and is gone after
    seen: list = []
    monkeypatch.setattr(engine.hooks, "on_bytes", None)
    monkeypatch.setattr(engine.hooks, "on_phase", None)
    monkeypatch.setattr(
        engine, "run_ingest", lambda *a, **k: seen.append(engine.hooks.on_phase) or engine.Summary()
    )
    mark = lambda name: None  # noqa: E731
    svc._run(tmp_path / "home2", None, [path], False, None, svc.IngestProgress(on_phase=mark))
    assert seen == [mark] and engine.hooks.on_phase is None
