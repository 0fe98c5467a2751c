"""`vault restore` answers Ctrl-C at once (LEAD18_note "left"; as ``secrets --scrub``
does since nufix18): a SIGINT while it reads the vault or while it writes a file stops
it there, the file in hand abandoned (its temporary file removed, the target never
touched), ONE line on stderr, exit 130. Before, a SIGINT while the vault was read
raised KeyboardInterrupt (a line about "what was stored"), and one during the last
file's write was ignored: the file finished and the command exited 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ctxkeep.cli import app
from fixtures.bad_input import SESSION, line, rec

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
runner = CliRunner()


@pytest.fixture
def restored(tmp_path):
    """A store whose vault holds three Claude Code sessions, their files deleted."""
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-restore"
    proj.mkdir(parents=True)
    files = {}
    for i in range(3):
        sid = SESSION[:-1] + str(i)
        data = b"".join(line(rec(j, f"restore me {i} {j} " + "words " * 400)) for j in range(1, 40))
        p = proj / f"{sid}.jsonl"
        p.write_bytes(data.replace(SESSION.encode(), sid.encode()))
        files[p] = p.read_bytes()
    store = tmp_path / "store"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store)}
    assert runner.invoke(app, ["ingest", "--no-progress"], env=e).exit_code == 0
    for p in files:
        p.unlink()
    return e, home, files


def _one_line(stderr: str) -> str:
    lines = [x for x in stderr.splitlines() if x.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def test_sigint_while_the_vault_is_read_stops_at_once_with_one_line(restored, monkeypatch):
    import ctxkeep.maintenance.vault as vault

    e, home, files = restored
    orig = vault._targets

    def read_then_signal(*a, **k):
        os.kill(os.getpid(), signal.SIGINT)
        return orig(*a, **k)

    monkeypatch.setattr(vault, "_targets", read_then_signal)
    r = runner.invoke(app, ["vault", "restore", "--all-missing"], env=e)
    assert r.exit_code == 130, r.output
    assert _one_line(r.stderr) == (
        "interrupted (SIGINT) after 0 of 3 files (0 restored); the other 3 are untouched - "
        "run the command again to go on"
    )
    assert not any(p.exists() for p in files)
    assert not [p for p in home.rglob("*") if p.name.endswith(".tmp")]


def test_sigint_while_a_file_is_written_abandons_it_at_once(restored, monkeypatch):
    import ctxkeep.maintenance.vault as vault

    e, home, files = restored
    monkeypatch.setattr(vault, "RESTORE_PIECE", 4096)
    orig = os.write
    calls = []

    def write_then_signal(fd, data):
        calls.append(len(data))
        if len(calls) == 2:  # the second piece of the first file
            os.kill(os.getpid(), signal.SIGINT)
        return orig(fd, data)

    monkeypatch.setattr(vault.os, "write", write_then_signal)
    r = runner.invoke(app, ["vault", "restore", "--all-missing", "--json"], env=e)
    monkeypatch.undo()
    assert r.exit_code == 130, r.output
    d = json.loads(r.stdout)
    assert (d["interrupted"], d["not_started"], d["files"]) == ("SIGINT", 3, [])
    assert len(calls) == 2  # not one piece more
    assert not any(p.exists() for p in files)
    assert not [p for p in home.rglob("*") if p.name.endswith(".tmp")]
    # the next run restores every file whole
    assert runner.invoke(app, ["vault", "restore", "--all-missing"], env=e).exit_code == 0
    assert {p: p.read_bytes() for p in files} == files


def test_a_real_process_answers_sigint_mid_write(restored, tmp_path):
    """A real ``ctxkeep vault restore`` held inside a file's write (its temporary file
    is a FIFO no one reads yet: ``open`` waits), SIGINT sent to its process group as a
    terminal's Ctrl-C does: exit 130, one line, the target never written."""
    e, home, files = restored
    sid = next(iter(files)).stem
    dest = tmp_path / "dest"
    dry = runner.invoke(app, ["vault", "restore", sid, "--to", str(dest), "--dry-run", "--json"], env=e)
    assert dry.exit_code == 0, dry.output
    (target,) = [Path(f["to"]) for f in json.loads(dry.stdout)["files"]]
    target.parent.mkdir(parents=True)
    fifo = target.with_name(f".{target.name}.ctxkeep-restore.tmp")
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXKEEP_")}
    env.update(e)
    p = subprocess.Popen(
        [sys.executable, "-P", "-m", "ctxkeep", "vault", "restore", sid, "--to", str(dest)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while Path(f"/proc/{p.pid}/wchan").read_text() not in ("fifo_open", "wait_for_partner"):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.01)
        os.killpg(p.pid, signal.SIGINT)
        got = bytearray()
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer's open return

        def drain():
            os.set_blocking(fd, True)
            while chunk := os.read(fd, 1 << 16):
                got.extend(chunk)

        t = threading.Thread(target=drain, daemon=True)
        t.start()
        out, err = p.communicate(timeout=120)
        os.close(fd)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 130, err
    assert _one_line(err.decode()) == (
        "interrupted (SIGINT) after 0 of 1 file (0 restored); the other 1 is untouched - "
        "run the command again to go on"
    )
    assert not target.exists() and not fifo.exists()
    assert len(got) < len(files[next(iter(files))])  # never written whole
