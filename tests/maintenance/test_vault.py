"""The vault (issue 27): every byte ingest reads is kept, redacted, compressed,
content-addressed, verified on read, and restores a session's native files.

All runs ingest a COPY of the corpus home in tmp (``home_copy``); /work/shared is
never written."""

from __future__ import annotations

import json
import os
from pathlib import Path
from unittest import mock

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.errors import CtxkeepError, NotFound
from ctxkeep.maintenance.vault import cleanup_schedules, vault_restore, vault_status, vault_verify
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from ctxkeep.sinks.vault.capture import Capturer, record
from ctxkeep.sinks.vault.packs import pack_names
from ctxkeep.sources.contract import DiscoveryContext, RawCapture
from tests.conftest import corpus, ingest, q
from tests.store_digest import chunk_index_exact

GEMINI_DOC = ".gemini/tmp/3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/session-2025-12-03T08-28-fc2fd534.json"

runner = CliRunner()

#: the file agents of the corpus whose files the vault holds
FILE_AGENTS = {"aider", "claude-code", "codex", "copilot-cli", "gemini-cli", "opencode", "specstory"}
#: the database agents of the corpus, held as their sessions' rows (``sources.readers.rows``)
DB_AGENTS = {"crush", "opencode-go"}


def _vaulted(store: Path, rows: bool = True) -> dict[str, dict]:
    """vault path → {agent, redactions, start, disk: the agent's file} of each file's
    newest generation (``rows``: with the databases' sessions)."""
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return {
            g.path: {"agent": g.agent, "redactions": g.redactions, "start": g.start, "disk": g.disk_path}
            for g in manifest.generations(conn, latest=True)
            if rows or not g.meta.get("vault_rows")
        }
    finally:
        conn.close()


def _disk(held: dict[str, dict]) -> list[str]:
    """The agents' files (a database once) of ``_vaulted``'s answer."""
    return sorted({v["disk"] for v in held.values()})


def test_every_corpus_file_agent_restores_byte_identical_after_its_files_are_deleted(home_copy, tmp_path):
    store = tmp_path / "store"
    ingest(home_copy, store)
    held = _vaulted(store, rows=False)  # (databases: tests/maintenance/test_vault_rows.py)
    assert {v["agent"] for v in held.values()} == FILE_AGENTS
    before = {p: (Path(p).read_bytes(), Path(p).stat().st_mtime_ns) for p in held}
    sessions = sorted(
        {
            s
            for (s,) in q(
                store,
                "SELECT DISTINCT e.session_id FROM entry_rows e JOIN files f ON f.file_id = e.file_id "
                "JOIN vault_files v ON v.path = f.path",
            )
        }
    )
    assert len(sessions) >= 20
    for p in held:
        os.remove(p)
    for sid in sessions:
        vault_restore(store, sid, user_home=home_copy, force=True)
    # files no entry names (a 0-byte file, a summary-only file) come back with --all-missing
    vault_restore(store, None, all_missing=True, user_home=home_copy)
    clean = [p for p, v in held.items() if not v["redactions"]]
    assert {held[p]["agent"] for p in clean} == FILE_AGENTS
    for p in held:
        data, mtime = before[p]
        got = Path(p).read_bytes()
        assert Path(p).stat().st_mtime_ns == mtime, p
        if held[p]["redactions"]:
            assert got != data and b"[REDACTED:" in got, p
            if p.endswith(".jsonl"):  # redacted in place: every line is still JSON
                assert all(json.loads(ln) is not None for ln in got.splitlines() if ln.strip()), p
        else:
            assert got == data, p
    # ingest finds the restored files as they were (or reads a file again when its inode
    # changed), but for the lines redaction changed in files whose ids hash the line (Codex)
    again = ingest(home_copy, store)
    assert set(again.per_agent) <= {v["agent"] for v in held.values() if v["redactions"]}
    assert chunk_index_exact(store) > 0  # (v16) the chunk id -> content id index as its table


def test_restore_never_overwrites_without_force_and_writes_under_to(home_copy, tmp_path):
    store = tmp_path / "store"
    ingest(home_copy, store, agents="codex")
    sid = q(
        store,
        "SELECT e.session_id FROM entry_rows e JOIN files f ON f.file_id = e.file_id JOIN vault_files v "
        "ON v.path = f.path JOIN vault_generations g ON g.vfile_id = v.vfile_id WHERE g.redactions = '{}' "
        "GROUP BY 1 ORDER BY count(*) DESC",
    )[0][0]
    with pytest.raises(CtxkeepError, match="exist"):
        vault_restore(store, sid[:8], user_home=home_copy)
    out = tmp_path / "out"
    r = vault_restore(store, sid[:8], to=out, user_home=home_copy)
    (f,) = r["files"]
    rel = Path(f["path"]).relative_to(home_copy)
    assert Path(f["to"]) == out / rel
    assert (out / rel).read_bytes() == Path(f["path"]).read_bytes()
    env = {"HOME": str(home_copy)}
    r = runner.invoke(app, ["vault", "restore", sid[:8], "--to", str(out), "--home", str(store)], env=env)
    assert r.exit_code == 1 and r.stderr.startswith("error: 1 file exists"), r.output
    r = runner.invoke(
        app, ["vault", "restore", sid[:8], "--to", str(out), "--force", "--home", str(store)], env=env
    )
    assert r.exit_code == 0 and "restored" in r.stdout, r.output


def test_verify_exits_1_naming_the_pack_after_a_flipped_byte(home_copy, tmp_path):
    store = tmp_path / "store"
    ingest(home_copy, store, agents=["claude-code", "gemini-cli"])
    r = runner.invoke(app, ["vault", "verify", "--home", str(store)])
    assert r.exit_code == 0 and r.stdout.startswith("vault ok:"), r.output
    assert vault_verify(store)["objects"] > 10
    (name, path), *_ = sorted(pack_names(store), key=lambda x: -x[1].stat().st_size)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.chmod(0o600)
    path.write_bytes(bytes(data))
    r = runner.invoke(app, ["vault", "verify", "--home", str(store)])
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.exit_code == 1 and len(lines) == 1, r.output
    assert lines[0].startswith("error: vault damaged:") and str(path) in lines[0]
    # restoring a session held in that pack fails the same way, writing nothing
    r = runner.invoke(app, ["vault", "verify", "--full", "--home", str(store)])
    assert r.exit_code == 1 and str(path) in r.stderr


def _cap(path: str, data: bytes, offset: int = 0, mode="append", ino: int = 7) -> RawCapture:
    return RawCapture(path, "codex", mode, offset, data, 1, ino, offset + len(data), 1_000 + len(data))


def _record(store: Path, *caps: RawCapture) -> None:
    conn = sqlite_store.connect(store)
    try:
        g = Capturer(store, conn).prepare(list(caps))
        conn.execute("BEGIN IMMEDIATE")
        record(conn, store, g)
        conn.execute("COMMIT")
    finally:
        conn.close()


def test_append_file_generations(store_home):
    lines = [json.dumps({"n": i, "text": "x" * (i % 7)}).encode() + b"\n" for i in range(300)]
    a, b = b"".join(lines[:100]), b"".join(lines[100:200])
    p = "/s/rollout.jsonl"
    _record(store_home, _cap(p, a))
    _record(store_home, _cap(p, b, len(a)))  # appended: one generation, two segments
    # a re-read from 0 after a parser change, with the file grown: only the new tail
    _record(store_home, _cap(p, a + b + b"".join(lines[200:])))
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        (g,) = manifest.generations(conn)
        assert (g.gen, g.start, g.length) == (1, 0, len(b"".join(lines)))
        assert manifest.gen_bytes(conn, store_home, g) == b"".join(lines)
        assert conn.execute("SELECT count(*) FROM vault_segments").fetchone() == (3,)
    finally:
        conn.close()
    _record(store_home, _cap(p, lines[0] + lines[5]))  # shrank / rewritten: generation 2
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        gens = manifest.generations(conn)
        assert [x.gen for x in gens] == [1, 2]
        assert manifest.gen_bytes(conn, store_home, gens[1]) == lines[0] + lines[5]
        assert manifest.gen_bytes(conn, store_home, gens[0]) == b"".join(lines)  # kept
    finally:
        conn.close()


def test_a_document_rewritten_100_times_costs_at_most_twice_its_final_size(store_home):
    """A Gemini CLI document (pretty-printed JSON, ``lastUpdated`` at its head; the
    messages of the corpus's real session, cycled) rewritten after each of 100
    messages: the vault's packs plus its manifest rows for it stay <= 2x the final
    document."""
    src = json.loads(corpus(GEMINI_DOC).read_bytes())
    real = src["messages"]
    msgs = []
    p = "/g/chats/session-x.json"
    for i in range(100):
        m = dict(real[i % len(real)], id=f"m{i}")
        msgs.append(m)
        doc = dict(src, lastUpdated=f"2025-12-03T08:{i // 60:02d}:{i % 60:02d}Z", messages=msgs)
        _record(store_home, _cap(p, json.dumps(doc, indent=2).encode(), mode="document"))
    final = json.dumps(doc, indent=2).encode()
    packs = sum(path.stat().st_size for _, path in pack_names(store_home))
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        gens = manifest.generations(conn)
        assert len(gens) == 100
        assert manifest.gen_bytes(conn, store_home, gens[-1]) == final
        assert manifest.gen_bytes(conn, store_home, gens[40]).startswith(final[:100])
        # the rows: each generation's columns (~100 bytes) and chunk list, each object's row
        lists = sum(len(r[0]) for r in conn.execute("SELECT chunks FROM vault_generations"))
        rows = 100 * 100 + 60 * conn.execute("SELECT count(*) FROM vault_objects").fetchone()[0]
    finally:
        conn.close()
    assert len(final) > 100_000
    print(f"100 rewrites: packs {packs:,} + lists {lists:,} + rows ~{rows:,} for a final {len(final):,}")
    assert packs + lists + rows <= 2 * len(final), (packs, lists, rows, len(final))


def test_a_store_from_before_the_vault_fills_it_on_the_next_ingest(home_copy, tmp_path, monkeypatch):
    store = tmp_path / "store"
    monkeypatch.setenv("CTXKEEP_VAULT", "0")
    ingest(home_copy, store)
    assert q(store, "SELECT count(*) FROM vault_files") == [(0,)]
    entries = q(store, "SELECT count(*), sum(token_estimate) FROM entries")
    usage = q(store, "SELECT sum(input_tokens), sum(output_tokens), sum(cache_read_tokens) FROM usage")
    monkeypatch.setenv("CTXKEEP_VAULT", "1")
    s = ingest(home_copy, store)
    # with the vault on, the entries of the 2 Codex lines that held a password are named
    # by the redacted line's hash (``pipeline.stable_ids``): stored once more under it
    assert s.entries_new == 2 and s.per_agent == {"codex": 2} and s.files_read >= 20
    assert (
        q(store, "SELECT sum(input_tokens), sum(output_tokens), sum(cache_read_tokens) FROM usage") == usage
    )
    assert {v["agent"] for v in _vaulted(store).values()} == FILE_AGENTS | DB_AGENTS
    assert ingest(home_copy, store).files_read == 0  # and then nothing is read again
    # a reparse derives the store from the vault again: the copies under the raw line's
    # hash go
    from ctxkeep.maintenance.reparse import reparse

    reparse(store)
    assert q(store, "SELECT count(*), sum(token_estimate) FROM entries") == entries
    assert chunk_index_exact(store) > 0  # (v16) the chunk id -> content id index as its table
    assert (
        q(store, "SELECT sum(input_tokens), sum(output_tokens), sum(cache_read_tokens) FROM usage") == usage
    )


def test_status_reads_the_agents_cleanup_settings_and_lists_sessions_at_risk(home_copy, tmp_path):
    (home_copy / ".claude" / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 7}))
    (home_copy / ".gemini" / "settings.json").write_text(
        json.dumps({"general": {"sessionRetention": {"enabled": True, "maxAge": "2w"}}})
    )
    sched = {s.agent: s for s in cleanup_schedules(home_copy)}
    assert sched["claude-code"].days == 7 and sched["gemini-cli"].days == 14
    store = tmp_path / "store"
    ingest(home_copy, store, agents="codex")  # Claude Code and Gemini are not in the vault
    ctx = DiscoveryContext(home=home_copy, env={})
    r = vault_status(store, ctx)
    risk = {x["path"] for a in r["agents"] for x in a["at_risk"]}
    claude = {str(p) for p in (home_copy / ".claude" / "projects").rglob("*.jsonl")}
    assert claude <= risk
    ingest(home_copy, store)
    r = vault_status(store, ctx)
    assert r["at_risk"] == 0
    by = {a["agent"]: a for a in r["agents"]}
    assert by["claude-code"]["deletes"] == "after 7 days" and by["claude-code"]["next_deletion"]
    assert by["codex"]["files"] == 6 and by["codex"]["stored_bytes"] < by["codex"]["raw_bytes"] / 3
    # the service answer (what the CLI and --json render) carries the same figures
    from ctxkeep.service.vault import VaultStatusRequest
    from ctxkeep.service.vault import vault_status as status_question

    res = status_question(VaultStatusRequest.parse(home=store, user_home=home_copy))
    assert res.pack_bytes == sum(p.stat().st_size for _, p in pack_names(store)) > 0
    assert res.as_json()["schema"] == 1 and res.at_risk == 0


def test_no_secret_reaches_a_vault_byte(tmp_path):
    from ctxkeep.pipeline import engine
    from fixtures.secrets import planted_session, positives

    cases = positives(11)
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-vault"
    proj.mkdir(parents=True)
    f = proj / "5e551011-0000-4000-8000-000000000002.jsonl"
    f.write_bytes(planted_session(cases))
    store = tmp_path / "store"
    engine.run_ingest(store, ctx=DiscoveryContext(home=home, env={}), agents=["claude-code"])
    conn = sqlite_store.connect(store, readonly=True)
    try:
        (g,) = manifest.generations(conn)
        data = manifest.gen_bytes(conn, store, g)
    finally:
        conn.close()
    values = {s for c in cases for s in c.secrets if s}
    leaked = sorted(v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data)
    assert leaked == []
    assert sum(g.redactions.values()) >= len(cases) and b"[REDACTED:" in data
    # the lines that were JSON are JSON still
    good = [ln for ln in f.read_bytes().splitlines() if ln.strip() and _is_json(ln)]
    kept = [ln for ln in data.splitlines() if ln.strip() and _is_json(ln)]
    assert len(kept) == len(good)


def _is_json(b: bytes) -> bool:
    try:
        json.loads(b)
        return True
    except ValueError:
        return False


def test_reparse_with_every_agent_file_gone_rebuilds_the_same_store(home_copy, tmp_path):
    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.schema import STORED_COLUMNS
    from tests.store_digest import store_digest

    store = tmp_path / "store"
    ingest(home_copy, store)
    before = store_digest(store)
    held = _vaulted(store)
    redacted = sorted({v["disk"] for v in held.values() if v["redactions"]})
    cols = ", ".join(STORED_COLUMNS)
    clean_sql = (
        f"SELECT {cols} FROM entries WHERE source_path NOT IN ({','.join('?' * len(redacted))}) "
        "ORDER BY entry_id"
    )
    clean = q(store, clean_sql, *redacted)
    usage = q(store, "SELECT * FROM usage ORDER BY usage_key")
    secret_rows = q(
        store,
        f"SELECT {cols.replace(', source_offset', '')} FROM entries WHERE source_path IN "
        f"({','.join('?' * len(redacted))}) ORDER BY entry_id",
        *redacted,
    )
    # the search indexes: what a query matches, the vocabulary and its trigrams
    fts_sql = [
        "SELECT count(*) FROM vocab",
        "SELECT count(*) FROM fts_symbols",
        "SELECT v.term FROM fts_vocab f JOIN vocab v ON v.term_id = f.rowid WHERE fts_vocab MATCH 'ing' ORDER BY 1",
        "SELECT c.content_hash, ch.seq FROM fts_words f JOIN chunks ch ON ch.chunk_id = f.rowid "
        "JOIN contents c USING (content_id) WHERE fts_words MATCH 'file' ORDER BY 1, 2",
        "SELECT count(*) FROM fts_grams WHERE fts_grams MATCH 'the'",
    ]
    fts_before = [q(store, x) for x in fts_sql]
    assert fts_before[0][0][0] > 100 and fts_before[3]
    for p in _disk(held):  # every agent file, the databases too
        os.remove(p)
    dry = reparse(store, dry_run=True)
    assert dry["files"] == len(held) and store_digest(store) == before  # a dry run changes nothing
    from ctxkeep.sinks.sqlite import delete as delete_store

    rebuilt = []
    real = delete_store.rebuild_fts_tables
    with mock.patch.object(delete_store, "rebuild_fts_tables", lambda c: rebuilt.append(real(c))):
        r = reparse(store)
    # (nearly) every chunk went: the indexes built again from the few kept, not chunk by chunk
    assert len(rebuilt) == 1 and rebuilt[0]["chunks"] < 10
    assert [q(store, x) for x in fts_sql] == fts_before
    assert set(r["agents"]) == FILE_AGENTS | DB_AGENTS
    after = store_digest(store)
    # every table the same; entries the same but for the offsets of files with
    # redactions (they count redacted bytes)
    assert {k: v for k, v in after.items() if k != "entries"} == {
        k: v for k, v in before.items() if k != "entries"
    }
    assert after["entries"][0] == before["entries"][0]
    assert q(store, clean_sql, *redacted) == clean
    assert q(store, "SELECT * FROM usage ORDER BY usage_key") == usage
    # the ids and every column but the offset the same in the files with a secret, the
    # Codex rollout whose ids hash its lines (one held a password) among them
    assert "codex" in {v["agent"] for v in held.values() if v["disk"] in redacted}
    no_off = cols.replace(", source_offset", "")
    sec_sql = f"SELECT {no_off} FROM entries WHERE source_path IN ({','.join('?' * len(redacted))}) ORDER BY entry_id"
    assert q(store, sec_sql, *redacted) == secret_rows
    assert not [e for e in r["diff"]["entries"] if e["added"] or e["removed"]]
    assert all(not any(u["delta"].values()) for u in r["diff"]["usage"].values())
    assert vault_verify(store)["ok"]
    # the DuckDB rebuilt from the new store holds its entries
    import duckdb

    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM entries").fetchone()[0] == after["entries"][0]
    finally:
        con.close()


def test_a_lost_store_is_rebuilt_from_the_vault_by_doctor_repair(home_copy, tmp_path):
    """store.db lost (no backup) and the agents' files gone: ``doctor --repair`` rebuilds
    the manifest from the packs and the entries and usage from the vault: the same entry
    ids and usage totals as before."""
    from ctxkeep.maintenance import doctor

    store = tmp_path / "store"
    ingest(home_copy, store)
    held = _vaulted(store)
    ids = q(store, "SELECT entry_id FROM entries WHERE agent IN (SELECT agent FROM vault_files) ORDER BY 1")
    usage = q(
        store,
        "SELECT agent, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens) FROM usage "
        "WHERE agent IN (SELECT agent FROM vault_files) GROUP BY agent ORDER BY agent",
    )
    for p in _disk(held):
        os.remove(p)
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    (store / "store.db").write_bytes(b"")  # lost: what a full disk or a bad copy leaves
    findings = doctor.check(store)
    r = doctor.repair(store, findings)
    assert any("from the vault" in a for a in r["actions"]), r
    assert any("manifest from" in a for a in r["actions"]), r
    got = q(store, "SELECT entry_id FROM entries WHERE agent IN (SELECT agent FROM vault_files) ORDER BY 1")
    redacted_codex = 2  # the lines redaction changed in a Codex file whose ids hash the line
    assert len(got) == len(ids) and len(set(got) ^ set(ids)) <= 2 * redacted_codex
    assert (
        q(
            store,
            "SELECT agent, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens) FROM usage "
            "WHERE agent IN (SELECT agent FROM vault_files) GROUP BY agent ORDER BY agent",
        )
        == usage
    )
    assert vault_verify(store)["ok"]


def test_the_manifest_is_rebuilt_from_the_packs_alone(home_copy, tmp_path):
    from ctxkeep.sinks.vault.capture import replay

    store = tmp_path / "store"
    ingest(home_copy, store)
    # a second state of a Codex rollout (appended lines) and a rewritten Gemini document
    later = corpus(
        "../appends/codex/rollout-2025-12-15T14-44-44-019b2241-a0a9-7740-a0c0-33c010d4f7e6.later.jsonl"
    )
    (rollout,) = (home_copy / ".codex" / "sessions").rglob("rollout-2025-12-15T14-44-44-*.jsonl")
    first = rollout.stat().st_size
    rollout.write_bytes(later.read_bytes())
    (doc,) = (home_copy / ".gemini").rglob("session-2025-12-08T17-35-9fae96a8.json")
    d = json.loads(doc.read_bytes())
    d["lastUpdated"] = "2025-12-09T00:00:00Z"
    doc.write_text(json.dumps(d, indent=2))
    ingest(home_copy, store)
    tables = ("vault_packs", "vault_objects", "vault_files", "vault_generations", "vault_segments")

    def rows():
        out = {t: q(store, f"SELECT * FROM {t} ORDER BY 1, 2") for t in tables}
        # without the times a replay writes anew (pack created_at; generation created/updated_at)
        out["vault_packs"] = [r[:3] for r in out["vault_packs"]]
        out["vault_generations"] = [r[:10] + r[12:] for r in out["vault_generations"]]
        return out

    before = rows()
    # one generation: the first capture's pieces (``capture.pieces_of``), then the appended lines
    segs = q(
        store,
        "SELECT offset, length FROM vault_segments WHERE gen_id = (SELECT g.gen_id FROM vault_generations g "
        "JOIN vault_files f USING (vfile_id) WHERE f.path = ?) ORDER BY seq",
        str(rollout),
    )
    assert len(segs) >= 2 and segs[-1] == (first, later.stat().st_size - first)
    assert q(
        store,
        "SELECT count(*) FROM vault_generations g JOIN vault_files f USING (vfile_id) WHERE f.path = ?",
        str(doc),
    ) == [(2,)]
    conn = sqlite_store.connect(store)
    try:
        with sqlite_store.write(conn):
            for t in tables:
                conn.execute(f"DELETE FROM {t}")
            n = replay(conn, store)
    finally:
        conn.close()
    assert n == len(before["vault_packs"])
    assert rows() == before
    assert vault_verify(store)["ok"]


def test_a_purge_takes_the_session_out_of_the_vault_and_a_replay_never_brings_it_back(home_copy, tmp_path):
    from ctxkeep.maintenance import doctor
    from ctxkeep.maintenance.purge import run_purge
    from ctxkeep.maintenance.purge_request import PurgeRequest
    from ctxkeep.sinks.vault.packs import read_object, read_record

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["codex", "claude-code"])
    (rollout,) = (home_copy / ".codex" / "sessions").rglob("rollout-2025-10-31T19-02-58-*.jsonl")
    sid = q(store, "SELECT DISTINCT session_id FROM entries WHERE source_path = ?", str(rollout))[0][0]
    marker = rollout.read_bytes().splitlines()[5][:200]  # bytes only this file holds
    assert marker and not any(marker in p.read_bytes() for p in (home_copy / ".claude").rglob("*.jsonl"))

    def vault_bytes() -> bytes:
        out = []
        for _, path in pack_names(store):
            _rec, objs = read_record(path)
            out += [read_object(store, path.stem, o, st, raw, sha) for sha, o, st, raw in objs]
        return b"".join(out)

    assert marker in vault_bytes()
    run_purge(store, PurgeRequest("session", session_id=sid))
    assert str(rollout) not in _vaulted(store)
    assert marker not in vault_bytes()
    assert vault_verify(store, full=True)["ok"]
    with pytest.raises(NotFound):
        vault_restore(store, sid)
    # the store lost: the packs rebuild the manifest without the purged file
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    (store / "store.db").write_bytes(b"")
    doctor.repair(store, doctor.check(store))
    assert str(rollout) not in _vaulted(store)
    assert marker not in vault_bytes()


def _state(store: Path, agents: tuple[str, ...] = ("claude-code", "codex")) -> tuple:
    a = ",".join(f"'{x}'" for x in agents)
    return (
        q(store, f"SELECT entry_id, status FROM entries WHERE agent IN ({a}) ORDER BY 1"),
        q(
            store,
            "SELECT agent, sum(input_tokens), sum(output_tokens), sum(cache_read_tokens), "
            f"sum(cache_creation_tokens) FROM usage WHERE agent IN ({a}) GROUP BY agent ORDER BY agent",
        ),
    )


def _compress_then_lose_the_store(home_copy, tmp_path, *, deleted: bool = False) -> tuple[Path, tuple, list]:
    from ctxkeep.maintenance import compress

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["claude-code", "codex"])
    files = [
        next((home_copy / ".codex" / "sessions").rglob("rollout-2025-10-31T19-02-58-*.jsonl")),
        next((home_copy / ".claude" / "projects").rglob("d3ad4cdc-*.jsonl")),
    ]
    s = compress.run_compress(store, paths=files, keep_messages=10, force=True)
    assert [f["status"] for f in s["files"]] == ["compressed", "compressed"], s
    before = _state(store)
    media = q(store, "SELECT entry_id, seq, sha256 FROM media ORDER BY 1, 2")
    assert q(store, "SELECT count(*) FROM entries WHERE status = 'archived'")[0][0] > 0
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    if not deleted:
        (store / "store.db").write_bytes(b"")
    return store, before, media


def test_a_deleted_store_is_not_rebuilt_from_the_agents_files_but_from_the_vault(home_copy, tmp_path):
    """store.db deleted (with its WAL) after a compress, the vault and store.id beside it
    (found by a new user): ``ingest`` and ``stats`` refuse with one line naming the
    repair, where ``ingest`` built a new store from the shortened files (entries 3,891
    -> 2,519, the archived history gone); ``doctor --repair`` rebuilds it from the vault:
    the same entry ids, statuses and usage as before."""
    store, before, _media = _compress_then_lose_the_store(home_copy, tmp_path, deleted=True)
    env = {"HOME": str(home_copy), "CTXKEEP_IDLE_SECONDS": "0"}
    for cmd in (["ingest"], ["stats"], ["search", "error"], ["vault", "status"]):
        r = runner.invoke(app, [*cmd, "--home", str(store)], env=env)
        assert r.exit_code == 1, (cmd, r.output)
        assert (
            r.output.strip()
            .splitlines()[-1]
            .startswith(f"error: store.db is missing ({store / 'store.db'}) - run 'ctxkeep doctor --repair'")
        ), (cmd, r.output)
        assert not (store / "store.db").exists()  # nothing built behind the user's back
    r = runner.invoke(app, ["doctor", "--home", str(store)], env=env)
    assert r.exit_code == 1 and "missing" in r.output, r.output
    r = runner.invoke(app, ["doctor", "--repair", "--home", str(store)], env=env)
    assert r.exit_code == 0, r.output
    after = _state(store)
    # no phantom session named after a ``.backup`` file (its summary line is the session's)
    assert not set(after[0]) - set(before[0]), r.output
    assert after[0] == before[0]  # entry ids and statuses (archived included)
    assert after[1] == before[1]  # usage totals


def test_compress_then_a_lost_store_then_doctor_repair_gives_the_same_entries_and_usage(home_copy, tmp_path):
    """Issue 27's measured path: compress, store.db lost, ``doctor --repair`` (the
    agents' shortened files still there, their ``.backup`` copies too): the same entry
    ids and statuses and the same usage totals, Codex included (before the vault the
    rebuild re-read the shortened files and double-counted Codex's cumulative totals)."""
    from ctxkeep.maintenance import doctor

    store, before, _media = _compress_then_lose_the_store(home_copy, tmp_path)
    r = doctor.repair(store, doctor.check(store))
    assert any("from the vault" in a for a in r["actions"]), r
    after = _state(store)
    # the same ids, the 2 lines of the Codex rollout in which the vault redacted a
    # password included (their ids hash the redacted line on both paths:
    # ``pipeline.stable_ids``)
    assert after[0] == before[0]
    assert after[1] == before[1]


def test_compress_then_a_lost_store_then_doctor_repair_gives_the_same_media(home_copy, tmp_path):
    from ctxkeep.maintenance import doctor

    store, _before, media = _compress_then_lose_the_store(home_copy, tmp_path)
    doctor.repair(store, doctor.check(store))
    assert media and q(store, "SELECT entry_id, seq, sha256 FROM media ORDER BY 1, 2") == media


def test_ingest_says_when_a_reparse_is_due(home_copy, tmp_path):
    from ctxkeep.pipeline.plan import reparse_due

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["codex", "gemini-cli"])
    (rollout,) = (home_copy / ".codex" / "sessions").rglob("rollout-2025-10-31T19-02-58-*.jsonl")
    conn = sqlite_store.connect(store)
    try:
        assert reparse_due(conn) == []
        with sqlite_store.write(conn):  # read by an older Codex parser ...
            conn.execute("UPDATE watermarks SET parser_version = parser_version - 1 WHERE agent = 'codex'")
        assert reparse_due(conn) == []  # ... but the files are there: the next ingest reads them again
        rollout.unlink()
        assert reparse_due(conn) == [
            "1 codex file(s) are gone from disk and were parsed by an older codex parser than today's: "
            "the vault holds them - run `ctxkeep reparse --agent codex`"
        ]
    finally:
        conn.close()
    s = ingest(home_copy, store, agents=["codex"])
    assert any("ctxkeep reparse --agent codex" in p for p in s.problems)


def test_a_codex_line_with_a_secret_keeps_its_entry_ids_through_a_reparse(tmp_path):
    """Codex names an entry by its line's SHA-256; the vault keeps the line redacted, so
    a reparse hashes the redacted line: an ingest hashes it too (``stable_ids``). A home
    with secrets planted in a Codex rollout: ingest, the file gone, reparse: the same
    entry ids (each with its kind, session, times and usage), the same usage, quarantine
    and status tables, no entry added or removed.

    Not compared: a tool call's text (a secret inside the JSON-escaped ``arguments``:
    redacting the raw line leaves that inner JSON invalid, so the reparse shows the
    arguments unparsed) and the watermark's head hash (the raw head is not in the
    vault) - both reported, not the ids'."""
    from ctxkeep.maintenance.reparse import reparse
    from tests.fixtures.secrets.planted_home import plant
    from tests.store_digest import store_digest

    home, store = tmp_path / "home", tmp_path / "store"
    _claude, codex, _gemini, values = plant(home)
    ingest(home, store, agents=["codex"])
    assert _vaulted(store)[str(codex)]["redactions"]  # the rollout held secrets
    cols = (
        "entry_id, agent, session_id, parent_session_id, native_id, ts, role, kind, tool_name, model, "
        "input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, usage_key, status"
    )
    rows_sql = f"SELECT {cols} FROM entries ORDER BY entry_id"
    before, rows = store_digest(store), q(store, rows_sql)
    assert len(rows) > 5
    codex.unlink()
    r = reparse(store)
    assert r["agents"] == ["codex"]
    after = store_digest(store)
    for table in ("usage", "quarantine", "status_log"):
        assert after[table] == before[table], table
    assert after["entries"][0] == before["entries"][0]
    assert q(store, rows_sql) == rows
    assert not [e for e in r["diff"]["entries"] if e["added"] or e["removed"]], r["diff"]
    assert not any(v.encode() in (store / "store.db").read_bytes() for v in values)


def test_vault_enabled_false_in_config_toml_captures_nothing_and_reads_nothing_twice(home_copy, tmp_path):
    """``[vault] enabled = false`` (config.toml, not only ``CTXKEEP_VAULT=0``): an ingest
    keeps no pack and no manifest row, and the next ingest does not re-read the files to
    fill the vault; turned on again, the next ingest fills it."""
    from ctxkeep.config import load_config

    store = tmp_path / "store"
    store.mkdir()
    (store / "config.toml").write_text("[vault]\nenabled = false\n")
    assert load_config(store).vault.enabled is False
    s = ingest(home_copy, store, agents=["codex"])
    assert s.files_read > 0 and s.entries_new > 0
    assert q(store, "SELECT count(*) FROM vault_files") == [(0,)] and not pack_names(store)
    assert ingest(home_copy, store, agents=["codex"]).files_read == 0
    (store / "config.toml").write_text("[vault]\nenabled = true\n")
    s = ingest(home_copy, store, agents=["codex"])
    assert s.files_read > 0 and s.entries_new == 0
    assert {v["agent"] for v in _vaulted(store).values()} == {"codex"} and pack_names(store)


def test_restoring_an_old_store_backup_brings_back_from_the_vault_what_came_after_it(home_copy, tmp_path):
    """``doctor restore BACKUP`` of a backup older than the vault: Codex ingested, a
    backup taken, Claude Code ingested after it and one of its files compressed (media
    moved out), every agent file deleted; the restore rebuilds the manifest from the
    packs and derives every vaulted file: the same entry ids, usage totals and media as
    before the restore."""
    from ctxkeep.maintenance import backup, compress

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["codex"])
    b = backup.run_backup(store)
    ingest(home_copy, store, agents=["claude-code"])
    f = next((home_copy / ".claude" / "projects").rglob("d3ad4cdc-*.jsonl"))
    s = compress.run_compress(store, paths=[f], keep_messages=10, force=True)
    assert [x["status"] for x in s["files"]] == ["compressed"], s
    before = _state(store)
    media = q(store, "SELECT entry_id, seq, sha256 FROM media ORDER BY 1, 2")
    assert media and before[0]
    for p in list(_vaulted(store)):
        Path(p).unlink(missing_ok=True)
    r = backup.restore(store, Path(b["path"]))
    assert r["vault"] and "from the vault" in r["vault"][-1], r
    assert _state(store) == before
    assert q(store, "SELECT entry_id, seq, sha256 FROM media ORDER BY 1, 2") == media
    assert vault_verify(store, full=True)["ok"]


def test_backfill_of_a_file_the_agent_deleted_derives_it_from_the_vault(home_copy, tmp_path):
    """``backfill --paths FILE`` of a file gone from disk: nothing to read, the vault
    holds it: its entries (deleted from the store here) are derived from the vault."""
    from ctxkeep.maintenance.backfill import run_backfill
    from ctxkeep.sinks.sqlite import delete as delete_store

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["codex"])
    (rollout,) = (home_copy / ".codex" / "sessions").rglob("rollout-2025-10-31T19-02-58-*.jsonl")
    sql = "SELECT entry_id, status FROM entries WHERE source_path = ? ORDER BY 1"
    want = q(store, sql, str(rollout))
    assert len(want) > 10
    conn = sqlite_store.connect(store)
    try:
        with sqlite_store.write(conn):
            delete_store.select_where(conn, "source_path = ?", (str(rollout),))
            delete_store.delete_selected(conn)
            delete_store.drop_selection(conn)
    finally:
        conn.close()
    assert q(store, sql, str(rollout)) == []
    rollout.unlink()
    dry = run_backfill(store, paths=[rollout], dry_run=True)
    assert dry["from_vault"] == [str(rollout)] and q(store, sql, str(rollout)) == []
    r = run_backfill(store, paths=[rollout])
    assert r["reparse"]["files"] == 1
    assert q(store, sql, str(rollout)) == want


def test_an_opencode_json_tree_is_kept_restored_and_reparsed_without_its_files(home_copy, tmp_path):
    """sst/opencode's JSON tree (session, message and part files) is one document per
    session in the vault (``sources.readers.tree``): with the whole ``storage/`` folder
    gone, ``reparse`` derives the same entries (every stored column) and usage, and
    ``vault restore`` writes every file back byte-identical with its mtime."""
    import shutil

    from ctxkeep.maintenance.reparse import reparse
    from ctxkeep.schema import STORED_COLUMNS

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["opencode"])
    storage = home_copy / ".local" / "share" / "opencode" / "storage"
    files = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in storage.rglob("*.json")}
    assert len(files) >= 4
    held = _vaulted(store)
    assert [v["agent"] for v in held.values()] == ["opencode"]
    sql = f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = 'opencode' ORDER BY entry_id"
    before = q(store, sql)
    usage = q(store, "SELECT * FROM usage ORDER BY usage_key")
    assert len(before) >= 3
    shutil.rmtree(storage)
    r = reparse(store, agents=["opencode"])
    assert r["agents"] == ["opencode"] and r["files"] == 1
    assert q(store, sql) == before
    assert q(store, "SELECT * FROM usage ORDER BY usage_key") == usage
    sid = before[0][STORED_COLUMNS.index("session_id")]
    out = vault_restore(store, sid, user_home=home_copy)
    assert len(out["files"]) == len(files)
    for p, (data, mtime) in files.items():
        assert p.read_bytes() == data and p.stat().st_mtime_ns == mtime, p
    assert ingest(home_copy, store, agents=["opencode"]).entries_new == 0


def test_export_parquet_tables_raw_puts_the_vault_generations_in_the_lake_redacted(tmp_path):
    """``export parquet --tables raw``: one row per vault generation with its bytes as
    the vault keeps them (redacted: no planted secret in any byte of the lake), the
    bytes equal to what the vault restores; a second export writes nothing; the default
    export has no ``raw``."""
    import pyarrow.dataset as ds

    from ctxkeep.maintenance.export import export_parquet
    from tests.fixtures.secrets.planted_home import plant

    home, store, lake = tmp_path / "home", tmp_path / "store", tmp_path / "lake"
    _c, codex, _g, values = plant(home)
    ingest(home, store, agents=["claude-code", "codex", "gemini-cli"])
    r = export_parquet(store, str(lake), tables=("raw",))
    assert r["tables"]["raw"]["rows_written"] == len(_vaulted(store)) == 3
    t = ds.dataset(lake / "raw", format="parquet", partitioning="hive").to_table().to_pylist()
    conn = sqlite_store.connect(store, readonly=True)
    try:
        want = {g.path: manifest.gen_bytes(conn, store, g) for g in manifest.generations(conn)}
    finally:
        conn.close()
    assert {x["path"]: x["data"] for x in t} == want
    assert {x["agent"] for x in t} == {"claude-code", "codex", "gemini-cli"}
    raw = {x["path"]: x for x in t}[str(codex)]
    assert json.loads(raw["redactions"]) and b"[REDACTED:" in raw["data"]
    # (the Parquet files are zstd-compressed: the decoded values are searched too)
    every_byte = b"".join(p.read_bytes() for p in lake.rglob("*") if p.is_file())
    decoded = b"".join(x["data"] + x["path"].encode() + x["redactions"].encode() for x in t)
    assert not [v for v in values if v.encode() in every_byte or v.encode() in decoded]
    assert export_parquet(store, str(lake), tables=("raw",))["tables"]["raw"]["rows_written"] == 0
    assert "raw" not in export_parquet(store, str(lake))["tables"]


def test_restore_picks_an_earlier_generation_and_gives_the_users_mode(home_copy, tmp_path, monkeypatch):
    """`vault restore --generation N` / `--at WHEN` write back an earlier generation
    (before: only the newest); files come back with the user's default mode (0644
    under umask 022; an overwritten file keeps its own), not 0600."""
    store = tmp_path / "store"
    ingest(home_copy, store, agents="codex")
    sid, path = q(
        store,
        "SELECT e.session_id, f.path FROM entry_rows e JOIN files f ON f.file_id = e.file_id JOIN vault_files v "
        "ON v.path = f.path JOIN vault_generations g ON g.vfile_id = v.vfile_id WHERE g.redactions = '{}' "
        "GROUP BY 1, 2 ORDER BY count(*) DESC",
    )[0]
    p = Path(path)
    first = p.read_bytes()
    lines = first.splitlines(keepends=True)
    p.write_bytes(b"".join(lines[: len(lines) // 2]))  # rewritten shorter: generation 2
    ingest(home_copy, store, agents="codex")
    conn = sqlite_store.connect(store, readonly=True)
    gens = manifest.generations_of(conn, path)
    conn.close()
    assert [g.gen for g in gens] == [1, 2]
    from ctxkeep import config

    monkeypatch.setattr(config, "_user_umask", None)  # (no CLI run before in this process)
    old = os.umask(0o022)
    try:
        out = tmp_path / "out"
        r = vault_restore(store, sid, to=out, user_home=home_copy, generation=1)
        (f,) = r["files"]
        assert Path(f["to"]).read_bytes() == first
        assert Path(f["to"]).stat().st_mode & 0o777 == 0o644
        out2 = tmp_path / "out2"
        (f,) = vault_restore(store, sid, to=out2, user_home=home_copy)["files"]
        assert Path(f["to"]).read_bytes() == b"".join(lines[: len(lines) // 2])
        # --at: the newest generation captured by then (generation 1's time, to the second)
        c = sqlite_store.connect(store)
        c.execute("UPDATE vault_generations SET created_at='2026-01-01T00:00:00.000000Z' WHERE gen=1")
        c.execute("UPDATE vault_generations SET created_at='2026-02-01T00:00:00.000000Z' WHERE gen=2")
        c.commit()
        c.close()
        env = {"HOME": str(home_copy)}
        args = ["vault", "restore", sid[:8], "--to", str(out2), "--force", "--home", str(store)]
        os.chmod(f["to"], 0o640)
        r = runner.invoke(app, [*args, "--at", "2026-01-15"], env=env)
        assert r.exit_code == 0, r.output
        assert Path(f["to"]).read_bytes() == first and Path(f["to"]).stat().st_mode & 0o777 == 0o640
        r = runner.invoke(app, [*args, "--generation", "3"], env=env)
        assert r.exit_code == 1 and len(r.stderr.splitlines()) == 1
        assert "the vault holds no generation 3 of" in r.stderr
        assert "its generations (captured, UTC): 1 (2026-01-01T00:00:00), 2 (2026-02-01T00:00:00)" in r.stderr
        r = runner.invoke(app, [*args, "--at", "2025-12-31"], env=env)
        assert r.exit_code == 1 and "no generation captured by then" in r.stderr
    finally:
        os.umask(old)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_file_restored_by_the_cli_gets_the_users_default_mode(home_copy, tmp_path, monkeypatch, umask):
    """`ctxkeep vault restore` of a deleted file writes it 0666 less the user's umask
    (0644 under 022, 0640 under 027), as the agent making it anew would: the vault
    records no mode. Before, the CLI's own umask (0o077, for the store) made it 0600
    (newuser15)."""
    from ctxkeep import config

    store = tmp_path / "store"
    ingest(home_copy, store, agents="codex")
    sid, path = q(
        store,
        "SELECT e.session_id, f.path FROM entry_rows e JOIN files f ON f.file_id = e.file_id JOIN vault_files v "
        "ON v.path = f.path JOIN vault_generations g ON g.vfile_id = v.vfile_id WHERE g.redactions = '{}' "
        "GROUP BY 1, 2 ORDER BY count(*) DESC",
    )[0]
    p = Path(path)
    data = p.read_bytes()  # (no secret in it: restored byte for byte)
    p.unlink()
    monkeypatch.setattr(config, "_user_umask", None)  # a fresh process: not narrowed yet
    old = os.umask(umask)
    try:
        r = runner.invoke(
            app, ["vault", "restore", sid[:8], "--home", str(store)], env={"HOME": str(home_copy)}
        )
        assert os.umask(old) == 0o077  # the CLI narrowed its own umask for the store
    finally:
        os.umask(old)
    assert r.exit_code == 0, r.output
    assert p.read_bytes() == data
    assert p.stat().st_mode & 0o777 == 0o666 & ~umask


def test_status_counts_the_sessions_of_an_opencode_json_tree(home_copy, tmp_path):
    """sst/opencode's JSON tree is one vault document per session whose entries are on
    the message and part files: ``vault status`` said "files 1, sessions 0" while
    ``sources``/``stats`` said 1 session."""
    store = tmp_path / "store"
    ingest(home_copy, store, agents=["opencode"])
    want = q(store, "SELECT count(DISTINCT session_id) FROM entries WHERE agent = 'opencode'")[0][0]
    assert want == 1
    r = vault_status(store, DiscoveryContext(home=home_copy, env={}))
    by = {a["agent"]: a for a in r["agents"]}
    assert (by["opencode"]["files"], by["opencode"]["sessions"]) == (1, want)


def test_a_replayed_manifest_keeps_each_generation_its_capture_time(store_home):
    """The manifest rebuilt from the packs (``restore BACKUP``, ``doctor --repair``)
    gives each generation the time its pack's record holds (``"t"``), the time it was
    captured, not the time of the rebuild (newuser14 F15); ``vault restore --at`` and
    ``generation_max_age_days`` read it."""
    import time

    from ctxkeep.sinks.vault.capture import replay

    p = "/s/rollout.jsonl"
    _record(store_home, _cap(p, b'{"n": 1}\n'))
    time.sleep(0.05)
    _record(store_home, _cap(p, b'{"n": 2, "x": "rewritten"}\n'))  # generation 2
    cols = "SELECT g.gen, g.created_at, g.updated_at FROM vault_generations g ORDER BY g.gen"
    before = q(store_home, cols)
    packs = q(store_home, "SELECT name, created_at FROM vault_packs ORDER BY name")
    assert len(before) == 2 and before[0][1] < before[1][1]
    time.sleep(0.05)
    conn = sqlite_store.connect(store_home)
    try:
        with sqlite_store.write(conn):
            for t in ("vault_packs", "vault_objects", "vault_files", "vault_generations", "vault_segments"):
                conn.execute(f"DELETE FROM {t}")
            assert replay(conn, store_home) == 2
    finally:
        conn.close()
    assert q(store_home, cols) == before
    assert q(store_home, "SELECT name, created_at FROM vault_packs ORDER BY name") == packs


@pytest.mark.parametrize("deleted", [False, True])
def test_compress_restore_then_a_lost_store_keeps_the_marker_archived(home_copy, tmp_path, deleted):
    """compress, ``compress --restore`` (the marker record leaves the file: its entry
    ``archived``), then store.db lost (0 bytes or deleted) and ``doctor --repair``: the
    rebuild from the vault into the empty store gives the same entry ids and statuses.
    The cut is not done again (F13); the marker entry stayed ``active`` (one per
    restored file: newuser14's leftover), as no old store kept its status."""
    from ctxkeep.maintenance import compress, doctor

    store = tmp_path / "store"
    ingest(home_copy, store, agents=["claude-code", "codex"])
    files = [
        next((home_copy / ".codex" / "sessions").rglob("rollout-2025-10-31T19-02-58-*.jsonl")),
        next((home_copy / ".claude" / "projects").rglob("d3ad4cdc-*.jsonl")),
    ]
    s = compress.run_compress(store, paths=files, keep_messages=10, force=True)
    assert [f["status"] for f in s["files"]] == ["compressed", "compressed"], s
    for f in files:
        compress.restore_file(store, f)
    before = _state(store)
    archived = [eid for eid, st in before[0] if st == "archived"]
    # the Claude Code file's marker (no marker is written into a Codex rollout:
    # compress.plan), every other entry active again
    assert len(archived) == 1, archived
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (store / name).unlink(missing_ok=True)
    if not deleted:
        (store / "store.db").write_bytes(b"")
    doctor.repair(store, doctor.check(store))
    after = _state(store)
    assert [x for x in after[0] if x[1] != "active"] == [(eid, "archived") for eid in sorted(archived)]
    assert after == before


def test_with_the_vault_off_vault_status_and_restore_say_so(home_copy, tmp_path, monkeypatch):
    """newuser15 F20: with ``CTXKEEP_VAULT=0``, ``vault status`` printed a warning per
    Claude Code file ("the vault holds 0 of its N bytes - run ctxkeep ingest before
    then": ingest keeps nothing while it is off) and ``vault restore`` blamed a
    database or an old ingest. Now one line says the vault is off, and the restore's
    hint names it."""
    monkeypatch.setenv("CTXKEEP_VAULT", "0")
    store = tmp_path / "store"
    ingest(home_copy, store, agents=["claude-code"])
    env = {"HOME": str(home_copy), "CTXKEEP_IDLE_SECONDS": "0", "CTXKEEP_VAULT": "0", "COLUMNS": "200"}
    r = runner.invoke(app, ["vault", "status", "--home", str(store)], env=env)
    assert r.exit_code == 0, r.output
    assert "vault: off (CTXKEEP_VAULT=0 or [vault] enabled = false in config.toml)" in r.stdout
    assert "run `ctxkeep ingest` before then" not in r.output and "no session at risk" not in r.output
    d = json.loads(runner.invoke(app, ["vault", "status", "--home", str(store), "--json"], env=env).stdout)
    assert d["enabled"] is False
    r = runner.invoke(app, ["vault", "restore", "d3ad", "--dry-run", "--home", str(store)], env=env)
    assert r.exit_code == 1 and "the vault is off (CTXKEEP_VAULT=0" in r.stderr, r.output
