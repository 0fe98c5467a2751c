"""A config.toml with an error says its other problems in the same run (newuser17 F15:
`max_size_kb = -5` hid "names agent 'codx', which ctxkeep has no source for - did you
mean codex?" until the error was fixed; README: "one line per problem")."""

from __future__ import annotations

import subprocess
import sys


def test_an_error_comes_with_the_files_agent_warning(tmp_path):
    home = tmp_path / "store"
    home.mkdir(mode=0o700)
    (home / "config.toml").write_text("[agents.codx]\nenabled = false\n[compress]\nmax_size_kb = -5\n")
    env = {
        "HOME": str(tmp_path / "user"),
        "CTXKEEP_HOME": str(home),
        "PATH": "/usr/bin:/bin",
        "COLUMNS": "200",
    }
    for args in (["ingest"], ["ingest", "--dry-run"]):
        p = subprocess.run(
            [sys.executable, "-m", "ctxkeep", *args], capture_output=True, text=True, env=env, timeout=120
        )
        assert p.returncode == 1, p.stderr
        lines = p.stderr.splitlines()
        assert any(x.startswith("error: ") and "compress.max_size_kb = -5" in x for x in lines), lines
        assert any(
            x.startswith("warning: ") and "names agent 'codx'" in x and "did you mean codex?" in x
            for x in lines
        ), lines
        assert "Traceback" not in p.stderr
