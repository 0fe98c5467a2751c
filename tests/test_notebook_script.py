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


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (
            ["--store", "{tmp}/nostore"],
            1,
            "usage.py: error: no store yet ({tmp}/nostore) - run `ctxkeep ingest` first",
        ),
        (
            ["--store", "{home}", "--since", "lastweek"],
            2,
            "usage.py: error: cannot read the time 'lastweek' (--since)",
        ),
    ],
)
def test_a_script_run_answers_a_wrong_store_or_date_in_one_line(corpus_store, tmp_path, args, code, line):
    """newuser19 F12: a missing store or a bad --since printed ~30 lines of traceback
    through marimo's script runner; now the error's one line and its exit code."""
    pytest.importorskip("marimo")
    home, _ = corpus_store
    fill = {"tmp": str(tmp_path), "home": str(home)}
    p = subprocess.run(
        [sys.executable, str(NOTEBOOKS / "usage.py"), *(a.format(**fill) for a in args)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == code, p.stderr[-800:]
    assert "Traceback" not in p.stderr and p.stdout == ""
    assert p.stderr.splitlines() and p.stderr.splitlines()[-1].startswith(line.format(**fill)), p.stderr[
        -800:
    ]
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
