"""Doctor and a WAL of another generation of the same store (issue 24: "a WAL written
by a copy of the same store shows only as a DuckDB mismatch while 1,549 entries stay
lost until backfill").

A copy of the store keeps ingesting; its ``store.db-wal`` is put back by hand beside
the original's ``store.db`` of another generation. Before: doctor said only "3,215
entries, SQLite holds 986" (DuckDB) and ``--repair`` rebuilt DuckDB from the damaged
SQLite, so the lost entries (and their usage) stayed lost until a backfill. Now doctor
names the WAL and the lost entries, and ``--repair`` ends with the entries and usage
totals of before."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import CORPUS_HOME, ingest
from ctxkeep.maintenance import doctor


def totals(home: Path) -> tuple:
    """(entries, usage rows, input+output tokens) of the store, read-only."""
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    try:
        return (
            c.execute("SELECT count(*) FROM entries").fetchone()[0],
            *c.execute(
                "SELECT count(*), sum(coalesce(input_tokens, 0) + coalesce(output_tokens, 0)) FROM usage"
            ).fetchone(),
        )
    finally:
        c.close()


def bad(findings) -> dict[str, str]:
    return {f.check: f.detail for f in findings if f.status == "damaged"}


@pytest.fixture
def generations(tmp_path):
    """``(home, older store.db bytes, copy's WAL bytes, totals)``: a store ingested from
    Claude Code (the older ``store.db``), then Codex (``totals``, checkpointed: no WAL);
    a copy of it then ingests Copilot CLI with a reader open, so its WAL keeps the pages."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path / "store"
    ingest(CORPUS_HOME, home, "claude-code")
    older = (home / "store.db").read_bytes()
    ingest(CORPUS_HOME, home, "codex")
    assert not (home / "store.db-wal").exists()
    before = totals(home)
    copy = tmp_path / "copy"
    shutil.copytree(home, copy, ignore=shutil.ignore_patterns("*.lock"))
    reader = sqlite3.connect(copy / "store.db")  # the last connection would checkpoint the WAL
    reader.execute("SELECT count(*) FROM meta").fetchall()
    ingest(CORPUS_HOME, copy, "copilot-cli")
    wal = (copy / "store.db-wal").read_bytes()
    reader.close()
    assert len(wal) > 32
    return home, older, wal, before


def test_older_store_db_beside_the_copys_wal(generations):
    """An older ``store.db`` restored beside the WAL of a copy that went on: the WAL's
    frames count pages the file lacks: doctor names the WAL and the lost entries; the
    repair moves the WAL aside and reads the lost sessions again."""
    home, older, wal, before = generations
    (home / "store.db").write_bytes(older)
    (home / "store.db-wal").write_bytes(wal)
    found = bad(doctor.check(home))
    assert "a WAL of another generation of this store" in found["sqlite-wal"]
    assert found["entries"].startswith("SQLite lost 2,229 entries of ")  # the Codex entries
    assert (home / "store.db-wal").read_bytes() == wal  # the check changed nothing
    res = doctor.repair(home, doctor.check(home))
    assert res["not_recovered"] == []
    assert any("of another generation of this store aside" in a for a in res["actions"])
    assert list(home.glob("store.db-wal.stale-*"))  # kept, not deleted
    assert totals(home) == before
    assert bad(doctor.check(home)) == {}


def test_older_store_db_restored_alone(generations):
    """An older ``store.db`` put back alone (no WAL) beside the newer DuckDB: before, "a
    DuckDB mismatch" and a repair that rebuilt DuckDB from SQLite (the Codex usage gone
    from the reports too); now the lost entries are named and derived again."""
    home, older, _wal, before = generations
    (home / "store.db").write_bytes(older)
    found = bad(doctor.check(home))
    assert found["entries"].startswith("SQLite lost 2,229 entries of ")
    assert "analytics.duckdb still holds" in found["entries"]
    res = doctor.repair(home, doctor.check(home))
    assert res["not_recovered"] == []
    assert res["actions"][0] == "2,229 of 2,229 entries SQLite lost derived again"
    assert totals(home) == before
    assert bad(doctor.check(home)) == {}


def test_copys_wal_beside_the_newer_store_db(generations, tmp_path):
    """The copy's WAL (written on the state before Codex) beside the original's newer
    ``store.db``: with it the store fails quick_check while the file alone passes:
    named a WAL of another generation, moved aside, nothing lost."""
    home, _older, _wal, before = generations
    base = tmp_path / "base"
    shutil.copytree(home, base, ignore=shutil.ignore_patterns("*.lock"))
    # a copy taken before the Codex ingest went on with Copilot CLI: its WAL
    c2 = tmp_path / "copy2"
    shutil.copytree(home, c2, ignore=shutil.ignore_patterns("*.lock"))
    (c2 / "store.db").write_bytes(_older)
    reader = sqlite3.connect(c2 / "store.db")
    reader.execute("SELECT count(*) FROM meta").fetchall()
    ingest(CORPUS_HOME, c2, "gemini-cli")
    wal = (c2 / "store.db-wal").read_bytes()
    reader.close()
    (home / "store.db-wal").write_bytes(wal)
    found = bad(doctor.check(home))
    assert "a WAL of another generation of this store" in found["sqlite-wal"], found
    res = doctor.repair(home, doctor.check(home))
    assert res["not_recovered"] == []
    assert totals(home) == before
    assert bad(doctor.check(home)) == {}


def test_lost_sessions_come_back_from_the_vault(generations, tmp_path, monkeypatch):
    """The agents' files are gone (HOME elsewhere) and SQLite lost the Codex entries
    and their usage (rows deleted, as a WAL of another generation leaves them): the
    vault's generations of those files give them back (``reparse``), no agent file
    read."""
    home, _older, _wal, before = generations
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    c = sqlite3.connect(home / "store.db")
    c.execute("DELETE FROM usage WHERE agent = 'codex'")
    c.execute("DELETE FROM entry_rows WHERE entry_id IN (SELECT entry_id FROM entries WHERE agent = 'codex')")
    c.commit()
    c.close()
    assert totals(home) != before
    found = bad(doctor.check(home))
    assert found["entries"].startswith("SQLite lost 2,229 entries of ")
    res = doctor.repair(home, doctor.check(home))
    assert res["not_recovered"] == []
    assert any(a.startswith("derived again ") and "codex from the vault" in a for a in res["actions"])
    assert not any(a.startswith("read again ") for a in res["actions"])
    assert totals(home) == before
    assert bad(doctor.check(home)) == {}


def test_every_open_sets_a_stale_wal_aside(generations, capfd):
    """Not only doctor: any command's open (``store_safety.check_wal``) finds by the
    WAL's frames that it was written on a bigger store.db, moves it aside and reads the
    file alone (before, SQLite applied it: FTS5 "malformed", entries lost)."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite import store_safety

    home, older, wal, _before = generations
    (home / "store.db").write_bytes(older)
    (home / "store.db-wal").write_bytes(wal)
    verdict, why = store_safety.wal_verdict(home / "store.db", home / "store.db-wal")
    assert verdict == "stale" and "pages between are in no frame" in why
    conn = sqlite_store.connect(home)
    try:
        assert conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert not (home / "store.db-wal").exists() or (home / "store.db-wal").stat().st_size == 0
    (aside,) = home.glob("store.db-wal.stale-*")
    assert aside.read_bytes() == wal
    assert "is not of this store.db's generation" in capfd.readouterr().err


def test_a_purged_session_is_not_called_lost(generations):
    """DuckDB from before a purge (an older analytics.duckdb put back): the purged
    session's rows are not "lost" (its tombstone says why they are gone) and --repair
    does not bring it back."""
    from ctxkeep.maintenance.purge import run_purge
    from ctxkeep.maintenance.purge_request import PurgeRequest

    home, _older, _wal, _before = generations
    duck = (home / "analytics.duckdb").read_bytes()
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    sid = c.execute("SELECT session_id FROM entries WHERE agent = 'codex' LIMIT 1").fetchone()[0]
    c.close()
    run_purge(home, PurgeRequest("session", session_id=sid))
    (home / "analytics.duckdb").write_bytes(duck)
    found = bad(doctor.check(home))
    assert "entries" not in found and "SQLite holds" in found["duckdb"]
    doctor.repair(home, doctor.check(home))
    c = sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True)
    assert c.execute("SELECT count(*) FROM entries WHERE session_id = ?", (sid,)).fetchone()[0] == 0
    c.close()
    assert bad(doctor.check(home)) == {}


def test_a_repair_counts_only_the_lost_entries_that_came_back(tmp_path):
    """SQLite lost the Codex entries; the vault holds one of the Codex files, the agents'
    files are gone (HOME elsewhere): only that file's entries can come back. Before,
    the reparse rebuilt DuckDB from the short SQLite, so the count afterwards found
    nothing lost and said "2,229 of 2,229 entries SQLite lost derived again" while the
    rest stayed lost, and DuckDB's copy of them, the last one, was gone (newuser14 F9).
    Now it counts the entries SQLite holds again, names the rest not recovered, and
    DuckDB keeps them."""
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    agent_home = tmp_path / "agent-home"
    shutil.copytree(CORPUS_HOME / ".codex", agent_home / ".codex")
    home = tmp_path / "store"
    ingest(agent_home, home, "codex")
    shutil.rmtree(agent_home)  # the agent's files are gone
    c = sqlite3.connect(home / "store.db")
    files = [r[0] for r in c.execute("SELECT path FROM vault_files WHERE agent = 'codex' ORDER BY path")]
    kept = files[0]
    back = c.execute(
        "SELECT count(*) FROM entries WHERE agent = 'codex' AND source_path = ?", (kept,)
    ).fetchone()[0]
    assert len(files) > 1 and 0 < back < 2229
    gone = "(SELECT vfile_id FROM vault_files WHERE agent = 'codex' AND path != ?)"
    gens = f"(SELECT gen_id FROM vault_generations WHERE vfile_id IN {gone})"
    c.execute(f"DELETE FROM vault_media WHERE gen_id IN {gens}", (kept,))
    c.execute(f"DELETE FROM vault_segments WHERE gen_id IN {gens}", (kept,))
    c.execute(f"DELETE FROM vault_generations WHERE vfile_id IN {gone}", (kept,))
    c.execute("DELETE FROM vault_files WHERE agent = 'codex' AND path != ?", (kept,))
    c.execute("DELETE FROM usage WHERE agent = 'codex'")
    c.execute("DELETE FROM entry_rows WHERE entry_id IN (SELECT entry_id FROM entries WHERE agent = 'codex')")
    c.commit()
    c.close()
    res = doctor.repair(home, doctor.check(home))
    assert res["actions"][0] == f"{back:,} of 2,229 entries SQLite lost derived again"
    assert res["not_recovered"] and res["not_recovered"][0].startswith(
        f"entries SQLite lost: {2229 - back:,} of "
    )
    # DuckDB still holds what SQLite lost: doctor names it again, nothing more was lost
    assert bad(doctor.check(home))["entries"].startswith(f"SQLite lost {2229 - back:,} entries of ")
