"""Phrase-list benchmark: what the ``phrase`` list (a query of 2+ plain words also run
as one FTS5 phrase, ``query.search.parse.phrase_match``) costs a search, in one run:
the same queries with the list on (this checkout) and off (``phrase_match`` returning
None, as before it), alternating query by query so load hits both alike.

    uv run python tests/bench/bench_phrase.py /tmp/big-store [--rounds 3]

The store is opened read-only (no notes are indexed, nothing is written: a shared
store can be measured as it is). Queries: the multi-word plain queries of
``bench_search`` (``WORDS``, two-word mixes of ``WORDS`` and ``IDENTS``), each without
filters and with each of ``bench_search.FILTERS``, and the newuser14 F8 sentence.
Prints CPU ms (the process's, less load-bound than wall time) p50/p95/max per side,
the phrase list alone as ``search`` runs it (none when the words list is empty,
``retrieve.phrase_among`` when it holds fewer than 50 rows, else ``retrieve.fts_ids``),
and how many queries' first hit changed. Asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import FILTERS, IDENTS, WORDS, pct

import ctxkeep.query.search as search_mod
from ctxkeep.query.search import Filters, phrase_match, retrieve, words_match
from ctxkeep.sinks import sqlite as sqlite_store


def _queries() -> list[tuple[str, dict]]:
    plain = [w for w in WORDS if phrase_match(w)]
    mixes = [f"{w} {i}" for w in WORDS[:6] for i in IDENTS[:4]]
    qs = [*plain, *[m for m in mixes if phrase_match(m)], "organization must be verified"]
    return [(q, f) for q in qs for f in FILTERS]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="ctxkeep home of the store (opened read-only)")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    conn = sqlite_store.connect(a.store, readonly=True)
    qs = _queries()
    real = search_mod.phrase_match
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    stmt: list[float] = []
    changed = 0
    for _ in range(a.rounds):
        for q, f in qs:
            firsts = {}
            for side in ("off", "on"):
                search_mod.phrase_match = real if side == "on" else (lambda _q: None)
                t = time.process_time()
                hits = search_mod.search(conn, q, filters=Filters(**f)).hits
                cpu[side].append((time.process_time() - t) * 1000)
                firsts[side] = hits[0].entry_id if hits else None
            changed += firsts["on"] != firsts["off"]
            ff = Filters(**f).validate().resolve_sessions(conn)
            facets = not ff.is_empty() and sqlite_store.schema_version(conn) >= 3
            words = retrieve.fts_ids(conn, "fts_words", words_match(q), ff, 50, {}, facets)
            t = time.process_time()  # the phrase list as search runs it (after the words list)
            if words and len(words) < 50:
                retrieve.phrase_among(conn, real(q), words)
            elif words:
                retrieve.fts_ids(conn, "fts_words", real(q), ff, 50, {}, facets)
            stmt.append((time.process_time() - t) * 1000)
    search_mod.phrase_match = real
    n = len(cpu["on"])
    print(f"store {a.store}: {len(qs)} queries x {a.rounds} rounds, alternating, CPU ms")
    print(f"{'side':<22}{'n':>5}{'p50':>8}{'p95':>8}{'max':>8}{'sum':>10}")
    for name, xs in (
        ("phrase off (before)", cpu["off"]),
        ("phrase on (this)", cpu["on"]),
        ("phrase list alone", stmt),
    ):
        print(f"{name:<22}{n:>5}{pct(xs, 0.5):>8.1f}{pct(xs, 0.95):>8.1f}{max(xs):>8.1f}{sum(xs):>10.0f}")
    print(f"first hit changed by the phrase list: {changed // a.rounds} of {len(qs)} queries")
    conn.close()


if __name__ == "__main__":
    main()
