"""Help texts print what they say: Rich markup must not swallow a config table's
name written in brackets (``(config [vault])`` printed as ``(config )``: newuser17 F21)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (["--help"], "older vault generations (config.toml's vault table)"),
        (["retention", "--help"], "older vault generations (config.toml's vault"),
        (["purge", "--help"], "Apply the purge rules of config.toml"),
    ],
)
def test_help_keeps_its_words(args, want):
    r = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    flat = re.sub(r"[│\s]+", " ", r.stdout)
    assert want in flat
    assert "(config )" not in flat and "the  rules" not in flat
