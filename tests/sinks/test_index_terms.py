"""``load.with_index_terms`` (the writer thread's caller computes the chunks' symbol
terms and vocabulary) stores exactly what ``load_batch`` computes itself: the same
``fts_symbols`` and ``fts_vocab`` index pages and ``vocab`` rows."""

from __future__ import annotations

import sqlite3

from ctxkeep.pipeline.transform import transform_batch
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import Batch

#: texts with symbol terms (c++, C#, .NET), identifiers for the vocabulary, and none
_TEXTS = [
    "compile it with c++ and link the C# wrapper for ASP.NET",
    "the validateUserInput handler calls parseConfigFile twice",
    "no symbols here, only words",
    "F# and c++17 are not the same; .NETx is not .NET",
]


def _entries():
    return [
        {
            "agent": "claude-code",
            "session_id": "s1",
            "native_id": f"n{i}",
            "part": 0,
            "project_dir": "/w/p",
            "ts": f"2025-06-0{i + 1}T10:00:00Z",
            "role": "user",
            "kind": "message",
            "tool_name": None,
            "text": text,
            "record_id": f"r{i}",
            "source_path": "/x.jsonl",
            "source_offset": i,
        }
        for i, text in enumerate(_TEXTS)
    ]


def _stored(home, precomputed: bool) -> dict:
    conn = sqlite_store.connect(home)
    frames = transform_batch(conn, Batch(_entries(), [], None), {})
    if precomputed:
        frames = sqlite_store.with_index_terms(frames)
        assert frames["chunks"]["symbols"].to_list().count("") == 2 and "validateuserinput" in frames["vocab"]
    assert sqlite_store.load_batch(conn, quarantine=[], **frames) == len(_TEXTS)
    conn.close()
    ro = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    out = {
        t: ro.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
        for t in ("fts_symbols_data", "fts_symbols_docsize", "fts_vocab_data", "vocab", "fts_grams_data")
    }
    out["symbol rows"] = ro.execute(
        "SELECT rowid FROM fts_symbols WHERE fts_symbols MATCH '\"c++\"'"
    ).fetchall()
    ro.close()
    return out


def test_precomputed_index_terms_store_the_same(tmp_path):
    own = _stored(tmp_path / "a", precomputed=False)
    given = _stored(tmp_path / "b", precomputed=True)
    assert given == own
    assert len(own["symbol rows"]) == 1 and len(own["fts_symbols_docsize"]) == 2 and len(own["vocab"]) > 8
