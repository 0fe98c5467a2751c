"""The ingest's id lookups send one statement text whatever the number of ids (one JSON
array parameter): an ``IN (?, ?, …)`` list made a statement per length, each kept by
Python's statement cache with its bound strings (118 MB for 40 lookups of 2,000-30,000
ids)."""

from __future__ import annotations

import polars as pl

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import load, lookup


class _Recording:
    def __init__(self, conn) -> None:
        self.conn, self.calls = conn, []

    def execute(self, q, params=()):
        self.calls.append((q, len(params)))
        return self.conn.execute(q, params)


def test_lookups_have_one_statement_whatever_the_length(corpus_store):
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    try:
        ids = [r[0] for r in conn.execute("SELECT entry_id FROM entry_rows ORDER BY rowid LIMIT 50")]
        hashes = [
            r[0] for r in conn.execute("SELECT content_hash FROM contents ORDER BY content_id LIMIT 50")
        ]
        want_tokens = dict(conn.execute("SELECT content_hash, token_estimate FROM contents"))
        want_cid = dict(conn.execute("SELECT content_hash, content_id FROM contents"))
        rec = _Recording(conn)
        for n in (3, 7, 50):
            missing = [f"{i:032x}" for i in range(n)]
            assert lookup.existing_entry_ids(rec, ids[:n] + missing) == set(ids[:n])
            assert lookup.existing_contents(rec, hashes[:n] + missing) == {
                h: want_tokens[h] for h in hashes[:n]
            }
            assert load.content_ids(rec, pl.Series(hashes[:n] + missing + [None])) == {
                h: want_cid[h] for h in hashes[:n]
            }
    finally:
        conn.close()
    texts = {q for q, _ in rec.calls}
    assert len(texts) == 3  # one per lookup, not one per lookup and length
    assert {k for _, k in rec.calls} == {1}  # one parameter each
