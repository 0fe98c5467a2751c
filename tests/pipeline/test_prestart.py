"""The reader process a first ingest starts with the command (``pipeline.prestart``,
issue 26 target 3): which command lines start it, that the ingest it shares stores
what one process stores (entries, rowids, vault), and that one never taken is stopped.
"""

from __future__ import annotations

import gc
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine, prestart
from ctxkeep.pipeline import reader_process as read_worker
from ctxkeep.pipeline.plan import plan
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext
from store_digest import store_digest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def own_state(monkeypatch):
    """Each test's own process state where ``start_early`` and an ingest that takes its
    reader leave theirs: Polars' pool setting, the readers taken, the collector (left
    off after such an ingest: ``service.ingest._gc_paused``)."""
    monkeypatch.setenv(prestart.POLARS_THREADS, "")  # restored (absent) after the test
    monkeypatch.delenv(prestart.POLARS_THREADS)
    monkeypatch.setattr(prestart, "_taken", [])
    yield
    gc.enable()


@pytest.fixture
def no_env_home(monkeypatch):
    monkeypatch.delenv("CTXKEEP_HOME", raising=False)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)


@pytest.mark.usefixtures("no_env_home")
def test_only_a_plain_ingest_into_a_home_without_a_store_starts_one(tmp_path, monkeypatch):
    new, old = tmp_path / "new", tmp_path / "old"
    old.mkdir()
    (old / "store.db").write_bytes(b"")
    h = ["--home", str(new)]
    assert prestart.first_ingest_home([*h, "ingest"]) == new
    assert prestart.first_ingest_home(["ingest", "--no-progress", "--json", f"--home={new}"]) == new
    assert (
        prestart.first_ingest_home(["ingest", "--home", str(new), "--agent", "codex", "-a", "aider"]) == new
    )
    assert prestart.first_ingest_home(["--home", str(old), "ingest"]) is None  # a store: the no-op path
    for extra in (
        ["--path", "x.jsonl"],
        ["-p", "x"],
        ["--dry-run"],
        ["--prefect"],
        ["--task-runner", "dask"],
    ):
        assert prestart.first_ingest_home([*h, "ingest", *extra]) is None, extra
    assert prestart.first_ingest_home([*h, "search", "ingest"]) is None
    assert prestart.first_ingest_home([*h, "ingest", "--help"]) is None
    assert prestart.first_ingest_home(["ingest", "--home"]) is None  # no value: the CLI says so
    monkeypatch.setenv("CTXKEEP_HOME", str(new))
    assert prestart.first_ingest_home(["ingest"]) == new
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4200/api")  # a flow run reads in its tasks
    assert prestart.first_ingest_home(["ingest"]) is None
    monkeypatch.delenv("PREFECT_API_URL")

    def denied(self, *a, **k):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(type(new), "exists", denied)  # a home it may not read: the CLI says so
    assert prestart.first_ingest_home(["ingest"]) is None


@pytest.mark.usefixtures("no_env_home")
def test_it_is_off_with_ctxkeep_early_reader_0(tmp_path, monkeypatch):
    monkeypatch.setenv("CTXKEEP_EARLY_READER", "0")
    assert not prestart.start_early(["--home", str(tmp_path / "h"), "ingest"])
    assert not prestart.waiting()


@pytest.mark.usefixtures("no_env_home")
def test_it_starts_only_when_a_core_is_free_unless_forced(tmp_path, monkeypatch):
    """On a busy machine the early reader only takes time slices from the ingest (load
    18-27: 5.4 s against 3.8 s), so by default it starts only below the cores' load."""
    monkeypatch.delenv("CTXKEEP_EARLY_READER", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.5, 2.0, 2.0))
    assert not prestart.core_free()
    assert not prestart.start_early(["--home", str(tmp_path / "h"), "ingest"])
    assert not prestart.waiting()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.4, 0.5, 0.5))
    assert prestart.core_free()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert not prestart.core_free()  # one core allowed to this process


@pytest.mark.usefixtures("no_env_home")
def test_a_first_ingest_gives_polars_one_core_less_and_its_reader_one_thread(tmp_path, monkeypatch):
    """The early reader works on one core while the ingest process uses the others:
    the reader's Polars pool is one thread, the ingest process's the cores less one
    (each pool's extra thread only took CPU from the other process: ~0.02 CPU s each
    on the corpus), unless ``POLARS_MAX_THREADS`` is set; nothing is set when no
    reader starts."""
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setenv("CTXKEEP_EARLY_READER", "1")
    envs: list[dict] = []

    def popen(cmd, **kw):
        envs.append(kw["env"])
        raise OSError("not started here")

    monkeypatch.setattr(prestart.subprocess, "Popen", popen)
    argv = ["--home", str(tmp_path / "h"), "ingest"]
    assert not prestart.start_early(argv)  # it could not start: the engine reads, as it is
    assert envs[-1]["POLARS_MAX_THREADS"] == "1"
    assert "POLARS_MAX_THREADS" not in os.environ
    monkeypatch.setattr(prestart.subprocess, "Popen", lambda cmd, **kw: envs.append(kw["env"]) or _Started())
    assert prestart.start_early(argv)
    assert envs[-1]["POLARS_MAX_THREADS"] == "1" and os.environ["POLARS_MAX_THREADS"] == "7"
    prestart._stop()
    monkeypatch.setenv("POLARS_MAX_THREADS", "3")  # the user's setting, in both
    assert prestart.start_early(argv)
    assert envs[-1]["POLARS_MAX_THREADS"] == "3" and os.environ["POLARS_MAX_THREADS"] == "3"
    prestart._stop()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv("POLARS_MAX_THREADS")
    assert prestart.start_early(argv)
    assert envs[-1]["POLARS_MAX_THREADS"] == "1" and os.environ["POLARS_MAX_THREADS"] == "1"
    prestart._stop()


class _Started:
    """A stand-in for the reader's ``Popen``."""

    stdin = None

    def kill(self) -> None:
        pass

    def wait(self) -> int:
        return 0


@pytest.mark.slow
@pytest.mark.usefixtures("no_env_home")
def test_a_reader_never_taken_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("CTXKEEP_EARLY_READER", "1")  # whatever the machine's load
    assert prestart.start_early(["--home", str(tmp_path / "h"), "ingest"])
    proc = prestart._early[0][0]
    assert prestart.waiting() and proc.poll() is None
    prestart._stop()  # what the process's exit runs (atexit)
    assert proc.poll() is not None and not prestart.waiting() and prestart.take() is None


def _ingest(home: Path, ctx: DiscoveryContext) -> dict:
    conn = sqlite_store.connect(home)
    try:
        p = plan(home, conn, ctx=ctx)
        return engine.ingest_files(conn, p.todo, sqlite_store.tombstoned(conn))
    finally:
        conn.close()


def _rows(home: Path) -> list[list[tuple]]:
    """Entries' rowids and ids, and the vault's objects and segments (what the reader
    sealed and what the ingest process sealed)."""
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return [
            c.execute(q).fetchall()
            for q in (
                "SELECT rowid, entry_id FROM entries ORDER BY rowid",
                "SELECT sha, stored, raw FROM vault_objects ORDER BY sha",
                "SELECT * FROM vault_segments ORDER BY 1, 2",
            )
        ]
    finally:
        c.close()


@pytest.mark.slow
@pytest.mark.usefixtures("no_env_home")
def test_a_first_ingest_shared_with_the_early_reader_stores_what_one_process_stores(tmp_path, monkeypatch):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    ctx = DiscoveryContext(home=CORPUS_HOME, env={})
    one = _ingest(tmp_path / "one", ctx)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("CTXKEEP_EARLY_READER", "1")  # whatever the machine's load
    assert prestart.start_early(["--home", str(tmp_path / "two"), "ingest"])
    shared, taken = [], []
    real_shared, real_one = read_worker.read_shared, read_worker.read_in_process

    def spy_shared(todo, **kw):
        shared.append(len(todo))
        return real_shared(todo, **kw)

    def spy_one(todo, **kw):
        taken.append((len(todo), prestart.waiting(), kw.get("seal_rows")))
        return real_one(todo, **kw)

    monkeypatch.setattr(read_worker, "read_shared", spy_shared)
    monkeypatch.setattr(read_worker, "read_in_process", spy_one)
    two = _ingest(tmp_path / "two", ctx)
    # the ingest read its first files itself, the early reader the rest (and was taken)
    assert shared == [28] and len(taken) == 1 and 0 < taken[0][0] < 28 and taken[0][1]
    assert taken[0][2]  # it seals the databases' whole rows documents too
    assert not prestart.waiting()
    assert two == one and two["files_read"] == 28 and two["entries_new"] == 3890
    assert store_digest(tmp_path / "two") == store_digest(tmp_path / "one")
    got, want = _rows(tmp_path / "two"), _rows(tmp_path / "one")
    assert got == want and len(got[0]) == 3890 and got[1] and got[2]


@pytest.mark.slow
def test_the_console_script_starts_it_and_the_ingest_takes_it(tmp_path):
    """``python -m ctxkeep ingest`` into a new home: the reader's trace lines come (it
    started before the CLI's imports and read), and the result is a whole ingest."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "CTXKEEP_HOME"}

    def run(home: Path, early: str) -> tuple[dict, str]:
        env.update(
            HOME=str(CORPUS_HOME),
            CTXKEEP_IDLE_SECONDS="0",
            CTXKEEP_TRACE="1",
            CTXKEEP_EARLY_READER=early,
            PYTHONPATH=str(ROOT),
        )
        r = subprocess.run(
            [sys.executable, "-P", "-m", "ctxkeep", "--home", str(home), "ingest", "--json", "--no-progress"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout), r.stderr

    on, trace_on = run(tmp_path / "on", "1")
    off, trace_off = run(tmp_path / "off", "0")
    assert "CTXKEEP-TRACE reader todo" in trace_on and "CTXKEEP-TRACE reader sent" in trace_on
    assert "CTXKEEP-TRACE reader" not in trace_off
    for k in ("entries_new", "files_read", "bytes", "lines", "per_agent"):
        assert on[k] == off[k], k
    assert on["entries_new"] == 3890
    assert store_digest(tmp_path / "on") == store_digest(tmp_path / "off")


def _fake_reader(monkeypatch) -> subprocess.Popen:
    """A stand-in for the reader started early: it reads its stdin to the end."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"], stdin=subprocess.PIPE
    )
    r, w = os.pipe()
    os.close(w)
    monkeypatch.setattr(prestart, "_early", [(proc, os.fdopen(r, "rb"))])
    monkeypatch.setattr(prestart, "_ahead", [])
    monkeypatch.setattr(prestart, "_taken", [])
    return proc


def test_the_todo_sent_ahead_is_taken_only_for_the_same_files_and_flags(tmp_path, monkeypatch):
    from ctxkeep.sources.contract import SourceFile

    todo = []
    for i, size in enumerate((10, 10, 80)):
        (tmp_path / f"{i}.jsonl").write_bytes(b"x" * size)
        todo.append((SourceFile("codex", tmp_path / f"{i}.jsonl"), None))
    assert prestart.own_files(prestart.new_bytes(todo)) == 2  # 20 of 100 bytes within 0.4
    assert prestart.reader_flags(True, True, seal_rows=True, seal_late=True) == [
        "--seal",
        "--seal-rows",
        "--seal-late",
    ]
    # the early reader's: it cuts chunks and index terms too (``EARLY_PRECOMPUTE``), no tokens
    monkeypatch.setattr(prestart, "EARLY_PRECOMPUTE", "chunks")
    flags = prestart.reader_flags(True, True, "chunks", seal_rows=True, seal_late=True)
    assert flags == ["--seal", "--seal-rows", "--seal-late", "--precompute", "chunks"]
    assert prestart.reader_flags(True, True, seal_rows=True) == ["--seal", "--seal-rows"]
    assert prestart.reader_flags(False, False) == ["--no-vault"]

    proc = _fake_reader(monkeypatch)
    assert prestart.send_ahead(todo, True) and not prestart.send_ahead(todo, True)  # once
    assert prestart.ahead() == todo[2:] and prestart.waiting()
    assert prestart.take() is None  # only ``take_ahead`` takes a reader sent its todo
    assert prestart.take_ahead(todo[2:], ["--seal"]) is None  # other flags: stopped
    assert proc.poll() is not None and not prestart.waiting() and prestart.ahead() is None

    proc = _fake_reader(monkeypatch)
    assert prestart.send_ahead(todo, True)
    assert prestart.take_ahead(todo[1:], flags) is None and proc.poll() is not None  # other files
    proc = _fake_reader(monkeypatch)
    assert prestart.send_ahead(todo, True)
    assert not prestart._taken
    got = prestart.take_ahead(todo[2:], flags)
    assert got is not None and got[0] is proc and not prestart.waiting() and prestart.ahead() is None
    assert prestart._taken  # a first ingest in-process: ``exit_now`` may skip the teardown
    proc.wait(timeout=10)
    got[1].close()


def test_read_shared_reads_every_file_itself_when_its_plan_is_not_the_one_sent(tmp_path, monkeypatch):
    from ctxkeep.sources.contract import SourceFile

    todo = []
    for i, size in enumerate((10, 10, 80)):
        (tmp_path / f"{i}.jsonl").write_bytes(b"x" * size)
        todo.append((SourceFile("codex", tmp_path / f"{i}.jsonl"), None))
    proc = _fake_reader(monkeypatch)
    assert prestart.send_ahead(todo[:2], True)  # the service's plan lacked the last file
    spawned = []
    monkeypatch.setattr(read_worker, "start_child", lambda *a: spawned.append(a))
    reads = read_worker.read_shared(todo, seal=True)
    try:
        assert proc.poll() is not None and not prestart.waiting()
        assert reads.cuts == frozenset() and len(reads._streams) == 1 and spawned == []
    finally:
        reads.close()


@pytest.mark.slow
@pytest.mark.usefixtures("no_env_home")
def test_the_service_sends_the_todo_ahead_and_the_engine_takes_that_reader(tmp_path, monkeypatch):
    """``service.ingest`` of a first ingest sends the early reader its files once
    planned (``prestart.send_ahead``), before the engine's import and plan; the engine
    reads that reader's results (``take_ahead``) and the store is one process's."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    from ctxkeep.service import ingest as svc

    one = _ingest(tmp_path / "one", DiscoveryContext(home=CORPUS_HOME, env={}))
    monkeypatch.setenv("HOME", str(CORPUS_HOME))
    for k in ("CLAUDE_CONFIG_DIR", "CODEX_HOME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("CTXKEEP_EARLY_READER", "1")
    assert prestart.start_early(["--home", str(tmp_path / "two"), "ingest"])
    sent, started = [], []
    real_send, real_one = prestart.send_ahead, read_worker.read_in_process

    def spy_send(todo, vault_on):
        sent.append((len(todo), vault_on, real_send(todo, vault_on)))
        return sent[-1][2]

    def spy_one(todo, **kw):
        started.append((len(todo), kw.get("started") is not None))
        return real_one(todo, **kw)

    monkeypatch.setattr(prestart, "send_ahead", spy_send)
    monkeypatch.setattr(read_worker, "read_in_process", spy_one)
    out = svc.ingest(tmp_path / "two", svc.IngestRequest(prefect=False))
    assert sent == [(28, True, True)] and len(started) == 1 and 0 < started[0][0] < 28 and started[0][1]
    assert not prestart.waiting()
    assert out.summary["entries_new"] == one["entries_new"] == 3890
    assert store_digest(tmp_path / "two") == store_digest(tmp_path / "one")
    assert _rows(tmp_path / "two") == _rows(tmp_path / "one")


def _run_exit(body: str, taken: bool = True) -> subprocess.CompletedProcess:
    code = "import atexit, sys, threading, time\nfrom ctxkeep.pipeline import prestart\n"
    code += "prestart._taken.append(True)\n" * taken + body
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_exit_now_runs_the_atexit_handlers_and_flushes_then_ends_with_the_status():
    r = _run_exit(
        "atexit.register(lambda: sys.stdout.write('handler '))\n"
        "sys.stdout.write('buffered ')\n"
        "prestart.exit_now(SystemExit(3))\n"
        "print('never')\n"
    )
    assert r.returncode == 3 and r.stdout == "buffered handler "
    assert _run_exit("prestart.exit_now(SystemExit(None))").returncode == 0
    # a message is the interpreter's to print (status 1)
    r = _run_exit("prestart.exit_now(SystemExit('bad input'))")
    assert r.returncode == 1 and "bad input" in r.stderr
    # a thread the interpreter waits for: the usual exit, which lets it end
    r = _run_exit(
        "t = threading.Thread(target=lambda: (time.sleep(0.3), print('thread done')))\n"
        "t.start()\n"
        "prestart.exit_now(SystemExit(0))\n"
    )
    assert r.returncode == 0 and r.stdout == "thread done\n"
    # the teardown (freeing the objects) is skipped; not when the engine never took the
    # reader (a flow run, an error): the usual exit
    body = "class A:\n    def __del__(self):\n        print('freed')\na = A()\n"
    body += "prestart.exit_now(SystemExit(0))\n"
    assert _run_exit(body).stdout == ""
    r = _run_exit(body, taken=False)
    assert r.returncode == 0 and r.stdout == "freed\n"


def test_defer_metadata_keeps_importlib_metadata_unloaded_until_an_attribute_is_read():
    """Polars' import loads ``importlib.metadata`` (its Iceberg plugin, for one rare
    call), and with it ``email``, ``socket`` … (~8 ms of CPU in each process of a first
    ingest): deferred, it loads when something reads it, and is then the real module."""
    code = """
import sys, importlib
from ctxkeep.pipeline import prestart
prestart.defer_metadata()
import polars
stub = sys.modules["importlib.metadata"]
print("email" in sys.modules, importlib.metadata is stub)
import importlib.metadata
from importlib.metadata import version
print(version("polars") == polars.__version__, "email" in sys.modules)
real = sys.modules["importlib.metadata"]
print(real is not stub, importlib.metadata is real, stub.PackageNotFoundError is real.PackageNotFoundError)
prestart.defer_metadata()  # loaded already: nothing to defer
print(sys.modules["importlib.metadata"] is real)
"""
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "True", "True", "True", "True", "True", "True"]


@pytest.mark.usefixtures("no_env_home")
def test_the_home_is_config_s_and_config_is_not_imported_before_the_reader_starts(tmp_path, monkeypatch):
    """``first_ingest_home`` resolves a given home by ``config.resolve_home``'s rule
    without importing config (~10 ms of CPU before the reader's start, issue 26)."""
    from ctxkeep.config import resolve_home

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    for given in ("~/store", "rel/../store", str(tmp_path / "abs"), None):
        if given is None:
            monkeypatch.setenv("CTXKEEP_HOME", "~/from-env")
        assert prestart._home(given) == resolve_home(given), given
    monkeypatch.delenv("CTXKEEP_HOME")
    assert prestart._home(None) == resolve_home(None)  # the platform's data dir: config's
    code = f"""
import sys
from ctxkeep.pipeline import prestart
print(prestart.first_ingest_home(["--home", {str(tmp_path / "new")!r}, "ingest"]))
print("ctxkeep.config" in sys.modules)
from ctxkeep.sinks import files
print(files.CONFIG_FILE, "ctxkeep.config" in sys.modules)
"""
    r = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(tmp_path / "new"), "False", "config.toml True"]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/<pid>/status (Linux)")
def test_a_reader_starts_with_ctrl_c_blocked_so_it_never_prints_a_traceback():
    """Ctrl-C reaches the whole process group. A reader that got it while still
    importing (before its ``signal.signal(SIGINT, SIG_IGN)``) printed a
    KeyboardInterrupt traceback of its imports over the ingest's output (found
    reproducing newuser19 F6: Ctrl-C 4 s into a first ingest of a 200 MB tree gave two).
    ``start_child`` starts it with SIGINT blocked, from its first instruction."""
    import signal

    proc, pipe = prestart.start_child("ctxkeep.pipeline.reader_process", "--later")
    try:
        import time

        for _ in range(200):  # the child's own image (after the exec), not the fork's
            status = Path(f"/proc/{proc.pid}/status").read_text()
            if status.startswith("Name:\tpython"):
                break
            time.sleep(0.01)
        blocked = int(next(x for x in status.splitlines() if x.startswith("SigBlk:")).split()[1], 16)
        assert blocked & (1 << (signal.SIGINT - 1)), status
        # this process's own mask is as it was: its Ctrl-C still stops the ingest
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        proc.kill()
        proc.wait()
        pipe.close()
        if proc.stdin:
            proc.stdin.close()


def test_a_reader_left_to_end_by_itself_is_waited_for_at_exit(monkeypatch):
    """``reap_at_exit`` (a reader whose sealed captures a daemon thread reads): an atexit
    handler, which ``exit_now`` runs too, waits for it, so it never outlives the ingest."""
    monkeypatch.setattr(prestart, "_reap", [])
    registered = []
    monkeypatch.setattr(prestart.atexit, "register", registered.append)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    prestart.reap_at_exit(proc)
    assert registered == [prestart._wait_reaped] and proc.returncode is None
    prestart._wait_reaped()
    assert proc.returncode == 0 and prestart._reap == []
