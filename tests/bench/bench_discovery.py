"""Benchmark: the discovery of every registered agent (``sources.discover_all``) on a
home that holds none of them, side by side with the corpus home, per agent and in
total (issue 25's target: ≤ 50 ms for all agents on an empty home). Each figure is
the median of ``N`` runs (wall ms; every source module imported before timing).
Prints figures; asserts nothing about speed. Run:
``uv run python tests/bench/bench_discovery.py [N]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from ctxkeep.sources import SOURCES, discover_all
from ctxkeep.sources.contract import DiscoveryContext

CORPUS_HOME = Path(__file__).resolve().parents[3] / "shared/corpus/home"
TARGET_MS = 50.0


def _median_ms(fn, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main(n: int = 20) -> None:
    for name in SOURCES:  # imports every source module outside the timings
        SOURCES[name]
    with tempfile.TemporaryDirectory() as d:
        empty = DiscoveryContext(home=Path(d), env={})
        homes = {"empty home": empty}
        if CORPUS_HOME.is_dir():
            homes["corpus home"] = DiscoveryContext(home=CORPUS_HOME, env={})
        print(f"discovery of {len(SOURCES)} agents, median of {n} runs (ms)")
        print(f"{'agent':<16}" + "".join(f"{h:>14}" for h in homes))
        for name in SOURCES:
            cells = [_median_ms(lambda c=c, a=name: discover_all(c, agents=[a]), n) for c in homes.values()]
            print(f"{name:<16}" + "".join(f"{x:>14.2f}" for x in cells))
        totals = [_median_ms(lambda c=c: discover_all(c), n) for c in homes.values()]
        print(f"{'all agents':<16}" + "".join(f"{x:>14.2f}" for x in totals))
        print(
            f"target on an empty home: <= {TARGET_MS:.0f} ms ({'met' if totals[0] <= TARGET_MS else 'NOT met'})"
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
