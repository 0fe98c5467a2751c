"""Benchmark (prints figures, not a test): chunking one long content for the full-text
index (``transforms.chunk.chunk_text``), in MB/s.

Texts (built in memory, nothing read or written): a plain tool output of --lines short
lines (900,000 lines, 35 MB: the text of tests/transforms/test_chunk.py) and the same
with a code fence every 200 lines (many fence spans).

    uv run python tests/bench/bench_chunk.py --lines 900000
"""

from __future__ import annotations

import argparse
import time

from ctxkeep.transforms.chunk import chunk_text, fence_spans


def plain(n: int) -> str:
    return "".join(f"line {i} of a very long tool output\n" for i in range(n))


def fenced(n: int) -> str:
    lines = plain(n).splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        if i % 200 == 0:
            out.append("```python\n" if i % 400 == 0 else "```\n")
        out.append(line)
    return "".join(out)


def run(name: str, text: str, repeat: int) -> None:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        chunks = chunk_text(text)
        best = min(best, time.perf_counter() - t0)
    mb = len(text.encode()) / 1e6
    print(
        f"{name:7s} {mb:6.1f} MB  {len(chunks):6d} chunks  {len(fence_spans(text)):6d} fences  "
        f"best of {repeat}: {best:6.3f} s  {mb / best:7.1f} MB/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=900_000, help="lines of each text (default 900000)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per text; the best is printed")
    a = ap.parse_args()
    run("plain", plain(a.lines), a.repeat)
    run("fenced", fenced(a.lines), a.repeat)


if __name__ == "__main__":
    main()
