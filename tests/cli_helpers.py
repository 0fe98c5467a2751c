"""Assertions shared by the command-line tests."""

from __future__ import annotations


def one_error_line(r, code: int, *needles: str) -> None:
    """A CliRunner result ``r`` failed with exit ``code`` and ONE stderr line
    ``error: …`` containing every ``needles``, and no traceback."""
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]
