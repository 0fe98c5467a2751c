"""Benchmark (prints figures side by side, not a test): the vault's raw-line redaction
(``sinks.vault.capture.redact_raw_many``) with ``\\uXXXX`` escapes decoded in the view
(now) against without (``_U_ESCAPE`` set to a string no line holds: the detection pass
as before; lines with a secret still map spans through ``escapes.view``).

Two inputs: the corpus' JSON/JSONL files as they are (Claude Code's ``\\u001b`` lines
are the only ``\\u`` lines), and the same lines with ``<``, ``>`` and ``&`` written as
Go's ``encoding/json`` writes them (``\\u003c``, ``\\u003e``, ``\\u0026``: the
worst case, every line with one pays the Python view). Printed: lines, lines holding
``\\u``, CPU seconds (best of ``--repeat``) off and on, and the ratio.

    uv run python tests/bench/bench_vault_uescapes.py               # the corpus
    uv run python tests/bench/bench_vault_uescapes.py --limit 200   # a tiny run
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"


def _cpu(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    from ctxkeep.sinks.vault import capture

    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=CORPUS_HOME)
    ap.add_argument("--limit", type=int, default=0, help="at most this many lines (0: all)")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    lines = [
        ln
        for p in sorted(a.root.rglob("*"))
        if p.is_file() and p.suffix in (".jsonl", ".json")
        for ln in p.read_bytes().splitlines(keepends=True)
    ]
    if a.limit:
        lines = lines[: a.limit]
    capture.redact_raw_many([b'{"warm": "up ghp_\\u0041 <x>"}\n'])  # rules compiled, gates built
    go = [ln.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026") for ln in lines]
    head = ("input", "lines", "with \\u", "off s", "on s", "on/off")
    print(f"{head[0]:<22}" + "".join(f"{h:>9}" for h in head[1:]))
    for name, data in (("corpus as is", lines), ("corpus, Go escapes", go)):
        n_u = sum(b"\\u" in ln for ln in data)
        batch = [b"".join(data)]
        on = _cpu(lambda d=batch: capture.redact_raw_many(d), a.repeat)
        saved = capture._U_ESCAPE
        capture._U_ESCAPE = "\x00never\x00"
        try:
            off = _cpu(lambda d=batch: capture.redact_raw_many(d), a.repeat)
        finally:
            capture._U_ESCAPE = saved
        print(f"{name:<22}{len(data):>9}{n_u:>9}{off:>9.2f}{on:>9.2f}{on / off if off else 0:>9.2f}")


if __name__ == "__main__":
    main()
