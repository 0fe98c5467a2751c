"""A notebook run as a script (`python usage.py --store …`, as the README says) answers
a store it cannot open or a bad parameter with ONE line and exit 1 / 2, as the CLI
does (newuser19 F12: a ~30-line traceback through marimo's runner)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "ctxkeep" / "notebooks"


def _script(name: str, *args: str, home: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOME=str(home), CTXKEEP_HOME=str(home / "none"))
    return subprocess.run(
        [sys.executable, str(NOTEBOOKS / f"{name}.py"), *args],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["usage", "sessions", "store"])
def test_no_store_is_one_line_and_exit_1(tmp_path, name):
    missing = tmp_path / "nothing-here"
    r = _script(name, "--store", str(missing), home=tmp_path)
    assert r.returncode == 1, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines == [f"error: no store yet ({missing}) - run `ctxkeep ingest` first"], r.stderr
    assert "Traceback" not in r.stderr


def test_a_bad_date_is_one_usage_line_and_exit_2(corpus_store, tmp_path):
    r = _script("usage", "--store", str(corpus_store[0]), "--since", "lastweek", home=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(
        "error: cannot read the time 'lastweek' (--since) - give "
    ), lines
