"""The README's notebook commands work for a new user (newuser17 F11): `marimo export
ipynb usage.py -o usage.ipynb` (it needs nbformat, which the notebooks extra now
brings), and `python usage.py --store …` says in one line what it did (it printed
nothing at all)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "ctxkeep" / "notebooks"


def test_export_ipynb_writes_a_jupyter_notebook(tmp_path):
    pytest.importorskip("marimo")
    out = tmp_path / "usage.ipynb"
    p = subprocess.run(
        [sys.executable, "-m", "marimo", "export", "ipynb", str(NOTEBOOKS / "usage.py"), "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    nb = json.loads(out.read_text())
    assert nb["nbformat"] == 4 and any("per_agent" in "".join(c["source"]) for c in nb["cells"])


@pytest.mark.parametrize("name", ["usage", "sessions", "store"])
def test_a_notebook_run_as_a_script_prints_one_summary_line(corpus_store, name):
    pytest.importorskip("marimo")
    home, _ = corpus_store
    p = subprocess.run(
        [sys.executable, str(NOTEBOOKS / f"{name}.py"), "--store", str(home), "--timezone", "UTC"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-800:]
    lines = p.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{name}.py: ") and str(home) in lines[0], p.stdout
    if name == "usage":
        assert " API responses, " in lines[0] and "$" in lines[0]
