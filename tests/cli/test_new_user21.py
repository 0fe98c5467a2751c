"""What a new user found in session 21's trial (newuser21), each a CLI run:

- N7: a closed pipe (``ctxkeep search x | head -1``) ended the command with a silent
  exit 1 (Click's and Rich's EPIPE handling), which fails a ``set -o pipefail`` script.
  It now ends quietly with 0, as ripgrep does."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import CORPUS_HOME, child_env


def _into_closed_pipe(home, *args: str) -> tuple[int, str]:
    """``ctxkeep ARGS`` writing its stdout into a pipe whose reader has gone (what
    ``| head -1`` leaves once head exits): exit code and stderr."""
    r, w = os.pipe()
    os.close(r)  # every write to w now fails with EPIPE
    try:
        p = subprocess.run(
            [sys.executable, "-m", "ctxkeep", *args, "--home", str(home)],
            stdout=w,
            stderr=subprocess.PIPE,
            env=child_env(HOME=str(CORPUS_HOME)),
            timeout=300,
            text=True,
        )
    finally:
        os.close(w)
    return p.returncode, p.stderr


@pytest.mark.parametrize(
    "args",
    [("sessions", "--all"), ("search", "the"), ("report", "daily"), ("search", "the", "--json")],
    ids=["sessions", "search", "report", "search-json"],
)
def test_a_closed_pipe_ends_quietly_with_0(corpus_store, args):
    home, _ = corpus_store
    code, err = _into_closed_pipe(home, *args)
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "Exception ignored" not in err, err
