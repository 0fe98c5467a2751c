"""Benchmark: compress a copy of the corpus's Claude Code and Codex files and print
bytes, tokens and seconds per file, with the default thresholds and with lowered ones.

Run: ``uv run python tests/bench/bench_compress.py`` (writes only to a temp dir)."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from ctxkeep.maintenance.compress import run as ops
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext

CORPUS_HOME = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "home"
SETTINGS = {
    "defaults (500 KiB / 300 lines, keep 100)": "[compress]\nactive_minutes = 0\n",
    "lowered (100 KiB / 50 lines, keep 10)": (
        "[compress]\nmax_size_kb = 100\nmax_lines = 50\nkeep_messages = 10\nactive_minutes = 0\n"
    ),
}


def main() -> None:
    for label, config in SETTINGS.items():
        with tempfile.TemporaryDirectory() as tmp:
            home, store = Path(tmp) / "home", Path(tmp) / "store"
            shutil.copytree(CORPUS_HOME, home)
            store.mkdir()
            (store / "config.toml").write_text(config)
            ctx = DiscoveryContext(home=home, env={})
            t = time.perf_counter()
            run_ingest(store, ctx=ctx)
            t_ingest = time.perf_counter() - t
            t = time.perf_counter()
            s = ops.run_compress(store, ctx=ctx)
            secs = time.perf_counter() - t
            print(f"\n{label}: ingest {t_ingest:.1f} s, compress {secs:.1f} s for {len(s['files'])} files")
            for f in s["files"]:
                print(
                    f"  {f['status']:<10} {Path(f['path']).name[:44]:<44} "
                    f"{f['bytes_before']:>9,} → {f['bytes_after']:>9,} B  "
                    f"{f['tokens_before']:>7,} → {f['tokens_after']:>6,} tok  "
                    f"{f['messages_before']:>5} → {f['messages_after']:>4} msgs  {f['reason'][:50]}"
                )
            print(
                f"  total {s['bytes_before']:,} → {s['bytes_after']:,} bytes, "
                f"{s['tokens_before']:,} → {s['tokens_after']:,} tokens; {s['analytics']}"
            )


if __name__ == "__main__":
    main()
