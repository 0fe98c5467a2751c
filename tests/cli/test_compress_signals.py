"""A signal stops `compress` (and `secrets --scrub`, `vault restore --all-missing`)
between files (newuser16 F15: Ctrl-C at file 8 of 31 let compress rewrite the other 23
and exit 0): the file in hand finishes, the rest stay untouched byte for byte, one line
says how many were done, exit 130 (SIGINT) or 143 (SIGTERM). The signal is sent by the
process to itself right after the first file's work (``_default_runner`` wrapped), so it
lands while the run is in hand, at a known point."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app
from ctxkeep.sinks.files import STORE_DB

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
runner = CliRunner()


@pytest.fixture
def env(tmp_path):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    shutil.copytree(CORPUS_HOME / ".codex" / "sessions", home / ".codex" / "sessions")
    old = time.time() - 3600
    for p in home.rglob("*.jsonl"):
        os.utime(p, (old, old))
    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text("[compress]\nmax_lines = 250\n")  # two rollouts exceed it
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store)}
    assert runner.invoke(app, ["ingest", "--no-progress"], env=e).exit_code == 0
    return e, home, store


def _signal_after_first_file(monkeypatch, sig):
    import ctxkeep.maintenance.compress.run as run

    orig = run._default_runner

    def first_then_signal(*a, **k):
        res = orig(*a, **k)
        os.kill(os.getpid(), sig)
        return res

    monkeypatch.setattr(run, "_default_runner", first_then_signal)


def test_sigint_stops_compress_after_the_file_in_hand(env, monkeypatch):
    e, home, store = env
    before = {p: p.read_bytes() for p in home.rglob("*.jsonl")}
    _signal_after_first_file(monkeypatch, signal.SIGINT)
    r = runner.invoke(app, ["compress", "--no-prefect", "--no-progress"], env=e)
    assert r.exit_code == 130, r.output
    line = " ".join(r.stderr.split())
    assert "interrupted (SIGINT) after 1 of 2 files (1 compressed); the other 1 is untouched" in line
    assert "SIGINT: finishing ~/" in line and "press Ctrl-C again to stop now" in line, line  # at once (F8)
    changed = [p for p, b in before.items() if p.read_bytes() != b]
    assert len(changed) == 1  # the second file over max_lines is as it was
    assert [p.name for p in home.rglob("*.backup")] == [changed[0].name + ".backup"]
    assert not [p for p in home.rglob("*") if ".tmp" in p.name or "ctxkeep-" in p.name]
    with sqlite3.connect(store / STORE_DB) as db:
        assert db.execute("SELECT status FROM runs WHERE flow='compress'").fetchall() == [("interrupted",)]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    # run again: the other file is compressed, the first is not touched again
    monkeypatch.undo()
    r = runner.invoke(app, ["compress", "--no-prefect", "--no-progress"], env=e)
    assert r.exit_code == 0, r.output
    assert len(list(home.rglob("*.backup"))) == 2


def test_json_says_interrupted_and_what_was_left(env, monkeypatch):
    e, home, store = env
    _signal_after_first_file(monkeypatch, signal.SIGINT)
    r = runner.invoke(app, ["compress", "--no-prefect", "--no-progress", "--json"], env=e)
    assert r.exit_code == 130
    d = json.loads(r.stdout)
    assert d["interrupted"] == "SIGINT" and d["not_started"] == 1 and d["compressed"] == 1
    assert len(d["files"]) == 1


_CHILD = """
import os, signal, sys
import ctxkeep.maintenance.compress.run as run
orig, sig = run._default_runner, getattr(signal, sys.argv[1])
def first_then_signal(*a, **k):
    res = orig(*a, **k)
    os.kill(os.getpid(), sig)
    return res
run._default_runner = first_then_signal
from ctxkeep.cli import main
sys.argv = ["ctxkeep", "compress", "--no-prefect", "--no-progress"]
main()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "rc", "ignore_sigint"),
    [("SIGTERM", 143, False), ("SIGINT", 130, True)],  # a script's `cmd &` starts it with SIGINT ignored
)
def test_a_signal_stops_the_command_process(env, tmp_path, sig, rc, ignore_sigint):
    e, home, store = env
    env_ = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")} | e
    before = {p: p.read_bytes() for p in home.rglob("*.jsonl")}

    def pre():
        if ignore_sigint:
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    p = subprocess.run(
        [sys.executable, "-c", _CHILD, sig],
        env=env_,
        capture_output=True,
        text=True,
        preexec_fn=pre,
        timeout=300,
    )
    assert p.returncode == rc, p.stderr
    assert p.stderr.count("interrupted") == 1, p.stderr  # one line, not the generic one too
    assert f"interrupted ({sig}) after 1 of 2 files (1 compressed); the other 1 is untouched" in p.stderr
    assert sum(p_.read_bytes() != b for p_, b in before.items()) == 1
    assert Path(str(next(iter(home.rglob("*.backup"))))).exists()


def _signal_after(monkeypatch, module, name, sig=signal.SIGINT):
    orig = getattr(module, name)

    def first_then_signal(*a, **k):
        res = orig(*a, **k)
        os.kill(os.getpid(), sig)
        return res

    monkeypatch.setattr(module, name, first_then_signal)


def test_sigint_stops_secrets_scrub_after_the_file_in_hand(env, monkeypatch):
    import ctxkeep.maintenance.scrub as scrub

    e, home, store = env
    before = {p: p.read_bytes() for p in home.rglob("*.jsonl")}
    r = runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json"], env=e)
    assert r.exit_code == 0 and json.loads(r.stdout)["would_scrub"] == 2  # two rollouts hold one
    _signal_after(monkeypatch, scrub, "scrub_file")
    r = runner.invoke(app, ["secrets", "--scrub"], env=e)
    assert r.exit_code == 130, r.output
    said = " ".join(r.stderr.split())
    assert "interrupted (SIGINT) after 1 of 2 files (1 scrubbed); the other 1 is untouched" in said
    # said at once, at the signal (newuser18 F8): the file it finishes, how to stop now
    assert (
        "SIGINT: finishing ~/.codex/sessions/" in said
        and ("first; press Ctrl-C again to stop now (no file is ever left half-written)") in said
    ), said
    assert said.index("SIGINT: finishing") < said.index("interrupted (SIGINT)")
    assert sum(p.read_bytes() != b for p, b in before.items()) == 1


def test_sigterm_stops_vault_restore_all_missing_after_the_file_in_hand(env, monkeypatch):
    import ctxkeep.maintenance.vault as vault

    e, home, store = env
    gone = sorted(home.rglob("*.jsonl"))[:3]
    for p in gone:
        p.unlink()
    _signal_after(monkeypatch, vault, "_write_restored", signal.SIGTERM)
    r = runner.invoke(app, ["vault", "restore", "--all-missing", "--json"], env=e)
    assert r.exit_code == 143, r.output
    d = json.loads(r.stdout)
    assert d["interrupted"] == "SIGTERM" and d["not_started"] == 2 and len(d["files"]) == 1
    assert sum(p.exists() for p in gone) == 1
    assert not [p for p in home.rglob("*") if p.name.endswith(".tmp")]
    assert "interrupted (SIGTERM) after 1 of 3 files (1 restored); the other 2 are untouched" in " ".join(
        r.stderr.split()
    )
    monkeypatch.undo()
    r = runner.invoke(app, ["vault", "restore", "--all-missing"], env=e)
    assert r.exit_code == 0 and all(p.exists() for p in gone)
