"""Search benchmark: p50/p95 of 200 mixed queries in-process, and the whole-process
time of `ctxkeep search`, on a store built from a scaled corpus.

Build the store once (slow: ~8 min for 500 MB on 2 busy cores):

    python3 /work/shared/tools/scale_corpus.py /tmp/bench/home --mb 500 --unique-text
    HOME=/tmp/bench/home CTXKEEP_HOME=/tmp/bench/store .venv/bin/ctxkeep ingest --no-prefect

then run:  uv run python tests/bench/bench_search.py /tmp/bench/store

The two Markdown sessions of the corpus (Aider history with CJK text, a SpecStory
export) are indexed as notes first, as in the relevance set, so CJK queries have
something to find. Prints figures; asserts nothing (targets: p95 ≤ 50 ms in-process,
≤ 0.5 s whole process).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
NOTES = {
    "aider": "code/zen-mcp-server/.aider.chat.history.md",
    "specstory": "code/minsky/.specstory/history/2025-04-28_16-22-backlog-task-inquiry.md",
}

WORDS = [
    "error",
    "test",
    "file",
    "timeline filtering",
    "embedding",
    "printer",
    "gcode",
    "speckit",
    "constitution",
    "branch",
    "commit",
    "install",
    "notebook",
    "music",
    "worktree",
    "teammate",
    "LinuxCNC",
    "OpenPrintTag",
    "filament",
    "README",
    "requirements",
    "docs update",
    "gui tab",
    "macro",
    "sandbox denied",
    "exit code",
    "the",
    "it's",
    "c++",
    "foo AND",
    "NOT",
    "(x",
]
PHRASES = [
    '"command not found"',
    '"Not on a feature branch"',
    '"No MCP servers configured"',
    '"active high"',
    '"step by step"',
    '"update CLAUDE.md"',
    '"multi-color nozzles"',
    '"Outside diff range comments"',
]
IDENTS = [
    "useTodos",
    "PLACEHOLDER_RE",
    "validateUs",
    "QT_QPA_PLATFORM=xcb",
    "005-orchestrator-architecture",
    "orchestrator.openapi.yaml",
    "/Users/chip/dev/ai-music/diverse_musical_ai.py",
    "TodoWrite",
    "apply_patch",
    "extract-coderabbit-feedback.py",
    "AutoTokenizer",
    "QTableWidgetItem",
    "create-next-app",
    "main_window",
    "OPK_DEBUG",
]
CJK = ["调研", "图片", "处理", "分析一下", "東京", "字段", "问题", "的"]
FILTERS = [
    {},
    {"agent": "codex"},
    {"agent": "claude-code", "kind": "tool_call"},
    {"kind": "message"},
    {"role": "user"},
    {"tool": "Bash"},
    {"since": "2025-11-01"},
    {"since": "2025-09-01", "until": "2025-12-01"},
    {"project": "/path/to/Demo"},
    {"kind": "tool_result", "agent": "codex"},
]


def queries(n: int = 200, seed: int = 4) -> list[tuple[str, dict]]:
    """``n`` (query, filters) pairs: words 40 %, phrases 15 %, identifiers 25 %, CJK
    10 %, and a filter on every third query; deterministic."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        r = rnd.random()
        pool = WORDS if r < 0.4 else PHRASES if r < 0.55 else IDENTS if r < 0.8 else CJK if r < 0.9 else WORDS
        q = rnd.choice(pool)
        if r >= 0.9:  # two-word mixes
            q = f"{rnd.choice(WORDS)} {rnd.choice(IDENTS)}"
        out.append((q, rnd.choice(FILTERS[1:]) if i % 3 == 0 else {}))
    return out


def main(home: Path) -> None:
    from ctxkeep.pipeline.notes import index_note
    from ctxkeep.query.search import Filters, search
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.files import STORE_DB

    conn = sqlite_store.connect(home)
    for label, rel in NOTES.items():
        if (CORPUS_HOME / rel).exists():
            index_note(conn, label, path=CORPUS_HOME / rel)
    conn.close()
    db = home / STORE_DB
    n_entries = (
        sqlite_store.connect(home, readonly=True).execute("SELECT count(*) FROM entries").fetchone()[0]
    )
    n_chunks = sqlite_store.connect(home, readonly=True).execute("SELECT count(*) FROM chunks").fetchone()[0]
    print(
        f"store {home}: {db.stat().st_size / 1e6:.0f} MB store.db, {n_entries:,} entries, {n_chunks:,} chunks"
    )

    conn = sqlite_store.connect(home, readonly=True)
    qs = queries()
    for q, f in qs[:20]:  # warm the page cache
        search(conn, q, filters=Filters(**f), limit=10)
    times, by_kind, per = [], {}, []
    for q, f in qs:
        t0 = time.perf_counter()
        search(conn, q, filters=Filters(**f), limit=10, budget_tokens=4000)
        ms = (time.perf_counter() - t0) * 1000
        times.append(ms)
        per.append((ms, q, f))
        by_kind.setdefault("filtered" if f else "plain", []).append(ms)
    times.sort()
    p = lambda xs, q: sorted(xs)[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]  # noqa: E731
    print(
        f"in-process, {len(times)} queries: p50 {p(times, 0.5):.1f} ms, p95 {p(times, 0.95):.1f} ms, "
        f"max {times[-1]:.1f} ms, mean {statistics.mean(times):.1f} ms"
    )
    for k, xs in by_kind.items():
        print(f"  {k}: n={len(xs)} p50 {p(xs, 0.5):.1f} ms p95 {p(xs, 0.95):.1f} ms")
    for ms, q, f in sorted(per, key=lambda x: x[0], reverse=True)[:8]:
        print(f"  slow: {ms:6.0f} ms  {q!r} {f}")
    import os

    print(f"  (load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    exe = ROOT / ".venv" / "bin" / "ctxkeep"
    runs = []
    for q in ("timeline filtering", "调研", "useTodos", '"command not found"'):
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(
                [str(exe), "search", q, "--home", str(home), "--json"], check=True, stdout=subprocess.DEVNULL
            )
            runs.append(time.perf_counter() - t0)
    print(
        f"whole process `ctxkeep search` ({len(runs)} runs): median {statistics.median(runs):.2f} s, "
        f"max {max(runs):.2f} s"
    )
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"  (bare python start: {time.perf_counter() - t0:.2f} s)")
    print(
        json.dumps(
            {
                "p50_ms": round(p(times, 0.5), 1),
                "p95_ms": round(p(times, 0.95), 1),
                "process_median_s": round(statistics.median(runs), 2),
            }
        )
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
