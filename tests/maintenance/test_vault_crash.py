"""SIGKILL trials of an ingest with the vault (issue 27): a ``ctxkeep ingest`` process
killed in any phase leaves a vault whose manifest reads back (every object of every
generation; orphan packs allowed) and agrees with the watermarks (an append file's
generation ends where its watermark's offset is), and the next ingest ends with the
same store and the same vault bytes as a run never killed.

The kills are timed by the child's progress marks (``phase_kill``: each trial kills
in the next phase of a reference run, at a random point of it); ``VAULT_KILL_TRIALS``
sets the number of trials (default one per phase; more go round the phases again)."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ctxkeep.errors import StoreError
from ctxkeep.maintenance.vault import vault_verify
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from tests import phase_kill
from tests.conftest import CORPUS_HOME
from tests.store_digest import store_digest

ROOT = Path(__file__).resolve().parents[2]
SCALE = ROOT.parent / "shared" / "tools" / "scale_corpus.py"


#: variables of this process that must not reach the child: an earlier test of the
#: suite may leave them set in-process (``PREFECT_API_URL`` by a flow run or serve test,
#: ``CTXKEEP_MAX_LINE_MB`` by an in-process plan, agents' location overrides), and with
#: ``PREFECT_API_URL`` of a server gone the child ``ctxkeep ingest`` runs as a flow that
#: fails: the base ingest of the reparse trial "stored nothing" in whole-suite runs
_SCRUB_PREFIXES = ("CTXKEEP_", "PREFECT_API", "CODEX_", "CLAUDE_", "GEMINI_", "XDG_DATA", "XDG_CONFIG")


#: set by a trial on the runs' environments (after the scrub): ``_split_env``
_EXTRA_ENV: dict[str, str] = {}


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUB_PREFIXES)}
    return dict(env, HOME=str(home), CTXKEEP_IDLE_SECONDS="0", **_EXTRA_ENV)


def _argv(command: str, store: Path) -> list[str]:
    return [sys.executable, "-P", "-m", "ctxkeep", command, "--home", str(store)]


def _run(command: str, home: Path, store: Path) -> bool:
    """Run ``ctxkeep COMMAND --home STORE`` with HOME=``home`` to its end, which must be
    with exit code 0 (else the assertion shows its exit code and stderr)."""
    p = subprocess.run(
        _argv(command, store), env=_env(home), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    tail = p.stderr[-4000:].decode("utf-8", "replace")
    assert p.returncode == 0, f"ctxkeep {command} exited {p.returncode}: {tail}"
    return True


def _ingest(home: Path, store: Path) -> bool:
    return _run("ingest", home, store)


def _vault_state(store: Path) -> dict[str, bytes]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return {f"{g.path}#{g.gen}": manifest.gen_bytes(conn, store, g) for g in manifest.generations(conn)}
    finally:
        conn.close()


def _agrees(store: Path) -> None:
    """Every append file's newest generation ends at its watermark's offset."""
    conn = sqlite_store.connect(store, readonly=True)
    try:
        wm = dict(conn.execute("SELECT path, offset FROM watermarks").fetchall())
        for g in manifest.generations(conn, latest=True):
            if g.mode == "append" and g.path in wm:
                assert g.start + g.length == wm[g.path], g.path
    finally:
        conn.close()


def _has_schema(store: Path) -> bool:
    """store.db holds a committed schema (a read-only open says "no store yet" otherwise)."""
    try:
        sqlite_store.connect(store, readonly=True).close()
    except StoreError as e:
        assert e.what == "no store yet", e
        return False
    return True


def _reader_processes(home: Path) -> list[int]:
    """Pids of the reader processes (``pipeline.reader_process``) of ingests of ``home``
    still alive (their HOME in their environment)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if b"ctxkeep.pipeline.reader_process" not in (d / "cmdline").read_bytes():
                continue
            if f"HOME={home}".encode() in (d / "environ").read_bytes().split(b"\0"):
                out.append(int(d.name))
        except OSError:
            continue
    return out


def _traced_env(home: Path) -> dict:
    """``_env`` with the child's progress marks on (``phase_kill``)."""
    return dict(_env(home), CTXKEEP_TRACE="1")


def _reference(command: str, home: Path, store: Path) -> phase_kill.Traced:
    """``ctxkeep COMMAND`` run whole with its marks (the trials' phases); exit code 0."""
    ref = phase_kill.start(_argv(command, store), env=_traced_env(home), cwd=ROOT)
    code = ref.finish()
    assert code == 0, f"ctxkeep {command} exited {code}: {ref.tail.decode('utf-8', 'replace')}"
    return ref


def _killed(command: str, home: Path, store: Path, phase: str, delay: float) -> bool:
    """``ctxkeep COMMAND`` SIGKILLed ``delay`` s after its mark ``phase``: True when
    killed; an end by itself first must be with exit code 0."""
    killed, t = phase_kill.run_killed(_argv(command, store), phase, delay, env=_traced_env(home), cwd=ROOT)
    assert killed or t.proc.returncode == 0, f"ctxkeep {command} exited {t.proc.returncode}: {t.tail!r}"
    return killed


def _kill_trials(
    home: Path, tmp_path: Path, *, seed: int, agrees, trials: int | None = None, orphans: bool = False
) -> dict[str, bytes]:
    """Ingest ``home`` once unkilled (the reference: its phases, ``phase_kill``), then
    kill an ingest in each of its phases in turn (``VAULT_KILL_TRIALS`` trials, default
    one per phase) at a random point of the phase: each killed store's vault reads
    back and ``agrees(store)`` holds, and the next ingest ends with the reference's
    store and vault. At least a third of the trials must really be killed. Returns
    the reference's vault state."""
    ref = tmp_path / "ref"
    traced = _reference("ingest", home, ref)
    want_store, want_vault = store_digest(ref), _vault_state(ref)
    rng = random.Random(seed)
    env_trials = os.environ.get("VAULT_KILL_TRIALS")
    kills = phase_kill.plan(
        phase_kill.traced_marks(traced), rng, trials or (int(env_trials) if env_trials else None)
    )
    killed = 0
    for i, (phase, delay) in enumerate(kills):
        store = tmp_path / f"s{i}"
        if _killed("ingest", home, store, phase, delay):
            killed += 1
            if orphans:  # its reader processes end by themselves (a write to a closed pipe)
                deadline = time.monotonic() + 30
                while _reader_processes(home) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _reader_processes(home) == []
            if _has_schema(store):  # a kill before the first commit leaves no store yet
                v = vault_verify(store)
                assert v["ok"], v["problems"]
                agrees(store)
        assert _ingest(home, store)
        assert store_digest(store) == want_store
        assert _vault_state(store) == want_vault
        assert vault_verify(store, full=True)["ok"]
        shutil.rmtree(store)
    print(f"\n{killed} of {len(kills)} killed, phases {[p for p, _ in kills]}")
    assert killed >= len(kills) // 3, killed
    return want_vault


@pytest.mark.slow
def test_sigkilled_ingests_leave_a_vault_that_agrees_with_the_store(tmp_path):
    if not SCALE.exists() or not CORPUS_HOME.is_dir():
        pytest.skip("shared corpus or tools missing")
    home = tmp_path / "home"
    subprocess.run(
        [sys.executable, str(SCALE), "--mb", "6", "--unique-text", str(home)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    _kill_trials(home, tmp_path, seed=27, agrees=_agrees)


#: the ingest's files shared between two reader processes (``reader_process.read_split``),
#: forced on a small tree
_TWO_READERS = {
    "CTXKEEP_READ_PROCESS_MB": "0",
    "CTXKEEP_SPLIT_READ_MB": "0",
    "CTXKEEP_READERS": "2",
    "CTXKEEP_SPLIT_BLOCK_MB": "0.25",
}


def _two_reader_trials(tmp_path: Path, monkeypatch, **extra: str) -> None:
    """``_kill_trials`` of a 6 MB scaled tree read by two reader processes (``_TWO_READERS``
    plus ``extra``), no reader process outliving its ingest."""
    if not SCALE.exists() or not CORPUS_HOME.is_dir():
        pytest.skip("shared corpus or tools missing")
    home = tmp_path / "home"
    subprocess.run(
        [sys.executable, str(SCALE), "--mb", "6", "--unique-text", str(home)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    monkeypatch.setattr(sys.modules[__name__], "_EXTRA_ENV", {**_TWO_READERS, **extra})
    _kill_trials(home, tmp_path, seed=26, agrees=_agrees, orphans=True)


@pytest.mark.slow
def test_sigkilled_ingests_read_by_two_reader_processes(tmp_path, monkeypatch):
    """The same trials with the files shared between two reader processes: each killed
    store's vault agrees with it, the next ingest ends with the reference's store and
    vault, and no reader process outlives its ingest."""
    _two_reader_trials(tmp_path, monkeypatch)


@pytest.mark.slow
def test_sigkilled_ingests_whose_readers_end_in_small_flushes(tmp_path, monkeypatch):
    """The two-reader trials with each reader's last 2 MiB (of ~3 MB) redacted and
    sent in flushes of 128 KiB (``readahead.PROCESS_TAIL``): killed while those items
    arrive, each store's vault agrees with it, the next ingest ends with the
    reference's store and vault, and no reader process outlives its ingest."""
    _two_reader_trials(
        tmp_path, monkeypatch, CTXKEEP_READER_TAIL_MB="2", CTXKEEP_READER_TAIL_FLUSH_MB="0.125"
    )


def _reparse(store: Path, home: Path) -> bool:
    return _run("reparse", home, store)


@pytest.mark.slow
def test_a_sigkilled_reparse_leaves_the_old_store_or_the_new_one(tmp_path):
    """A reparse killed in each of its phases (``phase_kill``): the store is the one before it or the one a
    whole reparse makes (store digests), never a mix, and reads back; the next reparse
    completes (and removes the copy the killed one left)."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared corpus missing")
    home = tmp_path / "home"
    shutil.copytree(CORPUS_HOME, home)
    base = tmp_path / "base"
    assert _ingest(home, base)
    before = store_digest(base)
    assert before["entries"][0] > 1000, before  # the base ingest stored the corpus
    done = tmp_path / "done"
    shutil.copytree(base, done)
    traced = _reference("reparse", home, done)
    after = store_digest(done)
    # the offsets of the entries in files with redactions tell the two apart (they
    # count redacted bytes after a reparse)
    assert after != before
    rng = random.Random(2727)
    env_trials = os.environ.get("VAULT_KILL_TRIALS")
    kills = phase_kill.plan(phase_kill.traced_marks(traced), rng, int(env_trials) if env_trials else None)
    killed = 0
    for i, (phase, delay) in enumerate(kills):
        store = tmp_path / f"r{i}"
        shutil.copytree(base, store)
        killed += _killed("reparse", home, store, phase, delay)
        got = store_digest(store)
        assert got in (before, after), i
        assert vault_verify(store)["ok"]
        assert _reparse(store, home)
        assert store_digest(store) == after
        assert not list((store / "vault" / "tmp").glob("reparse-*"))
        shutil.rmtree(store)
    print(f"\n{killed} of {len(kills)} killed, phases {[p for p, _ in kills]}")
    assert killed >= len(kills) // 3, killed


def _big_opencode_db(home: Path, sessions: int = 400, parts: int = 12) -> Path:
    """The OpenCode fixture's database grown to ``sessions`` sessions of 2 messages and
    ``parts`` text parts each (distinct texts), so an ingest lasts long enough to be
    killed in its capture and load."""
    import json
    import sqlite3

    from tests.dbhelpers import fixture_home

    fixture_home("opencode", home)
    db = home / ".local/share/opencode/opencode.db"
    con = sqlite3.connect(db)
    try:
        t = 1751446800000
        for s in range(sessions):
            sid = f"ses_kill{s:04d}"
            con.execute(
                "INSERT INTO session VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    sid,
                    "4f3a2b1c",
                    None,
                    f"s{s}",
                    "/home/user/src/api",
                    f"t{s}",
                    "1.0.150",
                    None,
                    t,
                    t,
                    None,
                    None,
                ),
            )
            for m, role in enumerate(("user", "assistant")):
                mid = f"msg_k{s:04d}{m}"
                data = {"role": role, "time": {"created": t + m}}
                if role == "assistant":
                    data |= {
                        "modelID": "claude-sonnet-4-20250514",
                        "providerID": "anthropic",
                        "tokens": {
                            "input": 10 + s,
                            "output": 5,
                            "reasoning": 0,
                            "cache": {"read": 0, "write": 0},
                        },
                    }
                con.execute(
                    "INSERT INTO message VALUES(?,?,?,?,?)", (mid, sid, t + m, t + m, json.dumps(data))
                )
                for p in range(parts // 2):
                    text = f"session {s} message {m} part {p}: " + " ".join(
                        f"w{s * 31 + p * 7 + i}" for i in range(60)
                    )
                    con.execute(
                        "INSERT INTO part VALUES(?,?,?,?,?,?)",
                        (
                            f"prt_k{s:04d}{m}{p}",
                            mid,
                            sid,
                            t + m,
                            t + m,
                            json.dumps({"type": "text", "text": text}),
                        ),
                    )
        con.commit()
    finally:
        con.close()
    return db


def _rows_agree(store: Path) -> None:
    """Every session a database's watermark says the vault holds (``state["vault"]["s"]``)
    has its rows document in the vault, the version the watermark names among its
    generations (``rows_capture``: the next capture is built on it)."""
    import json

    from ctxkeep.sinks.vault.rows_capture import held_marks

    conn = sqlite_store.connect(store, readonly=True)
    try:
        for path, state in conn.execute("SELECT path, state FROM watermarks WHERE agent = 'opencode'"):
            held = held_marks(conn, path)
            for sid, e in ((json.loads(state or "{}").get("vault") or {}).get("s") or {}).items():
                assert e["k"] in held.get(sid, ()), (path, sid)
    finally:
        conn.close()


@pytest.mark.slow
def test_sigkilled_ingests_of_a_database_leave_its_rows_in_the_vault_or_read_again(tmp_path):
    """An ingest of an agent database killed at a random time: the vault reads back,
    every session the watermark names as held is in the vault, and the next ingest ends
    with the same store and the same rows documents as a run never killed."""
    home = tmp_path / "home"
    _big_opencode_db(home)
    want_vault = _kill_trials(home, tmp_path, seed=2712, agrees=_rows_agree)
    assert len(want_vault) == 402  # every session's rows (the fixture's 2 and 400 more)
