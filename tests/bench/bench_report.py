"""Report benchmark: ``ctxkeep report daily --json`` vs ``ccusage daily --json``,
whole process, on the same scaled tree, side by side in one run (target: ratio ≤ 0.5;
ctxkeep reads DuckDB, ccusage re-parses every file).

Build the tree and the store once (~1 min for 200 MB):

    python3 /work/shared/tools/scale_corpus.py /tmp/rbench/home --mb 200 --unique-text
    HOME=/tmp/rbench/home CTXKEEP_HOME=/tmp/rbench/store .venv/bin/ctxkeep ingest --no-prefect

then run:  uv run python tests/bench/bench_report.py /tmp/rbench/home /tmp/rbench/store

ccusage 20.0.24 skips JSON lines written with spaces after colons and aborts on
6-digit fractional timestamps, both of which the scaled tree has; this script first
writes a copy of the tree (``<home>-ccusage``) re-serialized compactly with
millisecond timestamps for ccusage's side (the same usage; the copy is made once).
Prints figures; asserts nothing. ``CCUSAGE``: the ccusage binary (default
``/tmp/peers/node_modules/.bin/ccusage``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = 5
_FRACTION = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})\d+")


def _ms(v):
    if isinstance(v, str):
        return _FRACTION.sub(r"\1", v)
    if isinstance(v, dict):
        return {k: _ms(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_ms(x) for x in v]
    return v


def _compact(text: str) -> str:
    return json.dumps(_ms(json.loads(text)), separators=(",", ":"), ensure_ascii=False)


def ccusage_copy(home: Path) -> Path:
    """``<home>-ccusage``: ``home`` with every JSON/JSONL file re-serialized compactly
    and with millisecond timestamps (other files copied as they are)."""
    dst = home.with_name(home.name + "-ccusage")
    if (dst / ".done").exists():
        return dst
    shutil.rmtree(dst, ignore_errors=True)
    for src in home.rglob("*"):
        out = dst / src.relative_to(home)
        if src.is_dir():
            out.mkdir(parents=True, exist_ok=True)
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix == ".jsonl":
            lines = []
            for ln in src.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    lines.append(_compact(ln))
                except ValueError:
                    lines.append(ln)
            out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        elif src.suffix == ".json":
            try:
                out.write_text(_compact(src.read_text(encoding="utf-8")), encoding="utf-8")
            except ValueError:
                shutil.copyfile(src, out)
        else:
            shutil.copyfile(src, out)
    (dst / ".done").write_text("")
    return dst


def _time(cmd: list[str], env: dict) -> tuple[float, list[float], bytes]:
    times, out = [], b""
    for _ in range(RUNS):
        t = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, check=True).stdout
        times.append(time.perf_counter() - t)
    return statistics.median(times), times, out


def main() -> None:
    home, store = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    ccusage = os.environ.get("CCUSAGE", "/tmp/peers/node_modules/.bin/ccusage")
    cc_home = ccusage_copy(home)
    ours_env = {**os.environ, "CTXKEEP_HOME": str(store)}
    cc_env = {**os.environ, "HOME": str(cc_home)}
    ctxkeep = str(ROOT / ".venv" / "bin" / "ctxkeep")
    ours, ours_all, o_out = _time([ctxkeep, "report", "daily", "--json", "-z", "UTC"], ours_env)
    theirs, theirs_all, c_out = _time([ccusage, "daily", "--json", "-z", "UTC", "--offline"], cc_env)
    o, c = json.loads(o_out), json.loads(c_out)
    size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    print(f"tree {home} ({size / 1e6:,.0f} MB; ccusage copy {cc_home}); store {store}")
    print(f"runs: {RUNS}, median whole-process seconds")
    print(f"{'':28}{'seconds':>9}  {'all runs':<40}{'total tokens':>16}")
    print(
        f"{'ctxkeep report daily --json':28}{ours:9.3f}  {' '.join(f'{x:.2f}' for x in ours_all):<40}"
        f"{o['totals']['total_tokens']:>16,}"
    )
    print(
        f"{'ccusage daily --json':28}{theirs:9.3f}  {' '.join(f'{x:.2f}' for x in theirs_all):<40}"
        f"{c['totals']['totalTokens']:>16,}"
    )
    print(f"ratio ctxkeep / ccusage: {ours / theirs:.2f} (target <= 0.5)")


if __name__ == "__main__":
    main()
