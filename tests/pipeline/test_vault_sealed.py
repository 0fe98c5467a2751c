"""A reader process seals the vault's bytes (``sinks.vault.capture.seal``: redacted,
hashed, compressed on its core) and sends no raw byte: the vault it fills is the one
the ingest process fills when it reads the files itself (same objects, files,
generations, segments and bytes), and the rest of the store is the same too."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.pipeline import reader_process as read_worker
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from fixtures.secrets import planted_session, positives
from store_digest import store_digest
from tests.conftest import ingest

VAULT = {
    "objects": "SELECT sha, stored, raw FROM vault_objects ORDER BY sha",
    "files": "SELECT path, agent, mode, meta FROM vault_files ORDER BY path",
    "generations": "SELECT f.path, g.gen, g.start, g.length, g.stored, g.size, g.redactions, g.doc_sha, "
    "g.chunks FROM vault_generations g JOIN vault_files f USING(vfile_id) ORDER BY f.path, g.gen",
    "segments": "SELECT f.path, g.gen, s.seq, s.offset, s.length, s.sha, s.skip FROM vault_segments s "
    "JOIN vault_generations g USING(gen_id) JOIN vault_files f USING(vfile_id) ORDER BY 1, 2, 3",
}


def _vault(store: Path) -> dict:
    conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        out = {k: conn.execute(q).fetchall() for k, q in VAULT.items()}
    finally:
        conn.close()
    conn = sqlite_store.connect(store, readonly=True)
    try:
        out["bytes"] = {
            (g.path, g.gen): hashlib.sha256(manifest.gen_bytes(conn, store, g)).hexdigest()
            for g in manifest.generations(conn)
        }
    finally:
        conn.close()
    return out


def test_a_reader_process_seals_the_same_vault_and_sends_no_raw_byte(home_copy, tmp_path, monkeypatch):
    cases = positives(11)
    planted = (
        home_copy / ".claude" / "projects" / "-tmp-sealed" / "5e551011-0000-4000-8000-000000000003.jsonl"
    )
    planted.parent.mkdir(parents=True)
    planted.write_bytes(planted_session(cases))

    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 1 << 40)  # read in this process
    ingest(home_copy, tmp_path / "here")

    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # read in a reader process
    real = read_worker.read_in_process
    seen = {"seal": [], "raws": 0, "unsealed": 0, "rows": 0}

    def spy(todo, **kw):
        seen["seal"].append(kw.get("seal"))
        for item in real(todo, **kw):
            raw = item.batch.raw if item.batch is not None else None
            if raw is not None and raw.meta.get("vault_rows"):
                # a database session's rows: a whole document (a fresh store's: no version
                # held to build on) sealed by the reader too (``read_split``'s
                # ``seal_rows``); one built on a held version is the ingest process's
                # (``rows_capture.seal_rows``)
                seen["rows"] += raw.sealed is not None and raw.data == b""
                seen["unsealed"] += raw.sealed is None
            elif raw is not None:
                seen["raws"] += 1
                seen["unsealed"] += raw.sealed is None or raw.data != b""
            yield item

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    ingest(home_copy, tmp_path / "there")

    assert seen["seal"] == [True] and seen["raws"] > 20 and seen["unsealed"] == 0
    assert seen["rows"] == 3  # the corpus's Crush (2 sessions) and opencode-go databases, sealed
    here, there = _vault(tmp_path / "here"), _vault(tmp_path / "there")
    assert len(here["files"]) > 20 and any(g[6] != "{}" for g in here["generations"])
    assert here == there
    assert store_digest(tmp_path / "here") == store_digest(tmp_path / "there")
    # what the reader process sealed holds no planted value either
    conn = sqlite_store.connect(tmp_path / "there", readonly=True)
    try:
        data = b"".join(
            manifest.gen_bytes(conn, tmp_path / "there", g)
            for g in manifest.generations(conn)
            if g.path == str(planted)
        )
    finally:
        conn.close()
    values = {s for c in cases for s in c.secrets if s}
    assert data and b"[REDACTED:" in data and [v for v in values if v.encode() in data] == []


def test_with_the_vault_off_the_reader_process_seals_nothing(home_copy, tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_VAULT", "0")
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)
    real = read_worker.read_in_process
    seals = []

    def spy(todo, **kw):
        seals.append(kw.get("seal"))
        return real(todo, **kw)

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    ingest(home_copy, tmp_path / "off", agents="codex")
    assert seals == [False]


def test_a_first_ingests_reader_seals_the_whole_rows_documents_too(home_copy, tmp_path, monkeypatch):
    """``seal_rows`` (the reader started with a first ingest's command:
    ``reader_process.read_shared``): the databases' whole rows documents come sealed
    with their state, and the vault is the one the ingest process builds (generations'
    rows states and chunk lists, objects, bytes), the rest of the store too."""
    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 1 << 40)  # read in this process
    ingest(home_copy, tmp_path / "here")

    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # read in a reader process
    real = read_worker.read_in_process
    rows = []

    def spy(todo, **kw):
        for item in real(todo, **dict(kw, seal_rows=True)):  # as ``read_shared`` asks
            raw = item.batch.raw if item.batch is not None else None
            if raw is not None and raw.meta.get("vault_rows"):
                rows.append((raw.data, raw.sealed is not None and bool(raw.sealed.rows_state)))
            yield item

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    ingest(home_copy, tmp_path / "there")

    assert rows == [(b"", True)] * 3  # the corpus's Crush (2 sessions) and opencode-go databases
    states = (
        "SELECT f.path, g.gen, g.rows_state, g.doc_sha, g.chunks FROM vault_generations g "
        "JOIN vault_files f USING(vfile_id) WHERE g.rows_state IS NOT NULL ORDER BY 1, 2"
    )
    got = {}
    for side in ("here", "there"):
        conn = sqlite3.connect(f"file:{tmp_path / side / 'store.db'}?mode=ro", uri=True)
        try:
            got[side] = conn.execute(states).fetchall()
        finally:
            conn.close()
    assert len(got["here"]) == 3 and got["here"] == got["there"]
    assert _vault(tmp_path / "here") == _vault(tmp_path / "there")
    assert store_digest(tmp_path / "here") == store_digest(tmp_path / "there")


def test_a_rows_document_built_on_a_held_version_is_left_to_the_ingest_process():
    from ctxkeep.sinks.vault.capture import seal
    from ctxkeep.sources.contract import RawCapture

    doc = b'{"db":"x"}\n{"row":{"a":1},"rowid":1,"t":"m"}\n'
    whole = RawCapture("/x.db:s", "crush", "document", 0, doc, 0, 0, len(doc), 0, meta={"vault_rows": True})
    built = RawCapture(
        "/x.db:s",
        "crush",
        "document",
        0,
        doc,
        0,
        0,
        len(doc),
        0,
        meta={"vault_rows": True, "rows_base": "t1"},
    )
    assert seal(whole) is whole and seal(built, rows=True) is built  # not asked, or built on a version
    got = seal(whole, rows=True)
    assert got.data == b"" and got.sealed.rows_state["sections"][0][0] == "" and got.sealed.objects


def test_a_first_ingests_reader_seals_after_sending_its_batches_and_the_store_is_the_same(
    home_copy, tmp_path, monkeypatch
):
    """``seal_late`` (``reader_process.read_shared``: the early reader): the batches come
    before their bytes are sealed, each ``batch.raw`` a ``readahead.LateRaw``; the
    generator ends with its last item, the sealed captures come after it (a thread reads
    them), and the vault and the store are the ones the ingest process builds itself.
    Its contents' chunks and index terms come cut, their tokens not counted
    (``--precompute chunks``: counted by the ingest process), the same store."""
    from ctxkeep.pipeline.readahead import LateRaw

    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 1 << 40)  # read in this process
    ingest(home_copy, tmp_path / "here")

    monkeypatch.setattr(pipeline, "PROCESS_READ_BYTES", 0)  # read in a reader process
    real = read_worker.read_in_process
    late: list = []
    cut: list = []  # the contents whose chunks and index terms came cut, tokens not counted

    def spy(todo, **kw):
        # as ``read_shared`` asks: sealed late, chunks and index terms cut there
        for item in real(todo, **dict(kw, seal_rows=True, seal_late=True, precompute="chunks")):
            raw = item.batch.raw if item.batch is not None else None
            if raw is not None:
                late.append(raw)
            if item.ahead is not None:
                contents, chunks = item.ahead
                assert contents.columns == ["content_hash"] and {"symbols", "vocab"} <= set(chunks.columns)
                cut.extend(contents["content_hash"].to_list())
            yield item
        # the generator ended: the sealed captures may still be on their way, not lost
        assert all(isinstance(r, LateRaw) for r in late)

    monkeypatch.setattr(read_worker, "read_in_process", spy)
    ingest(home_copy, tmp_path / "there")

    assert len(late) > 20 and all(isinstance(r, LateRaw) for r in late)
    assert len(cut) > 100 and len(set(cut)) == len(cut)  # every new content, once
    sealed = [r.result() for r in late]
    assert all(s.sealed is not None and s.data == b"" for s in sealed)
    assert sum(bool(s.meta.get("vault_rows")) for s in sealed) == 3  # Crush (2) and opencode-go
    assert [s.meta for s in sealed] == [r.meta for r in late]
    assert _vault(tmp_path / "here") == _vault(tmp_path / "there")
    assert store_digest(tmp_path / "here") == store_digest(tmp_path / "there")


def test_the_sealed_captures_of_a_reader_that_failed_or_died_raise():
    """``_take_sealed``: the reader's exception (``_FAIL`` instead of the captures), or
    RuntimeError when the pipe ends without them, is what ``LateRaw.result`` raises."""
    import os
    import pickle
    import subprocess
    import sys
    from concurrent.futures import Future

    import pytest

    from ctxkeep.pipeline.readahead import LateRaw, sealed_raws

    for messages, error, text in (
        ([(read_worker._FAIL, ValueError("seal failed"))], ValueError, "seal failed"),
        ([], RuntimeError, "without its sealed captures"),
    ):
        r, w = os.pipe()
        with os.fdopen(w, "wb") as out:
            for m in messages:
                pickle.dump(m, out)
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        seals: Future = Future()
        raw = LateRaw({"session": "s"}, 0)
        raw.seals = seals
        read_worker._take_sealed(proc, os.fdopen(r, "rb"), seals)
        assert proc.poll() is not None
        with pytest.raises(error, match=text):
            sealed_raws([raw])

    # one that sent them: each LateRaw gets its own, in order
    r, w = os.pipe()
    with os.fdopen(w, "wb") as out:
        pickle.dump((read_worker._SEALED, ["a", "b"]), out)
        pickle.dump((read_worker._DONE, None), out)
    seals = Future()
    raws = [LateRaw({}, 1), LateRaw({}, 0)]
    for x in raws:
        x.seals = seals
    read_worker._take_sealed(subprocess.Popen([sys.executable, "-c", "pass"]), os.fdopen(r, "rb"), seals)
    assert sealed_raws([*raws, "plain"]) == ["b", "a", "plain"]
