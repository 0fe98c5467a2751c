"""Benchmark (prints figures side by side, not a test): the CPU of the redaction on the
ingest path, this checkout against ``--baseline`` (another checkout with its .venv),
each in a process of its own, alternating (``--runs``), with the load average:

- ``raw``: the vault's raw-line pass, ``capture.redact_raw_many`` of the first ``--mb``
  MB of the tree's JSONL files in 16 MiB calls (as a reader process makes them,
  ``readahead.PROCESS_REKEY``);
- ``one call``: ``capture.redact_raw_and_texts`` of the same lines and, as stand-ins for
  the entries' texts, their JSON string values of 20 characters or more (distinct per
  call), the reader's one call of session 14.

CPU is the process's (every thread: Polars' pool too), after a warm-up call. Each line
prints a digest of every redacted byte (and the texts) and the redactions counted: the
two checkouts must print the same ones (``docs/design.md``, "Throughput").

    uv run python tests/bench/bench_redact_raw.py --tree /tmp/tree200 --mb 40 \\
        --baseline /work/wt-s16 --runs 3
    uv run python tests/bench/bench_redact_raw.py --tree ~/.claude --mb 2   # a check
    uv run python tests/bench/bench_redact_raw.py --replay /tmp/me-rekey \\
        --baseline /work/wt-base --runs 3    # profile_ingest.py --record's calls
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALL_BYTES = 16 << 20


def _strings(o, out: list[str]) -> None:
    if isinstance(o, str):
        if len(o) >= 20:
            out.append(o)
    elif isinstance(o, dict):
        for v in o.values():
            _strings(v, out)
    elif isinstance(o, list):
        for v in o:
            _strings(v, out)


def _batches(tree: Path, mb: float) -> list[list[bytes]]:
    datas, size = [], 0
    for p in sorted(p for p in tree.rglob("*.jsonl") if p.is_file()):
        b = p.read_bytes()
        datas.append(b)
        size += len(b)
        if size >= mb * 1e6:
            break
    out, cur, n = [], [], 0
    for d in datas:
        cur.append(d)
        n += len(d)
        if n >= CALL_BYTES:
            out.append(cur)
            cur, n = [], 0
    return out + ([cur] if cur else [])


def worker(root: Path, tree: Path, mb: float, mode: str) -> dict:
    """One side's figures (run in that checkout's interpreter, its code first on the path)."""
    sys.path.insert(0, str(root))
    from ctxkeep.sinks.vault import capture

    assert Path(capture.__file__).resolve().is_relative_to(root.resolve()), capture.__file__
    texts: list[list[str]] = []
    if mode == "replay":  # a reader's recorded calls (profile_ingest.py --record)
        import pickle

        batches = []
        for f in sorted(tree.glob("*.pkl")):
            with open(f, "rb") as fh:
                d, t = pickle.load(fh)
            batches.append(d)
            texts.append(t)
        mode = "one call"
    else:
        batches = _batches(tree, mb)
    if mode == "one call" and not texts:
        for b in batches:
            t: list[str] = []
            for d in b:
                for ln in d.splitlines():
                    try:
                        _strings(json.loads(ln), t)
                    except ValueError:
                        pass
            texts.append(list(dict.fromkeys(t)))
    capture.redact_raw_and_texts([b'{"a": "token x sk-abc"}\n'], ["token abc"])  # warm: rules compiled
    h, red, changed = hashlib.sha256(), 0, 0
    t0 = time.process_time()
    for i, b in enumerate(batches):
        if mode == "one call":
            outs, tout = capture.redact_raw_and_texts(b, texts[i])
            for x, y in zip(texts[i], tout, strict=True):
                h.update(y.encode("utf-8", "surrogatepass"))
                changed += x != y
        else:
            outs = capture.redact_raw_many(b)
        for out, counts in outs:
            h.update(out)
            red += sum(counts.values())
    cpu = time.process_time() - t0
    return {
        "mb": sum(len(d) for b in batches for d in b) / 1e6,
        "texts": sum(len(t) for t in texts),
        "cpu": cpu,
        "redacted": red,
        "texts_changed": changed,
        "digest": h.hexdigest()[:16],
    }


def _side(checkout: Path, tree: Path, mb: float, mode: str) -> dict:
    python = checkout / ".venv" / "bin" / "python" if checkout != ROOT else Path(sys.executable)
    got = subprocess.run(
        [
            str(python),
            __file__,
            "--worker",
            str(checkout),
            "--tree",
            str(tree),
            "--mb",
            str(mb),
            "--mode",
            mode,
        ],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(got.stdout.strip().splitlines()[-1])


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path("/tmp/tree200"), help="a tree of JSONL session files")
    ap.add_argument("--mb", type=float, default=40, help="MB of the tree's files to redact")
    ap.add_argument("--baseline", type=Path, help="a checkout of ctxkeep with its .venv (e.g. main)")
    ap.add_argument("--runs", type=int, default=3, help="runs of each side, alternating")
    ap.add_argument("--modes", default="raw,one call", help="comma-separated: raw, one call")
    ap.add_argument(
        "--replay",
        type=Path,
        help="a folder of readers' recorded calls (profile_ingest.py --record): those calls, "
        "their real entry texts, instead of --tree's files",
    )
    ap.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.tree, a.mb, a.mode)))
        return
    print(f"load average at the start {_load()} (2 cores)")
    sides = [("this", ROOT)] + ([("baseline", a.baseline)] if a.baseline else [])
    if a.replay:
        a.tree, a.modes = a.replay, "replay"
    for mode in a.modes.split(","):
        cpus: dict[str, list[float]] = {who: [] for who, _ in sides}
        digests: dict[str, set] = {who: set() for who, _ in sides}
        print(f"{mode}: {a.tree}" if mode == "replay" else f"{mode}: {a.mb:g} MB of {a.tree}")
        print(
            f"  {'run':>3} {'who':>9} {'MB':>6} {'texts':>7} {'CPU s':>7} {'redacted':>8}  digest            load"
        )
        for run in range(1, a.runs + 1):
            for who, checkout in sides:
                r = _side(checkout, a.tree, a.mb, mode)
                cpus[who].append(r["cpu"])
                digests[who].add((r["digest"], r["redacted"], r["texts_changed"]))
                print(
                    f"  {run:>3} {who:>9} {r['mb']:>6.1f} {r['texts']:>7} {r['cpu']:>7.3f} {r['redacted']:>8}  "
                    f"{r['digest']}  {_load()}"
                )
        best = {who: min(v) for who, v in cpus.items()}
        line = "  min CPU s: " + ", ".join(f"{who} {v:.3f}" for who, v in best.items())
        if a.baseline:
            line += f"; this/baseline {best['this'] / best['baseline']:.3f}x"
            same = digests["this"] == digests["baseline"] and len(digests["this"]) == 1
            line += f"; output identical: {'yes' if same else 'NO'}"
        print(line)
    print(f"load average at the end {_load()} (2 cores)")


if __name__ == "__main__":
    main()
