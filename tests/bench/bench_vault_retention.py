"""Benchmark (prints figures side by side, not a test): the vault's generation
retention (issue 27, ``ctxkeep retention`` with ``[vault] keep_generations``).

The corpus's Gemini CLI session is rewritten ``--versions`` times (its messages cut to
a growing prefix, then cycled to reach the count) and ingested after each rewrite
(one vault generation per version). Then, each a whole ``ctxkeep retention`` process
on a copy of that store:

- ``keep`` (the default policy: the baseline, retention as before the vault's part);
- ``--dry-run --keep-generations 1`` (the plan: the due generations and the reparse
  check of their file);
- ``--keep-generations 1`` (the prune and the repack);

wall, CPU (user + sys), the load average; the packs' bytes before and after, the final
document's size, generations before and after.

    uv run python tests/bench/bench_vault_retention.py --versions 100   # the lead's run
    uv run python tests/bench/bench_vault_retention.py --versions 5     # a check that it works
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
REL = (
    ".gemini/tmp/3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/"
    "session-2025-12-03T08-28-fc2fd534.json"
)


def _child(args: list[str], env: dict) -> tuple[float, float, dict]:
    """``python -m ctxkeep ARGS --json``: (wall s, CPU s, its JSON)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-P", "-m", "ctxkeep", *args, "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    out = p.stdout.read().decode() if p.stdout else ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"ctxkeep {' '.join(args)} failed: {out[-500:]}")
    return wall, ru.ru_utime + ru.ru_stime, json.loads(out)


def _packs(store: Path) -> int:
    return sum(p.stat().st_size for p in (store / "vault" / "packs").glob("*/*.pack"))


def _gens(store: Path) -> int:
    import sqlite3

    c = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        return c.execute("SELECT count(*) FROM vault_generations").fetchone()[0]
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", type=int, default=100, help="rewrites of the document (generations)")
    a = ap.parse_args()
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    src = json.loads((CORPUS_HOME / REL).read_bytes())
    real = src["messages"]
    tmp = Path(tempfile.mkdtemp(prefix="bench-vault-retention-"))
    try:
        home, base = tmp / "home", tmp / "base"
        doc = home / REL
        doc.parent.mkdir(parents=True)
        (tmp / "user").mkdir()
        t = time.time() - 86400
        msgs: list[dict] = []
        for i in range(a.versions):
            msgs.append(dict(real[i % len(real)], id=f"m{i}"))
            doc.write_bytes(json.dumps(dict(src, messages=msgs), indent=2).encode())
            os.utime(doc, (t + i, t + i))
            run_ingest(base, agents=["gemini-cli"], ctx=DiscoveryContext(home=home, env={}))
        final = doc.stat().st_size
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKEEP_", "PREFECT_API"))}
        env.update(HOME=str(tmp / "user"), CTXKEEP_IDLE_SECONDS="0")
        load0 = os.getloadavg()
        rows = []
        for name, args in (
            ("keep (default policy)", []),
            ("--dry-run --keep-generations 1", ["--dry-run", "--keep-generations", "1"]),
            ("--keep-generations 1", ["--keep-generations", "1"]),
        ):
            store = tmp / "run"
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(base, store, ignore=shutil.ignore_patterns("*.lock"))
            before, gens0 = _packs(store), _gens(store)
            wall, cpu, rep = _child(["retention", "--no-prefect", "--home", str(store), *args], env)
            v = rep.get("vault") or {}
            rows.append(
                (
                    name,
                    wall,
                    cpu,
                    gens0,
                    _gens(store),
                    before,
                    _packs(store),
                    len(v.get("generations") or []),
                    len(v.get("held") or []),
                    v.get("bytes_freed", 0),
                )
            )
        load1 = os.getloadavg()
        print(
            f"document: {a.versions} versions, final {final:,} bytes; load {load0[0]:.2f} -> {load1[0]:.2f}"
        )
        print(
            f"{'retention':34} {'wall s':>7} {'CPU s':>6} {'gens':>9} {'packs bytes':>23} "
            f"{'x final':>13} {'go':>4} {'held':>4} {'freed':>10}"
        )
        for name, wall, cpu, g0, g1, b0, b1, go, held, freed in rows:
            print(
                f"{name:34} {wall:7.2f} {cpu:6.2f} {g0:>4}->{g1:<4} {b0:>11,}->{b1:<11,} "
                f"{b0 / final:5.2f}->{b1 / final:<5.2f} {go:>4} {held:>4} {freed:>10,}"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
