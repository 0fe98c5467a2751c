"""A purged session of an agent database leaves the vault (new-user privacy defect):
its rows document (``<db>#session=<id>``, ``sources.readers.rows``) is forgotten with
the purge, its objects swept from the packs, and its tombstone keeps a re-ingest from
capturing it again; the database's other session stays restorable.

The database is a copy of the corpus's Crush database (two sessions) in tmp."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

import pytest
import zstandard

from ctxkeep.maintenance.purge_named import purge_named
from ctxkeep.maintenance.purge_request import PurgeRequest
from ctxkeep.maintenance.vault import vault_restore, vault_verify
from ctxkeep.sinks.vault import packs
from tests.conftest import CORPUS_HOME, ingest, q
from tests.dbhelpers import corpus_part

CRUSH = "code/dbos-transact-golang/.crush/crush.db"
GONE = "a20c5ed5-41d4-45f7-88eb-7ba0645f1341"  # 78 messages, "Create and Enhance CRUSH.md ..."
KEPT = "f306c145-4c83-492c-b575-739c30bbced4"  # 4 messages, "Instructions in CLI.md"
#: a phrase only the purged session's rows hold (its title)
PHRASE = b"Create and Enhance CRUSH.md with Codebase Guidelines"


def _pack_text(store: Path) -> bytes:
    """Every pack's objects and record, decompressed, back to back."""
    out = []
    for _name, path in packs.pack_names(store):
        data = path.read_bytes()[: -len(packs.TRAILER_MAGIC) - 8]
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
        out.append(reader.read())
    return b"\n".join(out)


def _rows_paths(store: Path) -> set[str]:
    return {r[0] for r in q(store, "SELECT path FROM vault_files WHERE path LIKE '%#session=%'")}


def test_a_purged_crush_session_leaves_the_vault_and_stays_out(tmp_path):
    if not (CORPUS_HOME / CRUSH).exists():
        pytest.skip("corpus database missing")
    home = tmp_path / "home"
    db = corpus_part(CRUSH, home)
    store = tmp_path / "store"
    ingest(home, store, ["crush"])
    gone_doc, kept_doc = f"{db}#session={GONE}", f"{db}#session={KEPT}"
    assert _rows_paths(store) == {gone_doc, kept_doc}
    assert PHRASE in _pack_text(store) and GONE.encode() in _pack_text(store)

    preview = purge_named(store, PurgeRequest("session", GONE), dry_run=True)
    assert preview["removed"]["vault_files"] == 1
    assert preview["removed"]["vault_bytes"] > 0
    assert _rows_paths(store) == {gone_doc, kept_doc}  # the dry run changed nothing

    rep = purge_named(store, PurgeRequest("session", GONE))
    assert rep["removed"]["vault_files"] == 1
    assert rep["removed"]["vault_bytes"] == preview["removed"]["vault_bytes"]
    assert _rows_paths(store) == {kept_doc}
    text = _pack_text(store)
    assert PHRASE not in text and GONE.encode() not in text
    assert vault_verify(store, full=True)["ok"]

    out = vault_restore(store, KEPT, to=tmp_path / "out", user_home=home)
    (f,) = out["files"]
    assert KEPT.encode() in Path(f["to"]).read_bytes()

    # the database read again from the start: the tombstone keeps the session out
    conn = sqlite3.connect(store / "store.db")
    with conn:
        conn.execute("DELETE FROM watermarks WHERE path = ?", (str(db),))
    conn.close()
    ingest(home, store, ["crush"])
    assert _rows_paths(store) == {kept_doc}
    assert PHRASE not in _pack_text(store)
    assert not q(store, "SELECT 1 FROM entries WHERE session_id = ?", GONE)
    assert vault_verify(store, full=True)["ok"]
