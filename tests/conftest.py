"""Shared fixtures. Corpus files are referenced from ../shared/corpus, never copied."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: the real session files (never copied into the repo): ../shared/corpus beside the
#: clone, or $CTXKEEP_CORPUS
CORPUS = Path(os.environ.get("CTXKEEP_CORPUS") or (ROOT.parent / "shared" / "corpus")).resolve()
CORPUS_HOME = CORPUS / "home"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# A suite started as a background job of a non-interactive shell (`cmd &` in a script)
# ignores SIGINT, and every child inherits that: the Ctrl-C tests' children then never
# see theirs (a CI trial failed test_compress_signals and test_ingest_interrupted so).
# Answered again, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Files count as idle (complete) at once: CI lays out shared/corpus moments before the
# tests run, so the default 120 s rule would hold back the corpus files' last turns.
# Tests of the idle rule set CTXKEEP_IDLE_SECONDS themselves.
os.environ["CTXKEEP_IDLE_SECONDS"] = "0"
# Tests point HOME at the corpus for discovery: caches (the config-check stamp in the
# user cache dir) and Prefect's home must never land there (../shared is read-only data)
_SCRATCH = Path(tempfile.mkdtemp(prefix="ctxkeep-tests-"))
# set, not defaulted: an empty XDG_CACHE_HOME from the caller means $HOME/.cache, which
# is the corpus when a test points HOME there (a CI run wrote the BPE cache into it)
os.environ["XDG_CACHE_HOME"] = str(_SCRATCH / "cache")
os.environ.setdefault("PREFECT_HOME", str(_SCRATCH / "prefect"))
# Derived caches (the BPE rank table) go to the test run's scratch dir too, never the
# developer's own cache.
os.environ["CTXKEEP_CACHE_DIR"] = str(_SCRATCH / "ctxkeep-cache")
# An empty HOME for the whole run: a test (or its child process, inheriting this
# environment) that does not choose a HOME sees no agent files, never the developer's
# own (newuser19 F7: `uv run pytest` on a machine with a Claude Code history failed a
# test whose `vault status` child warned about the caller's ~/.claude). A test that
# wants agent files sets HOME itself (the corpus, a copy, a tmp dir).
(_SCRATCH / "home").mkdir()
os.environ["HOME"] = str(_SCRATCH / "home")
#: what a test's own environment keeps when it drops the caller's ctxkeep, agent-dir
#: and XDG settings (``child_env``): the scratch caches above
KEEP = ("XDG_CACHE_HOME", "CTXKEEP_CACHE_DIR")
#: the settings a test drops to see only the HOME it chose (``child_env``)
DROP = ("PREFECT_", "CTXKEEP_", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_")


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment without Prefect, ctxkeep, agent-dir and XDG settings
    (so a child sees only the HOME it is given), except the scratch caches (``KEEP``:
    a cache must never land in a HOME that is the corpus), plus files counting as idle
    at once and ``extra``."""
    env = {k: v for k, v in os.environ.items() if k in KEEP or not k.startswith(DROP)}
    env.update(CTXKEEP_IDLE_SECONDS="0", **extra)
    return env


def _corpus_paths() -> set[str]:
    return {str(p) for p in CORPUS.rglob("*")} if CORPUS.exists() else set()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run when a test created anything in the corpus (it must stay as laid)."""
    before = getattr(session.config, "_corpus_before", None)
    new = sorted(_corpus_paths() - before) if before is not None else []
    if new:
        sys.stderr.write(f"\nerror: the tests wrote into the corpus ({CORPUS}): {new[:5]}\n")
        session.exitstatus = 1


def cannot_mount(reason: str) -> None:
    """A test that needs a mount (a tmpfs or a loop device: the full-disk and read-only
    file system cases) and could not make one: skipped with ``reason``, except where
    ``CTXKEEP_REQUIRE_MOUNTS=1`` (``.ci/run`` sets it when CI runs as root, so these
    cases are never skipped there unseen): the test fails with the reason."""
    if os.environ.get("CTXKEEP_REQUIRE_MOUNTS") == "1":
        pytest.fail(f"{reason} (CTXKEEP_REQUIRE_MOUNTS=1: the full-disk and read-only cases must run here)")
    pytest.skip(reason)


def corpus(rel: str) -> Path:
    """A corpus file by its path under ``shared/corpus/home``."""
    p = CORPUS_HOME / rel
    if not p.exists():
        pytest.skip(f"corpus file missing: {p}")
    return p


@pytest.fixture
def store_home(tmp_path) -> Path:
    """An empty ctxkeep home in a temp dir."""
    h = tmp_path / "ctxkeep-home"
    h.mkdir()
    return h


@pytest.fixture
def corpus_ctx():
    """A discovery context whose HOME is the corpus home (no environment overrides)."""
    from ctxkeep.sources.contract import DiscoveryContext

    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    return DiscoveryContext(home=CORPUS_HOME, env={})


@pytest.fixture(scope="session")
def corpus_store(tmp_path_factory):
    """A store ingested once from the whole corpus (read-only use in tests)."""
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path_factory.mktemp("corpus-store")
    summary = run_ingest(home, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    _CORPUS_RUNS[str(home)] = _runs_mark(home)
    return home, summary


#: the shared corpus store (``corpus_store``) → its ``runs`` rows when it was built
#: (``_runs_mark``): every test sharing it must leave them as they were
_CORPUS_RUNS: dict[str, tuple] = {}


def _runs_mark(home: Path) -> tuple:
    """``(rows, last rowid, last run's flow)`` of the ``runs`` table of the store at
    ``home``: what a command that records its run (an export, a backup, a purge, …)
    changes."""
    rows = q(home, "SELECT count(*), coalesce(max(rowid), 0) FROM runs")[0]
    last = q(home, "SELECT flow FROM runs ORDER BY rowid DESC LIMIT 1")
    return (*rows, last[0][0] if last else None)


@pytest.fixture(autouse=True)
def _corpus_store_keeps_its_runs(request):
    """Fail a test that recorded a run in the shared corpus store (read-only use:
    every other test reads it; the export tests each recorded an ``export-site`` run
    there, which the next reader then counted): such a test takes ``store``, a private
    copy. Checked after each test that uses it (a module fixture's run is caught by the
    first test after it), against the store as it was built."""
    yield
    if "corpus_store" not in request.fixturenames:
        return
    home = str(request.getfixturevalue("corpus_store")[0])
    want = _CORPUS_RUNS.get(home)
    if want is None:
        return
    got = _runs_mark(Path(home))
    if got != want:
        _CORPUS_RUNS[home] = got  # said once: the next test is not blamed for it
        pytest.fail(
            f"this test (or a fixture it uses) recorded a run in the shared corpus store {home}: "
            f"runs {want} -> {got} (rows, last rowid, last flow); write into a copy: the `store` fixture",
            pytrace=False,
        )


@pytest.fixture
def store(corpus_store, tmp_path) -> Path:
    """A private, writable copy of the corpus store (for purge, retention, reindex …)."""
    import shutil

    src, _ = corpus_store
    dst = tmp_path / "store"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst


@pytest.fixture
def home_copy(tmp_path) -> Path:
    """A writable copy of the corpus home (for append/rewrite tests)."""
    dst = tmp_path / "home"
    shutil.copytree(CORPUS_HOME, dst)
    return dst


# ---------------------------------------------------------------- helpers shared by the tests


def ingest(
    home: Path, store: Path, agents: str | list[str] | None = None, env: dict | None = None, paths=None
):
    """Run the plain pipeline (``run_ingest``, no Prefect) into the store ``store`` with
    HOME=``home`` and environment ``env`` (default: empty) for discovery; ``agents`` is
    one agent name or a list of them (default: every agent). Returns the run Summary."""
    from ctxkeep.pipeline.engine import run_ingest
    from ctxkeep.sources.contract import DiscoveryContext

    if isinstance(agents, str):
        agents = [agents]
    return run_ingest(store, agents=agents, paths=paths, ctx=DiscoveryContext(home=home, env=env or {}))


def q(store: Path, sql: str, *args) -> list[tuple]:
    """Rows of ``sql`` (parameters ``args``) on ``<store>/store.db``, opened read-only."""
    import sqlite3

    conn = sqlite3.connect(f"file:{Path(store) / 'store.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def scalar(store: Path, sql: str, *args):
    """The first column of the first row of ``sql`` on ``<store>/store.db`` (read-only)."""
    return q(store, sql, *args)[0][0]


def hold_lock_in_subprocess(home: Path):
    """Start a process that holds ``home``'s store lock until a line arrives on its
    stdin; returns the Popen once the lock is held (``.communicate(b"\\n")`` ends it)."""
    import subprocess
    import sys

    code = (
        "import sys; from ctxkeep.sinks.lock import StoreLock\n"
        f"lk = StoreLock({str(home)!r}); lk.acquire()\n"
        "print('locked', flush=True); sys.stdin.readline(); lk.release()\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = p.stdout.readline()
    assert line.strip() == b"locked", line
    return p


def chunk_fts_index(conn) -> dict[str, list[tuple]]:
    """What the contentless chunk FTS tables (``fts_grams``, ``fts_symbols``) index:
    per table, every ``(term, rowid, column, offset)`` instance (FTS5 ``fts5vocab``;
    offsets are -1 for a ``detail=column`` table), sorted."""
    out = {}
    for table in ("fts_grams", "fts_symbols"):
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.v_{table} USING fts5vocab(main, {table}, instance)"
        )
        out[table] = sorted(conn.execute(f"SELECT term, doc, col, coalesce(offset, -1) FROM temp.v_{table}"))
        conn.execute(f"DROP TABLE temp.v_{table}")
    return out


def rebuilt_chunk_fts_index(conn) -> dict[str, list[tuple]]:
    """``chunk_fts_index`` of those tables built afresh (in memory) from the store's
    ``chunks`` as they are now: what the tables must hold after any insert, delete or
    facet change."""
    import sqlite3

    from ctxkeep.sinks.sqlite.ddl import CHUNK_FTS_TABLES, FTS_TABLES
    from ctxkeep.sinks.sqlite.fts import chunk_terms, insert_rows

    rows = conn.execute("SELECT chunk_id, text, facets FROM chunks ORDER BY chunk_id").fetchall()
    mem = sqlite3.connect(":memory:")
    mem.execute("CREATE TABLE chunks(chunk_id INTEGER PRIMARY KEY, text TEXT, facets TEXT)")
    for table in CHUNK_FTS_TABLES:
        mem.execute(FTS_TABLES[table])
        insert_rows(mem, table, [(c, f) for c, _, f in rows], chunk_terms(table, [t for _, t, _ in rows]))
    return chunk_fts_index(mem)


def fts_entries(home: Path, match: str, table: str = "fts_words") -> set[str]:
    """Entry ids whose text matches the FTS5 expression ``match`` in ``table``
    (``fts_words`` or ``fts_grams``), straight from SQLite (no ranking, no budget)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{Path(home) / 'store.db'}?mode=ro", uri=True)
    try:
        return {
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT e.entry_id FROM {table} f JOIN chunks ch ON ch.chunk_id = f.rowid "
                "JOIN contents c ON c.content_id = ch.content_id "
                "JOIN entries e ON e.content_hash = c.content_hash "
                f"WHERE {table} MATCH ?",
                (match,),
            )
        }
    finally:
        conn.close()


def pytest_sessionstart(session):
    """Most tests read the real corpus: say where it was expected instead of failing
    test by test."""
    if not CORPUS_HOME.is_dir():
        pytest.exit(
            f"the session corpus is missing: no {CORPUS_HOME} (clone this repository "
            f"next to shared/, or set CTXKEEP_CORPUS to the corpus folder)",
            returncode=4,
        )
    session.config._corpus_before = _corpus_paths()
