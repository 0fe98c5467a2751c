"""Ingest benchmark (a script that prints figures; not a test, not collected by pytest).

Builds a large tree with ``shared/tools/scale_corpus.py OUT --mb N --unique-text``
(every copy gets fresh ids and a copy tag on every text, so dedup cannot collapse
copies), then measures, in this order and in the same run:

1. baseline: parse every line of the tree's Claude Code and Codex JSONL files with
   orjson and insert the extracted texts (the string values of text-bearing keys, see
   ``TEXT_KEYS``; base64 ``data`` and ``encrypted_content`` excluded) into a bare FTS5
   ``porter unicode61`` table in one transaction;
2. ctxkeep ingest in-process (``pipeline.engine.run_ingest``, no Prefect);
3. ctxkeep ingest as a whole process (``ctxkeep ingest --no-prefect``) into a fresh
   store, then a no-op re-ingest of the same tree (whole process).

Prints MB/s of raw JSONL (bytes of the Claude Code + Codex files), wall seconds, CPU
seconds (user + sys, from ``getrusage``: the machine has 2 cores, the baseline uses
one), peak RSS (``ru_maxrss`` of this process, and of the child processes), and store
sizes.
Targets (issue 14, target 1): ingest wall ≤ 1.5× baseline, in-process and whole
process; peak RSS ≤ 600 MB (issue 2's no-op re-ingest ≤ 5 s still printed).

Usage::

    uv run python tests/bench/bench_ingest.py [--mb 200] [--tree DIR] [--keep]

``--tree`` reuses a tree built before (it is built there if missing). The machine is
shared: run it a few times at most.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[2]
SCALE = (ROOT.parent / "shared" / "tools" / "scale_corpus.py").resolve()
TEXT_KEYS = {
    "text",
    "content",
    "output",
    "message",
    "summary",
    "thinking",
    "arguments",
    "input",
    "command",
    "stdout",
    "stderr",
}
SKIP_KEYS = {"data", "encrypted_content", "signature"}


def jsonl_files(home: Path) -> list[Path]:
    """The Claude Code and Codex session files of a tree (what ctxkeep ingests)."""
    out = sorted((home / ".claude" / "projects").rglob("*.jsonl"))
    out += sorted((home / ".codex").rglob("rollout-*.jsonl"))
    return out


def _texts(obj, key: str, out: list[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k not in SKIP_KEYS:
                _texts(v, k, out)
    elif isinstance(obj, list):
        for v in obj:
            _texts(v, key, out)
    elif isinstance(obj, str) and key in TEXT_KEYS and obj:
        out.append(obj)


def baseline(files: list[Path], db: Path) -> dict:
    """orjson-parse every line and insert the extracted texts into a bare FTS5 table."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    conn.execute("BEGIN")
    nbytes = ntext = lines = bad = 0
    for p in files:
        rows: list[str] = []
        with open(p, "rb") as f:
            for line in f:
                nbytes += len(line)
                if not line.strip():
                    continue
                lines += 1
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    bad += 1
                    continue
                _texts(rec, "", rows)
        ntext += sum(len(r) for r in rows)
        conn.executemany("INSERT INTO t(text) VALUES(?)", ((r,) for r in rows))
    conn.execute("COMMIT")
    conn.close()
    secs = time.perf_counter() - t0
    return {
        "seconds": secs,
        "bytes": nbytes,
        "lines": lines,
        "bad": bad,
        "text_chars": ntext,
        "db_bytes": sum(x.stat().st_size for x in db.parent.glob(db.name + "*")),
    }


def store_sizes(home: Path) -> dict:
    return {p.name: p.stat().st_size for p in sorted(home.iterdir()) if p.is_file()}


def cpu_seconds(who=resource.RUSAGE_SELF) -> float:
    """User + system CPU seconds used so far by this process (or its waited children)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_cli(home: Path, tree: Path) -> tuple[float, dict, int, float]:
    """``ctxkeep ingest --no-prefect --json`` as a whole process: (seconds, summary,
    child peak RSS in KiB, child CPU seconds)."""
    env = dict(os.environ, HOME=str(tree), CTXKEEP_HOME=str(home))
    env.pop("CLAUDE_CONFIG_DIR", None)
    env.pop("CODEX_HOME", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    cpu0 = cpu_seconds(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "ingest", "--no-prefect", "--json", "--no-progress"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    secs = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if r.returncode != 0:
        raise SystemExit(f"ctxkeep ingest failed ({r.returncode}): {r.stderr[-2000:]}")
    return secs, json.loads(r.stdout), max(rss, before), cpu_seconds(resource.RUSAGE_CHILDREN) - cpu0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--tree", type=Path, help="reuse/build the scaled tree here")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir")
    a = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ctxkeep-bench-"))
    tree = a.tree or work / "home"
    try:
        if not tree.exists():
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, str(SCALE), str(tree), "--mb", str(a.mb), "--unique-text"], check=True
            )
            print(f"built tree {tree} in {time.perf_counter() - t0:.1f} s")
        files = jsonl_files(tree)
        raw = sum(p.stat().st_size for p in files)
        mb = raw / 1e6
        print(f"tree: {len(files)} Claude Code + Codex JSONL files, {mb:.1f} MB raw")

        # page-cache warm-up so neither side pays the first read
        for p in files:
            p.read_bytes()

        c0 = cpu_seconds()
        b = baseline(files, work / "baseline.db")
        c_b = cpu_seconds() - c0
        print(
            f"baseline (orjson + FTS5 porter unicode61): {b['seconds']:.2f} s, CPU {c_b:.2f} s, "
            f"{mb / b['seconds']:.1f} MB/s, {b['lines']:,} lines, "
            f"{b['text_chars'] / 1e6:.1f} M text chars, index {b['db_bytes'] / 1e6:.1f} MB"
        )

        from ctxkeep.pipeline.engine import run_ingest
        from ctxkeep.sources.contract import DiscoveryContext

        store = work / "store-inproc"
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        c0 = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN)  # + its reader process
        t0 = time.perf_counter()
        s = run_ingest(store, ctx=DiscoveryContext(home=tree, env={}))
        t_in = time.perf_counter() - t0
        c_in = cpu_seconds() + cpu_seconds(resource.RUSAGE_CHILDREN) - c0
        rss_in = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(
            f"ctxkeep in-process: {t_in:.2f} s, CPU {c_in:.2f} s ({c_in / t_in:.0%} of wall), "
            f"{mb / t_in:.1f} MB/s, "
            f"{t_in / b['seconds']:.2f}x baseline, {s.entries_new:,} entries, "
            f"{s.quarantined} quarantined; peak RSS {rss_in / 1024:.0f} MB "
            f"(before ingest {rss0 / 1024:.0f} MB)"
        )
        sizes = store_sizes(store)
        print("  store: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in sizes.items()))

        store2 = work / "store-proc"
        t_p, s_p, rss_p, c_p = run_cli(store2, tree)
        print(
            f"ctxkeep whole process: {t_p:.2f} s, CPU {c_p:.2f} s ({c_p / t_p:.0%} of wall), "
            f"{mb / t_p:.1f} MB/s, "
            f"{t_p / b['seconds']:.2f}x baseline, {s_p['entries_new']:,} entries; "
            f"peak RSS (children) {rss_p / 1024:.0f} MB"
        )
        t_n, s_n, _, _ = run_cli(store2, tree)
        print(
            f"no-op re-ingest, whole process: {t_n:.2f} s, {s_n['entries_new']} new entries, "
            f"{s_n['bytes']} bytes read"
        )
        ok = (max(t_in, t_p) <= 1.5 * b["seconds"], max(rss_in, rss_p) <= 600 * 1024, t_n <= 5.0)
        print(
            f"targets (issue 14): wall (in-process and whole process) ≤ 1.5x baseline "
            f"{'OK' if ok[0] else 'MISSED'}; peak RSS ≤ 600 MB {'OK' if ok[1] else 'MISSED'}; "
            f"no-op ≤ 5 s {'OK' if ok[2] else 'MISSED'}"
        )
    finally:
        if a.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
