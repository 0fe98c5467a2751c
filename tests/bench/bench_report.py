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
Prints figures (wall and CPU seconds, the load average); asserts nothing. ``CCUSAGE``:
the ccusage binary (default ``/tmp/peers/node_modules/.bin/ccusage``); ``BASELINE``:
another ctxkeep binary run on the same store as a third column (e.g. main's
``.venv/bin/ctxkeep``); ``RUNS``: runs per command (default 7).
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = 7  # $RUNS overrides
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


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(cmd: list[str], env: dict) -> tuple[float, float, bytes]:
    """(wall seconds, CPU seconds of the process and its children, stdout)."""
    t, c = time.perf_counter(), _cpu()
    out = subprocess.run(cmd, env=env, capture_output=True, check=True).stdout
    return time.perf_counter() - t, _cpu() - c, out


def main() -> None:
    home, store = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    runs = int(os.environ.get("RUNS", RUNS))
    ccusage = os.environ.get("CCUSAGE", "/tmp/peers/node_modules/.bin/ccusage")
    cc_home = ccusage_copy(home)
    # an installed wheel has its bytecode compiled (uv/pip do it); a source tree run with
    # PYTHONDONTWRITEBYTECODE=1 would recompile every module on every start
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "ctxkeep")], env=env, check=True)
    ours_env = {**os.environ, "CTXKEEP_HOME": str(store)}
    cc_env = {**os.environ, "HOME": str(cc_home)}
    ctxkeep = str(ROOT / ".venv" / "bin" / "ctxkeep")
    ours_cmd = [ctxkeep, "report", "daily", "--json", "-z", "UTC"]
    cc_cmd = [ccusage, "daily", "--json", "-z", "UTC", "--offline"]
    # alternate the two, so a change in the machine's load hits both alike
    cmds = {"ctxkeep report daily --json": (ours_cmd, ours_env), "ccusage daily --json": (cc_cmd, cc_env)}
    if os.environ.get("BASELINE"):  # another ctxkeep (e.g. main's .venv/bin/ctxkeep) on the same store
        cmds["baseline report daily --json"] = ([os.environ["BASELINE"], *ours_cmd[1:]], ours_env)
    wall = {k: [] for k in cmds}
    cpu = {k: [] for k in cmds}
    outs = {}
    loads = [os.getloadavg()[0]]
    for _ in range(runs):  # alternate the commands, so a change in the load hits all alike
        for k, (cmd, env) in cmds.items():
            t, c, outs[k] = _run(cmd, env)
            wall[k].append(t)
            cpu[k].append(c)
        loads.append(os.getloadavg()[0])
    med = statistics.median
    size = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    print(f"tree {home} ({size / 1e6:,.0f} MB; ccusage copy {cc_home}); store {store}")
    print(
        f"runs: {runs}, alternating; medians of whole-process seconds; 1-min load average "
        f"{min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores"
    )
    print(f"{'':32}{'wall':>7}{'CPU':>7}  {'all runs (wall)':<44}{'total tokens':>16}")
    for k in cmds:
        d = json.loads(outs[k])
        total = d["totals"].get("total_tokens", d["totals"].get("totalTokens"))
        print(
            f"{k:32}{med(wall[k]):7.2f}{med(cpu[k]):7.2f}  {' '.join(f'{x:.2f}' for x in wall[k]):<44}{total:>16,}"
        )
    o, c = "ctxkeep report daily --json", "ccusage daily --json"
    paired = [a / b for a, b in zip(wall[o], wall[c], strict=True)]
    print(
        f"ratio ctxkeep / ccusage (target <= 0.5): wall {med(wall[o]) / med(wall[c]):.2f} (medians), "
        f"{med(paired):.2f} (median of paired runs); CPU {med(cpu[o]) / med(cpu[c]):.2f}"
    )


if __name__ == "__main__":
    main()
