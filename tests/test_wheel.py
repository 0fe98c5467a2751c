"""The wheel ships what the installed package needs beyond its modules: the analytics
notebooks (``ctxkeep/notebooks``, found by ``query.notebooks.notebooks_dir`` from the
installed package) and the DuckDB model (``sinks/duckdb/model.sql``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ctxkeep.query import notebooks as nbq

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("uv") is None, reason="uv not on PATH")
def test_wheel_ships_the_notebooks_and_the_installed_package_finds_them(tmp_path):
    # --offline: the build backend (hatchling) comes from uv's cache, as for `uv sync`
    subprocess.run(
        ["uv", "build", "--wheel", "--offline", "--out-dir", str(tmp_path / "dist"), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("ctxkeep-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"ctxkeep/notebooks/{n}.ipynb" for n, _ in nbq.NOTEBOOKS}
    assert expected <= names
    assert "ctxkeep/sinks/duckdb/model.sql" in names
    # the package as installed from the wheel (unpacked first on sys.path, ahead of the
    # source tree) finds its own notebooks
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    out = subprocess.run(
        [sys.executable, "-c", "from ctxkeep.query import notebooks; print(notebooks.notebooks_dir())"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,  # not the source tree (python -c puts the cwd first on sys.path)
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert Path(out) == site / "ctxkeep" / "notebooks"
    assert sorted(p.name for p in Path(out).glob("*.ipynb")) == sorted(Path(e).name for e in expected)
