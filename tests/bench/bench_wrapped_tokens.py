"""What finding tokens cut by a line break costs (``transforms.wrapped_tokens``,
newuser18 F1): the redaction of the session corpus's texts (``redact_series``: one more
Polars pass, ``HINT``) and of its raw files (the vault's ``redact_raw_many``: lines,
and ``across_lines`` for plain-text files), CPU seconds of this checkout beside a
baseline checkout's, alternating in one run, with the load average.

    uv run python tests/bench/bench_wrapped_tokens.py [--base /work/wt-base] [--mb 20] [--rounds 3]
    uv run python tests/bench/bench_wrapped_tokens.py --self   # F1 off vs on, this checkout

Each measurement is a child process of the checkout's own ``.venv`` (its code and
libraries), timing CPU (user+sys, all threads) of the calls after a warm-up.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path("/work/shared/corpus/home")

CHILD = r"""
import json, os, resource, sys
from pathlib import Path
import polars as pl
if os.environ.get("NUFIX18_F1_OFF"):  # --self: this checkout with F1's module switched off
    from ctxkeep.transforms import wrapped_tokens as w
    w.spans = lambda text: []
    w.hinted = lambda s, lit: lit.fill_null(False) & False
    w.across_lines = lambda lines, ranges: {}
    w.plain_with_prefix = lambda datas: False
from ctxkeep.transforms.redact import redact_series
from ctxkeep.sinks.vault.capture import redact_raw_many
mb = float(sys.argv[1])
files = [p for p in Path(sys.argv[2]).rglob("*") if p.is_file() and p.suffix in (".jsonl", ".md", ".json", ".history")]
datas = [p.read_bytes() for p in files]
lines = [l for d in datas for l in d.decode("utf-8", "replace").splitlines()]
texts, n = [], 0
while n < mb * 1e6:
    for l in lines:
        texts.append(l); n += len(l)
        if n >= mb * 1e6: break
s = pl.Series(texts, dtype=pl.String)
raw, m = [], 0
while m < mb * 1e6:
    raw += datas; m += sum(map(len, datas))
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
redact_series(s.head(500)); redact_raw_many(datas[:3])
a = cpu(); redact_series(s); b = cpu(); redact_raw_many(raw); c = cpu()
print(json.dumps({"texts_mb": n / 1e6, "raw_mb": m / 1e6, "series_cpu": b - a, "raw_cpu": c - b}))
"""


def run(tree: Path, mb: float, off: bool = False) -> dict:
    py = tree / ".venv" / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(tree)}
    if off:
        env["NUFIX18_F1_OFF"] = "1"
    out = subprocess.run(
        [str(py), "-c", CHILD, str(mb), str(CORPUS)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, default=Path("/work/wt-base"))
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--self",
        action="store_true",
        help="baseline: this checkout with F1's module switched off (its own cost)",
    )
    a = ap.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    print(
        f"{'round':>5} {'tree':>6} {'texts MB':>9} {'series CPU s':>13} {'raw MB':>7} {'raw CPU s':>10}  load"
    )
    sums: dict[str, list[float]] = {"base": [0, 0], "now": [0, 0]}
    for i in range(a.rounds):
        for name, tree in (("base", ROOT if a.self else a.base), ("now", ROOT)):
            r = run(tree, a.mb, off=a.self and name == "base")
            sums[name][0] += r["series_cpu"]
            sums[name][1] += r["raw_cpu"]
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(
                f"{i:>5} {name:>6} {r['texts_mb']:>9.1f} {r['series_cpu']:>13.3f} {r['raw_mb']:>7.1f} "
                f"{r['raw_cpu']:>10.3f}  {load}"
            )
    for name, (sc, rc) in sums.items():
        print(
            f"{name:>6}: series {sc / a.rounds:.3f} CPU s, raw {rc / a.rounds:.3f} CPU s (mean of {a.rounds})"
        )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
