"""The first Ctrl-C of ``secrets --scrub`` is answered at once (newuser18 F8: 63 s of
silence while a 129 MB file finished): which file it finishes, and that a second
Ctrl-C stops now."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from ctxkeep.maintenance.stopping import stop_between_files


def test_the_first_signal_calls_on_first_once_with_the_file_in_hand():
    seen = []
    with stop_between_files(lambda s: seen.append((s.name, s.current))) as stop:
        stop.current = "/x/big.jsonl"
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.signal == signal.SIGINT
    assert seen == [("SIGINT", "/x/big.jsonl")]


def test_an_error_in_on_first_never_stops_the_stop():
    def boom(_s):
        raise OSError("stderr closed")

    with stop_between_files(boom) as stop:
        os.kill(os.getpid(), signal.SIGINT)
    assert stop.signal == signal.SIGINT


def test_the_cli_says_what_it_finishes(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace as NS

    from ctxkeep.cli import secrets as cli_secrets

    monkeypatch.setenv("HOME", str(tmp_path))
    f = tmp_path / "s.jsonl"
    f.write_bytes(b"x" * 3_000_000)
    cli_secrets.finishing(NS(current=str(f), name="SIGINT"))
    said = " ".join(capsys.readouterr().err.split())
    assert said == (
        "SIGINT: finishing ~/s.jsonl (3.0 MB) first; press Ctrl-C again to stop now "
        "(no file is ever left half-written)"
    ), said
    assert Path(f).exists()
