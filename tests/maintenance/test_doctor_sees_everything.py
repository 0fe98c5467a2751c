"""Doctor sees everything it can repair (issue 24, item 5). Each case passed doctor
before (``ok`` everywhere, exit 0) and is now found and repaired:

- a truncated ``analytics.duckdb`` (every report then failed);
- DuckDB whose usage rows are gone (a kill during its own rebuild) while its entries
  match SQLite;
- chunk rows missing against their contents (a third deleted): the text is re-read
  from the agents' files and chunked and indexed again;
- a store on a read-only file system is reported read-only, not damaged;
- a corrupt archive Parquet file names the other copies (it said "no other copy")."""

from __future__ import annotations

import os
import sqlite3

import duckdb

from ctxkeep.maintenance import doctor


def bad(findings) -> dict[str, str]:
    return {f.check: f.detail for f in findings if f.status == "damaged"}


def test_truncated_analytics_is_found_and_rebuilt(store):
    p = store / "analytics.duckdb"
    os.truncate(p, p.stat().st_size // 2)
    found = bad(doctor.check(store))
    assert list(found) == ["duckdb"] and "shorter than the" in found["duckdb"]
    doctor.repair(store, doctor.check(store))
    assert bad(doctor.check(store)) == {}
    con = duckdb.connect(str(p), read_only=True)
    assert con.execute("SELECT count(*) FROM usage").fetchone()[0] > 0
    con.close()


def test_missing_usage_rows_are_found_and_rebuilt(store):
    n = sqlite3.connect(store / "store.db").execute("SELECT count(*) FROM usage").fetchone()[0]
    assert n > 0
    con = duckdb.connect(str(store / "analytics.duckdb"))
    con.execute("DELETE FROM usage")
    con.close()
    found = bad(doctor.check(store))
    assert found == {"duckdb": f"0 usage rows, SQLite holds {n:,} (costs and tokens)"}
    doctor.repair(store, doctor.check(store))
    assert bad(doctor.check(store)) == {}
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM usage").fetchone()[0] == n
    con.close()


def test_chunk_gaps_are_found_and_the_text_chunked_again(store, monkeypatch):
    from conftest import CORPUS_HOME

    monkeypatch.setenv("HOME", str(CORPUS_HOME))  # the store's agents' files (a tree: discovered)
    conn = sqlite3.connect(store / "store.db")
    before = conn.execute("SELECT count(*) FROM chunk_rows").fetchone()[0]
    texts = dict(conn.execute("SELECT chunk_id, text FROM chunk_rows").fetchall())
    conn.execute("DELETE FROM chunk_rows WHERE chunk_id % 3 = 0")  # a third of the chunks
    conn.commit()
    conn.close()
    found = bad(doctor.check(store))
    assert "missing chunks" in found["chunks"]
    assert found["fts"].startswith(f"indexes {before:,} rows")
    res = doctor.repair(store, doctor.check(store))
    assert res["not_recovered"] == []
    assert bad(doctor.check(store)) == {}
    conn = sqlite3.connect(store / "store.db")
    assert conn.execute("SELECT count(*) FROM chunk_rows").fetchone()[0] == before
    assert sorted(r[0] for r in conn.execute("SELECT text FROM chunk_rows")) == sorted(texts.values())
    some = next(t for i, t in texts.items() if i % 3 == 0 and len(t.split()) > 3)
    word = max(some.split(), key=len).strip("\"'`()[]{}.,:;")
    hits = conn.execute("SELECT count(*) FROM fts_words WHERE fts_words MATCH ?", (f'"{word}"',)).fetchone()[
        0
    ]
    assert hits >= 1  # searchable again
    conn.close()


def test_read_only_store_is_read_only_not_damaged(store, tmp_path):
    import shutil
    import subprocess

    from conftest import cannot_mount

    c = sqlite3.connect(store / "store.db")  # a store at rest: its WAL checkpointed
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    if os.geteuid() == 0:  # root writes through permission bits: a read-only mount
        m = tmp_path / "ro"
        m.mkdir()
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(m)], capture_output=True)
        if r.returncode:
            cannot_mount(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
        try:
            shutil.copytree(store, m / "s")
            subprocess.run(["mount", "-o", "remount,ro", str(m)], check=True)
            findings = doctor.check(m / "s")
        finally:
            subprocess.run(["umount", "-l", str(m)], check=False)
    else:
        os.chmod(store / "store.db", 0o400)
        os.chmod(store, 0o500)
        try:
            findings = doctor.check(store)
        finally:
            os.chmod(store, 0o700)
    assert bad(findings) == {}
    (ro,) = [f for f in findings if f.check == "store"]
    assert ro.status == "warning" and ro.detail.startswith("read-only (")
    assert {f.status for f in findings if f.check == "fts"} == {"skipped"}


def test_parquet_damage_names_the_other_copies(store, monkeypatch):
    """A corrupt archive file: before, "no other copy"; now the agent's session files
    still on disk, their compress backups and the vault's files are named."""
    from conftest import CORPUS_HOME
    from ctxkeep.maintenance.retention import run_retention

    monkeypatch.setenv("HOME", str(CORPUS_HOME))
    (store / "config.toml").write_text("[retention]\narchive_after_days = 0\n")
    c = sqlite3.connect(store / "store.db")
    c.execute("UPDATE entry_rows SET status = 'consumed' WHERE agent = 'claude-code'")
    c.commit()
    c.close()
    run_retention(store)
    f = sorted((store / "archive").rglob("*.parquet"))[0]
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    (found,) = [x for x in doctor.check(store) if x.file == str(f)]
    assert found.status == "damaged"
    assert "other copies: " in found.detail and " session files (e.g. " in found.detail
    assert str(CORPUS_HOME / ".claude") in found.detail


#: the archive columns a re-archived row must give back as they were
COMPARED = ("text", "content_hash", "session_id", "ts", "role", "kind", "usage_key", "source_path")


def _corrupt_an_archive_file(store, monkeypatch):
    """Retention moves Claude Code's entries into the archive; the first archive file
    is then cut in half. Returns ``(file, {entry_id: (COMPARED values)} it held)``."""
    import pyarrow.parquet as pq

    from conftest import CORPUS_HOME
    from ctxkeep.maintenance.retention import run_retention

    monkeypatch.setenv("HOME", str(CORPUS_HOME))
    (store / "config.toml").write_text("[retention]\narchive_after_days = 0\n")
    c = sqlite3.connect(store / "store.db")
    c.execute("UPDATE entry_rows SET status = 'consumed' WHERE agent = 'claude-code'")
    c.commit()
    c.close()
    run_retention(store)
    f = max((store / "archive").rglob("*.parquet"), key=lambda p: p.stat().st_size)
    t = pq.read_table(f, columns=["entry_id", *COMPARED]).to_pydict()
    held = dict(zip(t["entry_id"], zip(*(t[c] for c in COMPARED), strict=True), strict=True))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    return f, held


def _archive_texts(store) -> dict:
    from ctxkeep.sinks import parquet

    t = parquet.read_archive(store).to_dict(as_series=False)
    return dict(zip(t["entry_id"], zip(*(t[c] for c in COMPARED), strict=True), strict=True))


def test_parquet_damage_is_re_archived_from_the_vault(store, monkeypatch, tmp_path):
    """The agents' files are gone (HOME elsewhere): the vault alone gives the lines
    back; every entry the file held is archived again with the same text."""
    f, held = _corrupt_an_archive_file(store, monkeypatch)
    assert len(held) > 100
    monkeypatch.setenv("HOME", str(tmp_path / "empty-home"))
    (found,) = [x for x in doctor.check(store) if x.file == str(f)]
    assert " vault files (e.g. " in found.detail
    res = doctor.repair(store, doctor.check(store))
    assert res["not_recovered"] == []
    (line,) = [a for a in res["actions"] if a.startswith("re-archived ")]
    assert (
        line.startswith(f"re-archived {len(held):,} of {len(held):,} entries") and "from the vault (" in line
    )
    assert list(f.parent.glob(f"{f.name}.damaged-*"))  # kept aside
    texts = _archive_texts(store)
    assert {i: texts.get(i) for i in held} == held
    assert bad(doctor.check(store)) == {}


def test_parquet_damage_is_re_archived_from_the_session_files(store, monkeypatch):
    """A store without a vault: the session files still on disk give the lines back."""
    c = sqlite3.connect(store / "store.db")
    c.execute("DELETE FROM vault_generations")
    c.commit()
    c.close()
    f, held = _corrupt_an_archive_file(store, monkeypatch)
    res = doctor.repair(store, doctor.check(store))
    assert res["not_recovered"] == []
    (line,) = [a for a in res["actions"] if a.startswith("re-archived ")]
    assert "from session files (" in line and "vault" not in line
    texts = _archive_texts(store)
    assert {i: texts.get(i) for i in held} == held
    assert bad(doctor.check(store)) == {}


def test_a_check_on_a_full_disk_creates_no_analytics_file(store, monkeypatch):
    """The first DuckDB build fails on a full disk: doctor (a check) used to leave the
    0-byte analytics.duckdb the failed build created, call it DAMAGED and, two lines
    below, "ok: every entry analytics.duckdb holds is in SQLite" (newuser15 F8)."""
    import errno

    from ctxkeep.sinks import analytics_current

    duck = store / "analytics.duckdb"
    duck.unlink()

    def full_disk(home, **_k):
        (home / "analytics.duckdb").write_bytes(b"")  # what duckdb.connect leaves
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(analytics_current, "bring_current", full_disk)
    found = doctor.check(store)
    assert not duck.exists()
    (f,) = [x for x in found if x.check == "duckdb"]
    assert f.detail.startswith("missing, SQLite holds")  # not "not a valid DuckDB database file"
    assert not [x for x in found if x.check == "entries" and x.status == "ok"]


def _blocks(p) -> tuple[int, int, int]:
    """``(total_blocks, used_blocks, blocks the file holds)`` of the DuckDB file ``p``."""
    con = duckdb.connect(str(p), read_only=True)
    block, total, used = con.execute(
        "SELECT block_size, total_blocks, used_blocks FROM pragma_database_size()"
    ).fetchone()
    con.close()
    return total, used, (p.stat().st_size - 3 * 4096) // block


def test_a_file_duckdb_shortened_by_its_free_trailing_blocks_is_sound(store):
    """F19 (newuser15): a checkpoint that frees the file's last blocks truncates the file
    after writing a header that still counts them (they stay on the free list). The
    file is sound and doctor called it damaged (its size against ``total_blocks``)."""
    p = store / "analytics.duckdb"
    con = duckdb.connect(str(p))
    con.execute("CREATE TABLE scratch AS SELECT range AS i, md5(range::VARCHAR) AS s FROM range(300000)")
    con.execute("CHECKPOINT")
    con.execute("DROP TABLE scratch")
    con.execute("CHECKPOINT")  # frees the trailing blocks: DuckDB truncates the file
    con.close()
    total, used, held = _blocks(p)
    assert used <= held < total  # the header counts blocks the file no longer holds
    found = {f.check: f for f in doctor.check(store)}
    assert found["duckdb"].status == "ok", found["duckdb"].detail


def test_a_file_cut_inside_its_used_blocks_is_damaged(store):
    """The other side of F19: a file cut to one block fewer than DuckDB says it uses is
    damaged, by DuckDB's own counts (``used_blocks``), free trailing blocks or not."""
    p = store / "analytics.duckdb"
    total, used, held = _blocks(p)
    assert used <= held
    os.truncate(p, 3 * 4096 + (used - 1) * (p.stat().st_size - 3 * 4096) // held)
    found = bad(doctor.check(store))
    assert list(found) == ["duckdb"]
    assert found["duckdb"].startswith(
        f"{p.stat().st_size:,} bytes, shorter than the {used} blocks of 262,144"
    )


def test_repair_moves_a_damaged_analytics_file_aside_and_says_so(store):
    """newuser16 F12: `doctor --repair` rebuilt a DuckDB file it judged damaged and
    deleted the old one, where the README promises "damaged files are moved aside, never
    deleted"."""
    p = store / "analytics.duckdb"
    os.truncate(p, p.stat().st_size // 2)
    damaged = p.read_bytes()
    res = doctor.repair(store, doctor.check(store))
    (aside,) = store.glob("analytics.duckdb.damaged-*")
    assert aside.read_bytes() == damaged  # the very file, kept
    assert [
        a for a in res["actions"] if a.startswith(f"moved the damaged analytics.duckdb aside ({aside.name};")
    ]
    assert bad(doctor.check(store)) == {}


def test_repair_for_the_fts_alone_keeps_no_copy_of_a_sound_analytics_file(store):
    con = sqlite3.connect(store / "store.db")
    con.execute("DELETE FROM fts_words")
    con.commit()
    con.close()
    found = doctor.check(store)
    assert "fts" in bad(found) and "duckdb" not in bad(found)
    res = doctor.repair(store, found)
    assert [a for a in res["actions"] if a.startswith("rebuilt the FTS")]
    assert not list(store.glob("analytics.duckdb.damaged-*"))
