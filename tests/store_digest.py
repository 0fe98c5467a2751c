"""A digest of a store's tables, to show two ingests stored the same (the engine's
writer thread, reader process and parts; the Prefect flow against the CLI)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from ctxkeep.schema import STORED_COLUMNS


def store_digest(home: Path) -> dict:
    """``{table: (rows, sha256 of the rows)}`` of every table an ingest writes (entry
    ids, content hashes, tokens and status; contents; chunk titles and texts; usage;
    watermarks without their times; quarantine; status log), independent of rowids
    and of when the rows were written, plus the FTS5 row counts."""
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    queries = {
        # every stored column (entry_id, content_hash, token_estimate, status, ...), not
        # rowid nor ingested_at
        "entries": f"SELECT {', '.join(STORED_COLUMNS)} FROM entries ORDER BY entry_id",
        "contents": "SELECT content_hash, bytes, token_estimate, token_method FROM contents "
        "ORDER BY content_hash",
        "chunks": "SELECT c.content_hash, ch.seq, ch.title, ch.text, ch.facets FROM chunks ch JOIN contents c "
        "ON c.content_id = ch.content_id ORDER BY c.content_hash, ch.seq",
        "usage": "SELECT * FROM usage ORDER BY usage_key",
        "watermarks": "SELECT path, size, offset, head_hash FROM watermarks ORDER BY path",
        "quarantine": "SELECT path, offset, reason FROM quarantine ORDER BY path, offset, reason",
        "status_log": "SELECT entry_id, status FROM status_log ORDER BY seq",
    }
    out = {}
    try:
        for name, q in queries.items():
            rows = conn.execute(q).fetchall()
            out[name] = (len(rows), hashlib.sha256(repr(rows).encode()).hexdigest())
        out["fts_words"] = conn.execute("SELECT count(*) FROM fts_words").fetchone()[0]
        out["fts_grams"] = conn.execute("SELECT count(*) FROM fts_grams").fetchone()[0]
    finally:
        conn.close()
    return out


def chunk_index_exact(home: Path) -> int:
    """Assert that ``home``'s ``chunks_id_content`` (schema v16) holds exactly the
    ``(chunk_id, content_id)`` of every ``chunk_rows`` row (read through the index and
    from the table) and that SQLite finds the store's indexes whole; returns the
    number of chunks."""
    conn = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        by_index = conn.execute(
            "SELECT chunk_id, content_id FROM chunk_rows INDEXED BY chunks_id_content ORDER BY chunk_id"
        ).fetchall()
        by_table = conn.execute(
            "SELECT chunk_id, content_id FROM chunk_rows NOT INDEXED ORDER BY chunk_id"
        ).fetchall()
        assert by_index == by_table
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    return len(by_table)
