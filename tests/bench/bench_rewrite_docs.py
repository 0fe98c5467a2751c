"""Benchmark (prints figures, not a test): the cost of re-reading a Gemini CLI JSON
document that the agent rewrote in place with one more message.

Builds a large chat document in a temp dir from the real corpus session
(session-2025-12-24…json, its 41 messages repeated with fresh ids until the file is
about --mb megabytes), ingests it into a fresh store, then rewrites it with one more
message (as Gemini CLI does: truncate + write, same inode) and ingests again.

    uv run python tests/bench/bench_rewrite_docs.py --mb 20
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ctxkeep.pipeline.engine import run_ingest  # noqa: E402
from ctxkeep.sources.contract import DiscoveryContext  # noqa: E402

SRC = (
    ROOT.parent / "shared/corpus/home/.gemini/tmp/"
    "3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/"
    "session-2025-12-24T06-27-36e8d28f.json"
)


def build(mb: float) -> dict:
    src = json.loads(SRC.read_text())
    msgs, i = [], 0
    size = 0
    while size < mb * 1e6:
        for m in src["messages"]:
            m2 = copy.deepcopy(m)
            m2["id"] = f"{m['id']}-{i}"
            for tc in m2.get("toolCalls") or []:
                tc["id"] = f"{tc['id']}-{i}"
            msgs.append(m2)
        i += 1
        size = len(json.dumps(msgs))
    return dict(src, messages=msgs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        p = home / ".gemini/tmp/bench/chats/session-2026-01-01T00-00-bench000.json"
        p.parent.mkdir(parents=True)
        doc = build(args.mb)
        p.write_text(json.dumps(doc, indent=2))
        old = time.time() - 3600
        os.utime(p, (old, old))
        store = Path(tmp) / "store"
        ctx = DiscoveryContext(home=home, env={})
        t0 = time.perf_counter()
        s1 = run_ingest(store, ctx=ctx)
        t1 = time.perf_counter() - t0
        doc["messages"].append(
            {
                "id": "bench-new",
                "timestamp": "2026-01-01T01:00:00Z",
                "type": "user",
                "content": "one more question",
            }
        )
        with open(p, "r+") as f:
            f.truncate(0)
            f.write(json.dumps(doc, indent=2))
        os.utime(p, (old + 10, old + 10))
        t0 = time.perf_counter()
        s2 = run_ingest(store, ctx=ctx)
        t2 = time.perf_counter() - t0
        t0 = time.perf_counter()
        s3 = run_ingest(store, ctx=ctx)
        t3 = time.perf_counter() - t0
        size = p.stat().st_size
        print(f"document: {size / 1e6:.1f} MB, {len(doc['messages']):,} messages")
        print(f"first ingest:   {t1:6.2f} s  {size / 1e6 / t1:6.1f} MB/s  {s1.entries_new:,} entries")
        print(f"rewrite +1 msg: {t2:6.2f} s  {size / 1e6 / t2:6.1f} MB/s  {s2.entries_new:,} new entries")
        print(f"unchanged:      {t3:6.2f} s  files read {s3.files_read}")
        print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
