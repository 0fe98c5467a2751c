"""Benchmark: on copies of every over-threshold corpus session file (what
``ctxkeep compress --check`` lists with the default thresholds), the bytes and tokens
each ctxkeep compress strategy saves (default config), next to ``cozempic treat -rx
standard --execute`` on separate copies of the same files.

Tokens: ctxkeep's estimate (o200k_base) of the entry texts the Claude Code / Codex
parser reads from each resulting file, so both tools are measured the same way;
cozempic's own figure (its "Saved N tokens" line) is printed beside it. ctxkeep's
``inline`` row also counts the image tokens it moved out (Anthropic's w×h/750).

Run: ``uv run python tests/bench/bench_compress_vs_cozempic.py`` (writes only to temp
dirs; cozempic from ``$COZEMPIC`` or /tmp/peers/venv/bin/cozempic, run with
COZEMPIC_NO_GLOBAL_INIT=1 and a temporary HOME)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import run as ops
from ctxkeep.maintenance.compress.shrink import STRATEGIES
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext, SourceFile
from ctxkeep.transforms.tokens import estimate_tokens

CORPUS_HOME = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "home"
COZEMPIC = os.environ.get("COZEMPIC", "/tmp/peers/venv/bin/cozempic")


def _tokens(agent: str, path: Path) -> int:
    lines, _ = cp.split_lines(path.read_bytes())
    texts = cp.entry_texts(cp.line_entries(SourceFile(agent, path), lines))
    return sum(estimate_tokens(texts)[0]) if texts else 0


def _cozempic(src: Path, agent: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / src.name
        shutil.copyfile(src, p)
        env = dict(os.environ, COZEMPIC_NO_GLOBAL_INIT="1", HOME=tmp)
        t0 = time.perf_counter()
        r = subprocess.run(
            [COZEMPIC, "treat", str(p), "-rx", "standard", "--execute"],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp,
        )
        secs = time.perf_counter() - t0
        out = r.stdout + r.stderr
        m = re.search(r"Saved\s+([\d.]+)([KM]?) tokens", out)
        own = None
        if m:
            own = int(float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6}[m.group(2)])
        if r.returncode != 0:
            return {"error": (out.strip().splitlines() or [f"exit {r.returncode}"])[-1][:70]}
        return {"bytes": p.stat().st_size, "tokens": _tokens(agent, p), "own_saved": own, "seconds": secs}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home, store = Path(tmp) / "home", Path(tmp) / "store"
        shutil.copytree(CORPUS_HOME, home)
        old = time.time() - 3600
        for p in home.rglob("*.jsonl"):
            os.utime(p, (old, old))
        store.mkdir()
        (store / "config.toml").write_text("[compress]\nactive_minutes = 0\n")
        ctx = DiscoveryContext(home=home, env={})
        check = ops.check_files(store, ctx=ctx, savings=False)
        over = [Path(f["path"]) for f in check["files"] if f["status"] == "EXCEEDS"]
        copies = Path(tmp) / "copies"
        originals = {}
        for p in over:  # untouched copies for cozempic
            dst = copies / p.relative_to(home)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, dst)
            originals[p] = dst
        run_ingest(store, ctx=ctx)
        t0 = time.perf_counter()
        summary = ops.run_compress(store, ctx=ctx)
        secs = time.perf_counter() - t0
        by = {Path(f["path"]): f for f in summary["files"]}
        print(f"{len(over)} of {len(check['files'])} corpus files over max_size_kb 500 / max_lines 300")
        print(
            f"ctxkeep compress (default config): {secs:.1f} s for all; cozempic treat -rx standard per file\n"
        )
        hdr = f"{'file':<28} {'agent':<11} {'strategy':<22} {'bytes saved':>12} {'tokens saved':>13} {'after':>11}"
        print(hdr)
        print("-" * len(hdr))
        tot = {"ck_b": 0, "ck_t": 0, "cz_b": 0, "cz_t": 0, "before": 0}
        for p in over:
            f = by.get(p)
            agent = f["agent"] if f else ("claude-code" if "/.claude/" in str(p) else "codex")
            orig = originals[p]
            b0, t0_ = orig.stat().st_size, _tokens(agent, orig)
            tot["before"] += b0
            name = p.name[:27]
            print(f"{name:<28} {agent:<11} {'(before)':<22} {'':>12} {'':>13} {b0:>11,}")
            if f and f["status"] in ("compressed", "skipped"):
                for k in STRATEGIES:
                    sv = f["savings"].get(k) if f["savings"] else None
                    if sv:
                        extra = f" (img {sv['image_tokens']:,})" if sv.get("image_tokens") else ""
                        print(
                            f"{'':<28} {'':<11} {'ctxkeep ' + k:<22} {sv['bytes']:>12,} {sv['tokens']:>13,}{extra}"
                        )
                b1 = p.stat().st_size
                t1 = _tokens(agent, p)
                tot["ck_b"] += b0 - b1
                tot["ck_t"] += t0_ - t1
                print(
                    f"{'':<28} {'':<11} {'ctxkeep total':<22} {b0 - b1:>12,} {t0_ - t1:>13,} {b1:>11,}"
                    + (f"  {f['status']}: {f['reason'][:40]}" if f["reason"] else "")
                )
            else:
                print(
                    f"{'':<28} {'':<11} {'ctxkeep':<22} {(f or {}).get('status', 'not run')}: {(f or {}).get('reason', '')[:60]}"
                )
            cz = _cozempic(orig, agent)
            if "error" in cz:
                print(f"{'':<28} {'':<11} {'cozempic standard':<22} error: {cz['error']}")
            else:
                tot["cz_b"] += b0 - cz["bytes"]
                tot["cz_t"] += t0_ - cz["tokens"]
                own = f" (own figure {cz['own_saved']:,})" if cz["own_saved"] is not None else ""
                print(
                    f"{'':<28} {'':<11} {'cozempic standard':<22} {b0 - cz['bytes']:>12,} "
                    f"{t0_ - cz['tokens']:>13,} {cz['bytes']:>11,}{own}"
                )
        print("-" * len(hdr))
        print(
            f"{'all files':<28} {'':<11} {'ctxkeep total':<22} {tot['ck_b']:>12,} {tot['ck_t']:>13,} "
            f"{tot['before'] - tot['ck_b']:>11,}"
        )
        print(
            f"{'':<28} {'':<11} {'cozempic standard':<22} {tot['cz_b']:>12,} {tot['cz_t']:>13,} "
            f"{tot['before'] - tot['cz_b']:>11,}"
        )


if __name__ == "__main__":
    main()
