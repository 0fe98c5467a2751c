"""Benchmark (prints figures, not a test): peak RSS of a whole-process ingest
(``ctxkeep ingest --no-prefect``) of one hostile session file, side by side with a
1 MB text line (the floor: what any ingest costs) and, with ``--baseline DIR``, the
same cases run by another checkout's ctxkeep (e.g. ``/work/main`` before the line cap).

Cases (tests/rss_case.py; the big ones are sparse files): a 300 MB unterminated last
line, a 200 MB single line, a text line of 16 MB (the default cap: parsed, redacted,
chunked) and of 30 MB (over the cap: quarantined as its hash, size and head).
Issue 24's budget: 400 MB whatever one file holds.

    uv run python tests/bench/bench_rss.py                     # all cases
    uv run python tests/bench/bench_rss.py --scale 0.01        # tiny: check it runs
    uv run python tests/bench/bench_rss.py --baseline /work/main
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import rss_case

CASES = [
    ("text line (floor)", "text_line", 1),
    ("text line at the cap", "text_line", 16),
    ("text line over the cap", "text_line", 30),
    ("unterminated last line", "unterminated_line", 300),
    ("single line", "single_line", 200),
]


def run(kind: str, mb: float, python: str, cwd: Path | None) -> dict:
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        getattr(rss_case, kind)(t / "home", mb if kind == "text_line" else max(1, int(mb)))
        return rss_case.ingest_peak_rss(t / "home", t / "store", python=python, cwd=cwd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case's size")
    ap.add_argument("--baseline", type=Path, help="another checkout (its .venv) to run the same cases")
    a = ap.parse_args()
    runs = [("this", sys.executable, None)]
    if a.baseline:
        runs.append((a.baseline.name, str(a.baseline / ".venv" / "bin" / "python"), a.baseline))
    print(f"{'case':<26}{'MB':>8}" + "".join(f"{name + ' peak RSS MB':>26}" for name, _, _ in runs))
    for label, kind, mb in CASES:
        size = mb * a.scale
        cells = []
        for _name, python, cwd in runs:
            r = run(kind, size, python, cwd)
            cells.append(f"{r['rss_mb']:>10.1f}" + (f" (exit {r['rc']})" if r["rc"] else "") + " " * 15)
        print(f"{label:<26}{size:>8.1f}" + "".join(f"{c:>26}" for c in cells), flush=True)
    print("budget: 400 MB peak RSS whatever one file holds (issue 24)")


if __name__ == "__main__":
    main()
