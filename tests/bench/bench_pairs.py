"""Word pairs beside the word index (Lucene's CommonGrams, issue 26): a prototype that
builds a pair index for a store and measures the word index's statements with it.

A *pair token* stands for two adjacent index terms of a chunk's title or text of which
at least one is *common* (the ``--common`` terms of ``fts_words`` holding the most
chunks: ``exit code`` -> ``exit_code``, ``main_window`` -> ``main_window``, ``it's`` ->
``it_s``). The pairs live in a contentless FTS5 table of their own database (never the
store: it is opened read-only), one row per chunk (rowid = chunk id), ``detail=none``
(presence only: no positions, no columns)::

    CREATE VIRTUAL TABLE fts_pairs USING fts5(pairs, content='', detail=none,
        columnsize=0, tokenize="unicode61 remove_diacritics 0 tokenchars '_'")

Terms are the word index's own (``ddl.WORDS_TOKENIZE``): a chunk is cut at ASCII
characters other than letters and digits (unicode61's separators there), and each
run, cached, is tokenized by a ``temp`` FTS5 table with that tokenizer (its
``fts5vocab`` instances): the same terms, porter stems and non-ASCII separators as
``fts_words``, so a phrase's match implies its pairs (a necessary condition).

*The rewrite* (``pair_filter``): a MATCH of the shapes ``parse`` builds (quoted phrases
joined by AND, or by OR, optionally ``(…) AND facets:(…)``) whose phrases of 2+ terms
hold a pair: AND, every pair of every phrase; OR, every phrase needs a pair (the OR of
their ANDs). The chunks holding the pairs are read newest first up to ``--cap`` + 1
(``SELECT rowid FROM fts_pairs WHERE fts_pairs MATCH ? ORDER BY rowid DESC LIMIT ?``):
none, the statement has no row and is not run; up to ``--cap``, it runs with ``AND
rowid IN (SELECT value FROM json_each(?))`` (FTS5 then runs its MATCH once per candidate,
a seek: the same rows, and the same ``ck_bm25`` ranks, which depend only on the row and
the table); more, it runs as it is. Exactness is checked, not assumed: every measured
statement's rows and ranks are compared.

Usage (``uv run python tests/bench/bench_pairs.py …``)::

    build STORE_HOME PAIRS.db [--common 1000]   # every chunk's pairs (2 GB: minutes)
    needed STORE_HOME PAIRS.db [--common 1000]  # only the pairs the measured statements
        # use, each from the store's own phrase matches (``{title text}: "a b"``): the
        # same posting lists as ``build`` gives them, for a 10 GB store
    measure STORE_HOME PAIRS.db [--rounds 5] [--cap 200]

``measure`` runs bench_search.py's 208 queries once on one connection (``parallel=False``),
collects every distinct MATCH of ``fts_words`` they run (trace callback), and times the
ranked window statement of each (``retrieve.newest_ranked_sql``: 2,000 newest matches,
``ck_bm25_top`` best 11, counts kept), as it is and rewritten, alternating, min of
``--rounds``, thread CPU ms; then prints the statements above 2 ms, the sums, and the
rows compared. ``build`` prints its CPU seconds (reading the chunks apart), its tokens
and pairs, and the pair table's bytes against the store's. Asserts nothing but exactness.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "bench"))

from ctxkeep.query.search import retrieve  # noqa: E402
from ctxkeep.sinks import sqlite as sqlite_store  # noqa: E402
from ctxkeep.sinks.sqlite import native_rank  # noqa: E402
from ctxkeep.sinks.sqlite.ddl import WORDS_TOKENIZE  # noqa: E402

#: a run of characters unicode61 may keep in one token: ASCII letters and digits and every
#: non-ASCII character (the probe table cuts those at unicode61's own separators)
RUN = re.compile(r"[0-9A-Za-z\x80-\U0010FFFF]+")
PAIRS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS fts_pairs USING fts5(pairs, content='', detail=none, "
    "columnsize=0, tokenize=\"unicode61 remove_diacritics 0 tokenchars '_'\")"
)
CACHE_MAX = 3_000_000


class Terms:
    """Index terms of texts as ``fts_words`` makes them (``WORDS_TOKENIZE``), runs cached."""

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE probe USING fts5(w, tokenize='{WORDS_TOKENIZE}')")
        self.db.execute("CREATE VIRTUAL TABLE probe_i USING fts5vocab(probe, instance)")
        self.cache: dict[str, tuple[str, ...]] = {}
        self.probed = 0

    def resolve(self, runs: set[str]) -> None:
        miss = [r for r in runs if r not in self.cache]
        if not miss:
            return
        if len(self.cache) + len(miss) > CACHE_MAX:
            self.cache.clear()
        self.probed += len(miss)
        out: list[list[str]] = [[] for _ in miss]
        with self.db:
            self.db.executemany("INSERT INTO probe(rowid, w) VALUES(?, ?)", enumerate(miss))
        for doc, term in self.db.execute("SELECT doc, term FROM probe_i ORDER BY doc, offset"):
            out[doc].append(term)
        with self.db:
            self.db.execute("DELETE FROM probe")
        for r, ts in zip(miss, out, strict=True):
            self.cache[r] = tuple(ts)

    def of(self, text: str) -> list[str]:
        runs = RUN.findall(text)
        self.resolve(set(runs))
        c = self.cache
        out: list[str] = []
        for r in runs:
            out.extend(c[r])
        return out


def common_terms(conn: sqlite3.Connection, n: int) -> list[str]:
    """The ``n`` terms of ``fts_words`` in the most chunks' titles or texts (summed over
    the two columns; ``fts5vocab`` of type ``col``: a walk of the whole index)."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.pairs_vcol USING fts5vocab(main, fts_words, col)")
    rows = conn.execute(
        "SELECT term, sum(doc) d FROM temp.pairs_vcol WHERE col IN ('title', 'text') "
        "GROUP BY term ORDER BY d DESC, term LIMIT ?",
        (n,),
    ).fetchall()
    return [t for t, _ in rows]


def pairs_of(terms: list[str], common: set[str]) -> set[str]:
    return {f"{a}_{b}" for a, b in zip(terms, terms[1:], strict=False) if a in common or b in common}


def _open_pairs(path: Path, common: list[str] | None) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(PAIRS_DDL)
    db.execute("CREATE TABLE IF NOT EXISTS common(term TEXT PRIMARY KEY)")
    if common is not None:
        with db:
            db.execute("DELETE FROM common")
            db.executemany("INSERT INTO common VALUES(?)", [(t,) for t in common])
    return db


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def build(home: Path, pairs_path: Path, n_common: int, limit: int | None = None, batch: int = 2000) -> None:
    """Every chunk's pairs (the first ``limit`` chunks') into ``pairs_path`` (made anew)."""
    if pairs_path.exists():
        pairs_path.unlink()
    store = sqlite_store.connect(home, readonly=True)
    c0 = cpu()
    common = common_terms(store, n_common)
    c_common = cpu() - c0
    db = _open_pairs(pairs_path, common)
    cs = set(common)
    terms = Terms()
    n_chunks = n_tokens = n_pairs = n_bytes = 0
    c_read = c_work = 0.0
    last = 0
    while True:
        c1 = cpu()
        rows = store.execute(
            "SELECT chunk_id, title, text FROM chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
            (last, batch),
        ).fetchall()
        c2 = cpu()
        c_read += c2 - c1
        if not rows or (limit is not None and n_chunks >= limit):
            break
        last = rows[-1][0]
        out = []
        for cid, title, text in rows:
            ps: set[str] = set()
            for col in (title, text):
                if col:
                    n_bytes += len(col)
                    ts = terms.of(col)
                    n_tokens += len(ts)
                    ps |= pairs_of(ts, cs)
            n_pairs += len(ps)
            out.append((cid, " ".join(ps)))
        with db:
            db.executemany("INSERT INTO fts_pairs(rowid, pairs) VALUES(?, ?)", out)
        n_chunks += len(rows)
        c_work += cpu() - c2
        if n_chunks % (batch * 50) == 0:
            print(f"  {n_chunks:,} chunks, {c_work:.0f} CPU s", flush=True)
    c3 = cpu()
    with db:
        db.execute("INSERT INTO fts_pairs(fts_pairs) VALUES('optimize')")
    c_opt = cpu() - c3
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    store_bytes = (home / "store.db").stat().st_size
    all_chunks = store.execute("SELECT count(*) FROM chunk_rows").fetchone()[0]
    share = n_chunks / max(all_chunks, 1)  # < 1 with ``limit``: the figures below scale by it
    words_bytes = _fts_bytes(store, "fts_words") if limit is None else None
    pairs_bytes = pairs_path.stat().st_size
    print(
        json.dumps(
            {
                "chunks": n_chunks,
                "text_mb": round(n_bytes / 1e6, 1),
                "tokens": n_tokens,
                "pair_postings": n_pairs,
                "runs_probed": terms.probed,
                "common": n_common,
                "cpu_s_common_list": round(c_common, 1),
                "cpu_s_read_chunks": round(c_read, 1),
                "cpu_s_pairs_tokenize_insert": round(c_work, 1),
                "cpu_s_optimize": round(c_opt, 1),
                "cpu_ms_per_text_mb": round(1000 * (c_work + c_opt) / max(n_bytes / 1e6, 1e-9), 1),
                "store_mb": round(store_bytes / 1e6, 1),
                "fts_words_mb": None if words_bytes is None else round(words_bytes / 1e6, 1),
                "pairs_db_mb": round(pairs_bytes / 1e6, 1),
                "chunks_share": round(share, 4),
                "growth_pct_of_store": round(100 * pairs_bytes / share / store_bytes, 1),
            },
            indent=1,
        )
    )


def _fts_bytes(conn: sqlite3.Connection, fts: str) -> int | None:
    try:
        return conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name LIKE ? || '%'", (fts + "_",)
        ).fetchone()[0]
    except sqlite3.Error:
        return None


# ---------------------------------------------------------------- the rewrite

#: a facet filter ANDed at the end (``(terms) AND facets : (fk0 OR fk1)``, ``"p" AND facets : (…)``)
_FILTERED = re.compile(r"^(.*) AND facets\s*:\s*\([^()]*\)$", re.S)


def _phrases(match: str) -> tuple[list[str], set[str]] | None:
    m = _FILTERED.match(match)
    terms = m.group(1) if m else match
    return retrieve.term_phrases(terms)


def _phrase_text(p: str) -> tuple[str, bool]:
    prefix = p.endswith("*")
    body = p[:-1] if prefix else p
    return body[1:-1].replace('""', '"'), prefix


def pair_filter(terms: Terms, common: set[str], match: str) -> str | None:
    """The MATCH of ``fts_pairs`` whose rows hold every row of ``match`` (a superset), or
    None when ``match`` has no shape or no pair to filter by."""
    shape = _phrases(match)
    if shape is None:
        return None
    phrases, ops = shape
    per: list[set[str]] = []
    for p in phrases:
        text, prefix = _phrase_text(p)
        ts = terms.of(text)
        if prefix and ts:
            ts = ts[:-1]  # the last term is a prefix
        per.append(pairs_of(ts, common))
    if ops == {"OR"}:
        if not all(per):
            return None
        return " OR ".join("(" + " AND ".join(f'"{x}"' for x in sorted(ps)) + ")" for ps in per)
    every = set().union(*per)
    if not every:
        return None
    return " AND ".join(f'"{x}"' for x in sorted(every))


def built_tokens(conn: sqlite3.Connection) -> set[str] | None:
    """The pair tokens of a ``needed`` table (None: every chunk's pairs, ``build``)."""
    try:
        return {r[0] for r in conn.execute("SELECT token FROM pairs.built")}
    except sqlite3.OperationalError:
        return None


def checkable(pm: str | None, built: set[str] | None) -> str | None:
    """``pm``, or None when it names a pair the table was not made with."""
    if pm is None or built is None:
        return pm
    return pm if all(t in built for t in re.findall(r'"([^"]+)"', pm)) else None


def window_sql(match: str) -> tuple[str, tuple]:
    """The ranked window statement of a list (``newest_ranked_sql``: 2,000 newest, best 11)."""
    sql = retrieve.newest_ranked_sql("fts_words", match, retrieve.RANK_WINDOW, 11, True, 11)
    return sql[0], tuple(sql[1])


def run_plain(conn: sqlite3.Connection, match: str) -> list:
    sql, params = window_sql(match)
    return conn.execute(sql, params).fetchall()


def run_paired(conn: sqlite3.Connection, match: str, pmatch: str, cap: int) -> tuple[list, int]:
    """The window statement driven by the pair index: (rows, candidates; -1 = over cap)."""
    cands = [
        r[0]
        for r in conn.execute(
            "SELECT rowid FROM pairs.fts_pairs WHERE fts_pairs MATCH ? ORDER BY rowid DESC LIMIT ?",
            (pmatch, cap + 1),
        )
    ]
    if not cands:
        return [], 0
    if len(cands) > cap:
        return run_plain(conn, match), -1
    sql, params = window_sql(match)
    k = len(params) + 1
    sql = sql.replace(
        "fts_words MATCH ?1 ORDER BY",
        f"fts_words MATCH ?1 AND rowid IN (SELECT value FROM json_each(?{k})) ORDER BY",
    )
    return conn.execute(sql, (*params, json.dumps(cands))).fetchall(), len(cands)


# ---------------------------------------------------------------- the statements


def bench_matches(home: Path) -> list[str]:
    """Every distinct MATCH of ``fts_words`` that bench_search.py's queries run (one
    connection, in order of first use)."""
    import bench_search

    from ctxkeep.query.search import search
    from ctxkeep.query.search.parse import Filters

    conn = sqlite_store.connect(home, readonly=True, mmap=True)
    seen: dict[str, None] = {}
    pat = re.compile(r"FROM fts_words WHERE fts_words MATCH '((?:[^']|'')*)'")

    def trace(sql: str) -> None:
        for m in pat.finditer(sql):
            seen.setdefault(m.group(1).replace("''", "'"), None)

    conn.set_trace_callback(trace)
    for q, f in bench_search.queries():
        search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000, parallel=False)
    conn.set_trace_callback(None)
    conn.close()
    return list(seen)


def cached_matches(home: Path, path: Path | None) -> list[str]:
    """``bench_matches``, kept in ``path`` (JSON) when given."""
    if path is not None and path.exists():
        return json.loads(path.read_text())
    out = bench_matches(home)
    if path is not None:
        path.write_text(json.dumps(out, indent=0))
    return out


def needed(home: Path, pairs_path: Path, n_common: int, matches: Path | None) -> None:
    """The pair lists the bench's statements use, each from the store's phrase matches."""
    store = sqlite_store.connect(home, readonly=True)
    c0 = cpu()
    common = common_terms(store, n_common)
    print(f"common list: {cpu() - c0:.1f} CPU s", flush=True)
    if pairs_path.exists():
        pairs_path.unlink()
    db = _open_pairs(pairs_path, common)
    cs = set(common)
    terms = Terms()
    want: dict[str, tuple[str, str]] = {}
    for match in cached_matches(home, matches):
        shape = _phrases(match)
        if shape is None:
            continue
        for p in shape[0]:
            text, prefix = _phrase_text(p)
            runs = RUN.findall(text)
            ts = [terms.of(r) for r in runs]
            if any(len(t) != 1 for t in ts):
                continue  # a run of several terms: not built here
            flat = [t[0] for t in ts]
            if prefix:
                flat, runs = flat[:-1], runs[:-1]
            for i in range(len(flat) - 1):
                if flat[i] in cs or flat[i + 1] in cs:
                    want.setdefault(f"{flat[i]}_{flat[i + 1]}", (runs[i], runs[i + 1]))
    rows: dict[int, set[str]] = {}
    for tok, (a, b) in want.items():
        q = '{title text} : "' + a.replace('"', '""') + " " + b.replace('"', '""') + '"'
        ids = [r[0] for r in store.execute("SELECT rowid FROM fts_words WHERE fts_words MATCH ?", (q,))]
        print(f"  {tok}: {len(ids):,} chunks", flush=True)
        for i in ids:
            rows.setdefault(i, set()).add(tok)
    with db:
        db.executemany(
            "INSERT INTO fts_pairs(rowid, pairs) VALUES(?, ?)",
            ((i, " ".join(s)) for i, s in sorted(rows.items())),
        )
        db.execute("INSERT INTO fts_pairs(fts_pairs) VALUES('optimize')")
        # only these pairs are in the table: a MATCH of any other is not checked
        db.execute("CREATE TABLE built(token TEXT PRIMARY KEY)")
        db.executemany("INSERT INTO built VALUES(?)", [(t,) for t in want])
    db.close()
    print(f"{len(want)} pair tokens, {len(rows):,} chunks")


def measure(
    home: Path, pairs_path: Path, rounds: int, cap: int, only: str | None, cache: Path | None
) -> None:
    matches = cached_matches(home, cache) if only is None else [only]
    conn = sqlite_store.connect(home, readonly=True, mmap=True)
    assert native_rank.ready(conn), "the native ranking library is needed (ck_bm25)"
    conn.execute("ATTACH DATABASE ? AS pairs", (f"file:{pairs_path}?mode=ro",))
    common = {r[0] for r in conn.execute("SELECT term FROM pairs.common")}
    built = built_tokens(conn)
    terms = Terms()
    print(f"load {os.getloadavg()[0]:.1f}; {len(matches)} distinct MATCHes of fts_words", flush=True)
    results = []
    for match in matches:
        pm = checkable(pair_filter(terms, common, match), built)
        if pm is None:
            continue
        # first runs: fill the counts (as a long-lived process has them), compare
        plain = run_plain(conn, match)
        paired, n_c = run_paired(conn, match, pm, cap)
        same = plain == paired
        tp, tq = [], []
        for _ in range(rounds):
            t = time.thread_time()
            run_plain(conn, match)
            tp.append(time.thread_time() - t)
            t = time.thread_time()
            run_paired(conn, match, pm, cap)
            tq.append(time.thread_time() - t)
        results.append((1000 * min(tp), 1000 * min(tq), n_c, len(plain), same, match, pm))
    results.sort(reverse=True)
    print(f"load {os.getloadavg()[0]:.1f}")
    print("| plain ms | pairs ms | candidates | rows | same | MATCH | pairs MATCH |")
    print("|---|---|---|---|---|---|---|")
    for a, b, n, rows, same, m, pm in results:
        if a >= 2.0 or b >= 2.0 or not same:
            print(
                f"| {a:.2f} | {b:.2f} | {'over cap' if n < 0 else n} | {rows} | {same} | `{m[:70]}` | `{pm[:50]}` |"
            )
    n_same = sum(r[4] for r in results)
    print(
        f"{len(results)} statements rewritten of {len(matches)}; same rows and ranks: {n_same}; "
        f"sum plain {sum(r[0] for r in results):.1f} ms, pairs {sum(r[1] for r in results):.1f} ms; "
        f"over cap {sum(r[2] < 0 for r in results)}, no candidate {sum(r[2] == 0 for r in results)}"
    )


def search_ab(home: Path, pairs_path: Path, rounds: int) -> None:
    """bench_search.py's 208 queries on one connection (``parallel=False``), each list of
    ``fts_words`` first checked against the pair index (``retrieve.fts_ids``,
    ``newest_match``, ``holds_none``, ``match_count`` patched: a MATCH whose pairs hold no
    chunk has no row) or not, alternating; a pass to fill the counts, then ``rounds``
    rounds; thread CPU ms per search; every query's hits compared (bench_search's digest)."""
    import bench_search

    from ctxkeep.query.search import Filters, search

    conn = sqlite_store.connect(home, readonly=True, mmap=True)
    assert native_rank.ready(conn)
    conn.execute("ATTACH DATABASE ? AS pairs", (f"file:{pairs_path}?mode=ro",))
    common = {r[0] for r in conn.execute("SELECT term FROM pairs.common")}
    built = built_tokens(conn)
    terms = Terms()
    r = retrieve
    orig = {n: getattr(r, n) for n in ("fts_ids", "newest_match", "holds_none", "match_count")}
    proven = [0, 0]  # checks, proven empty

    def empty(fts: str, match: str) -> bool:
        if fts != "fts_words":
            return False
        pm = checkable(pair_filter(terms, common, match), built)
        if pm is None:
            return False
        proven[0] += 1
        none = (
            conn.execute("SELECT 1 FROM pairs.fts_pairs WHERE fts_pairs MATCH ? LIMIT 1", (pm,)).fetchone()
            is None
        )
        proven[1] += none
        return none

    patched = {
        "fts_ids": lambda c, fts, m, *a, **k: [] if empty(fts, m) else orig["fts_ids"](c, fts, m, *a, **k),
        "newest_match": lambda c, fts, m: None if empty(fts, m) else orig["newest_match"](c, fts, m),
        "holds_none": lambda c, fts, m: True if empty(fts, m) else orig["holds_none"](c, fts, m),
        "match_count": lambda c, fts, m, cap: 0 if empty(fts, m) else orig["match_count"](c, fts, m, cap),
    }

    def run(q: str, f: dict, on: bool) -> tuple[float, str]:
        for n, fn in (patched if on else orig).items():
            setattr(r, n, fn)
        try:
            t = time.thread_time()
            res = search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000, parallel=False)
            return 1000 * (time.thread_time() - t), bench_search._digest(res)
        finally:
            for n, fn in orig.items():
                setattr(r, n, fn)

    qs = bench_search.queries()
    print(f"load {os.getloadavg()[0]:.1f}; {len(qs)} queries; warm-up pass", flush=True)
    for q, f in qs:
        run(q, f, False)
        run(q, f, True)
    same = 0
    times: dict[bool, list[list[float]]] = {False: [], True: []}
    per_q: dict[int, list[float]] = {}
    for rnd in range(rounds):
        tt: dict[bool, list[float]] = {False: [], True: []}
        for i, (q, f) in enumerate(qs):
            order = (False, True) if (i + rnd) % 2 == 0 else (True, False)
            got = {}
            for on in order:
                ms, dg = run(q, f, on)
                tt[on].append(ms)
                got[on] = dg
            same += got[False] == got[True]
            per_q.setdefault(i, [0.0, 0.0])
            per_q[i][0] += tt[False][-1]
            per_q[i][1] += tt[True][-1]
        for on in (False, True):
            times[on].append(tt[on])
        print(f"round {rnd + 1}: load {os.getloadavg()[0]:.1f}", flush=True)
    for on in (False, True):
        for k, xs in enumerate(times[on]):
            print(
                f"{'pairs' if on else 'plain'} round {k + 1}: CPU p50 / p95 / p99 "
                f"{bench_search.pct(xs, 0.5):.1f} / {bench_search.pct(xs, 0.95):.1f} / {bench_search.pct(xs, 0.99):.1f} ms, "
                f"sum {sum(xs):.0f}, above 25 ms {sum(x > 25 for x in xs)}"
            )
    print(f"same hits: {same} of {rounds * len(qs)}; pair checks {proven[0]}, proven empty {proven[1]}")
    print("| query | filters | plain ms | pairs ms (sum of rounds) |")
    print("|---|---|---|---|")
    for i, (a, b) in sorted(per_q.items(), key=lambda kv: kv[1][1] - kv[1][0])[:12]:
        print(f"| `{qs[i][0]}` | {qs[i][1] or ''} | {a:.1f} | {b:.1f} |")
    print("slowest with pairs (sum of rounds):")
    for i, (a, b) in sorted(per_q.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"| `{qs[i][0]}` | {qs[i][1] or ''} | {a:.1f} | {b:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("op", choices=["build", "needed", "measure", "search"])
    ap.add_argument("home", type=Path)
    ap.add_argument("pairs", type=Path)
    ap.add_argument("--common", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cap", type=int, default=200)
    ap.add_argument("--only", help="measure this one MATCH")
    ap.add_argument(
        "--limit", type=int, help="build: the first LIMIT chunks only (growth scaled by their share)"
    )
    ap.add_argument("--matches", type=Path, help="keep the bench's MATCHes in this JSON file")
    a = ap.parse_args()
    if a.op == "build":
        build(a.home, a.pairs, a.common, a.limit)
    elif a.op == "needed":
        needed(a.home, a.pairs, a.common, a.matches)
    elif a.op == "search":
        search_ab(a.home, a.pairs, a.rounds)
    else:
        measure(a.home, a.pairs, a.rounds, a.cap, a.only, a.matches)


if __name__ == "__main__":
    main()
