"""The wheel ships what the installed package needs beyond its modules: the analytics
notebooks (``ctxkeep/notebooks``, found by ``render.report.notebooks_dir`` from the
installed package) and the DuckDB model (``sinks/duckdb/model.sql``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ctxkeep.render import report as nbq

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv not on PATH")
def test_wheel_ships_the_notebooks_and_the_installed_package_finds_them(tmp_path):
    # the build backend (hatchling, in the dev group) from this environment: tests never
    # fetch, and uv's cache does not always hold it after `uv sync`
    r = subprocess.run(
        [
            "uv",
            "build",
            "--wheel",
            "--offline",
            "--no-build-isolation",
            "--python",
            sys.executable,
            "--out-dir",
            str(tmp_path / "dist"),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("ctxkeep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    # the three report notebooks and the app (``ctxkeep ui``)
    expected = {f"ctxkeep/notebooks/{n}.py" for n, _ in nbq.NOTEBOOKS} | {"ctxkeep/notebooks/app.py"}
    assert expected <= names
    assert "ctxkeep/sinks/duckdb/model.sql" in names
    # the search's ranking library (hatch_build.py), built wherever a C compiler is
    if shutil.which("cc") or shutil.which("gcc"):
        assert "ctxkeep/sinks/sqlite/_ckrank.so" in names
    # the package as installed from the wheel (unpacked first on sys.path, ahead of the
    # source tree) finds its own notebooks
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    out = subprocess.run(
        [sys.executable, "-c", "from ctxkeep.render import report; print(report.notebooks_dir())"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,  # not the source tree (python -c puts the cwd first on sys.path)
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert Path(out) == site / "ctxkeep" / "notebooks"
    assert sorted(p.name for p in Path(out).glob("*.py")) == sorted(Path(e).name for e in expected)
