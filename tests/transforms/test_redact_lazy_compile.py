"""The redaction's regexes compile on first use (issue 26's process starts: compiling
the ~57 context rules, the prose rules and the wrapped-token rules at import cost ~10
ms of CPU in every process that imports ``transforms.redact``, the hook path's and
both of a first ingest's): none at import, only the rules a text meets after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_rule_compiles_at_import_and_a_text_compiles_only_the_rules_it_meets():
    code = """
from ctxkeep.transforms import redact as R, wrapped_tokens as W
print(sum(rx is not None for rx in R._RX), R._prose_compiled.cache_info().currsize, W._rules.cache_info().currsize)
out = R.redact("hello world, nothing here")
print(out == "hello world, nothing here", sum(rx is not None for rx in R._RX))
out = R.redact("export PASSWORD=Tr0ub4dor&3xyzzy")
n = sum(rx is not None for rx in R._RX)
print("[REDACTED:" in out, 0 < n < len(R.RULES))
"""
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["0", "0", "0", "True", "0", "True", "True"]
