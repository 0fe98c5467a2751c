"""A reparse of a session whose file the agent deleted (issue 27): the entries are the
same as when the file was on disk. Cursor's agent transcripts (JSONL) and Goose's legacy
JSONL sessions dated entries by their file's mtime (``path.stat()``): with the file gone
the read stopped (Cursor: no entries) or failed (Goose: the metadata line), and the
reparse lost them; Continue dated a session at 1970 instead. The reparse's file carries
the generation's mtime (``readers.jsonl.stat_of``).

Fixture homes are copies in tmp."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ctxkeep.maintenance.reparse import reparse
from ctxkeep.schema import STORED_COLUMNS
from tests.conftest import ingest, q

ENTRIES = (
    f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = ? AND source_path = ? ORDER BY entry_id"
)
ALL = f"SELECT {', '.join(STORED_COLUMNS)} FROM entries WHERE agent = ? ORDER BY entry_id"
USAGE = "SELECT * FROM usage WHERE agent = ? ORDER BY usage_key"
FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.mark.parametrize(
    ("agent", "rel"),
    [
        (
            "cursor",
            ".cursor/projects/home-user-src-webapp/agent-transcripts/7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f/"
            "7d3c1e9a-0b6f-4f5e-9a2d-3c4b5a6d7e8f.jsonl",
        ),
        ("goose", ".local/share/goose/sessions/20250301_legacy.jsonl"),
        ("continue", ".continue/sessions/c-new.json"),
    ],
)
def test_a_reparse_after_the_agents_file_is_deleted_keeps_its_entries(tmp_path, agent, rel):
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / agent / "home", home)
    store = tmp_path / "store"
    ingest(home, store, agent)
    path = home / rel
    of_file = q(store, ENTRIES, agent, str(path))
    assert of_file, "the fixture's file gives entries"
    before, usage = q(store, ALL, agent), q(store, USAGE, agent)
    path.unlink()  # the agent deleted its file (the database, if any, stays)
    r = reparse(store, agents=[agent])
    assert r["agents"] == [agent]
    assert q(store, ENTRIES, agent, str(path)) == of_file
    assert q(store, ALL, agent) == before
    assert q(store, USAGE, agent) == usage
    assert all(e["removed"] == 0 and e["changed"] == 0 for e in r["diff"]["entries"])


def test_windsurf_is_kept_and_reparsed_with_its_project_after_its_workspace_folders_are_gone(tmp_path):
    """Windsurf's chat rows are a rows document per workspace database (session ""),
    and the project ``workspace.json`` named rides in the vault's meta: with the whole
    ``workspaceStorage`` gone (databases and ``workspace.json``) a reparse gives the
    same entries (project and the tab bubbles' database mtime included) and usage."""
    from ctxkeep.maintenance.vault import vault_restore
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import manifest
    from ctxkeep.sources.readers import rows

    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "windsurf" / "home", home)
    store = tmp_path / "store"
    ingest(home, store, "windsurf")
    before, usage = q(store, ALL, "windsurf"), q(store, USAGE, "windsurf")
    projects = {r[0] for r in q(store, "SELECT DISTINCT project_dir FROM entries WHERE agent = 'windsurf'")}
    assert before and projects - {None}, "the fixture names its projects"
    conn = sqlite_store.connect(store, readonly=True)
    try:
        gens = [g for g in manifest.generations(conn) if g.agent == "windsurf"]
    finally:
        conn.close()
    assert len(gens) == 2 and all(g.meta.get("vault_rows") and g.meta["session"] == "" for g in gens)
    assert all("project" in g.meta["file_meta"] for g in gens)
    ws = home / ".config" / "Windsurf" / "User" / "workspaceStorage"
    shutil.rmtree(ws)
    r = reparse(store, agents=["windsurf"])
    assert r["agents"] == ["windsurf"]
    assert q(store, ALL, "windsurf") == before
    assert q(store, USAGE, "windsurf") == usage
    sid = before[0][STORED_COLUMNS.index("session_id")]
    out = vault_restore(store, sid, to=tmp_path / "out", user_home=home)
    (f,) = out["files"]
    head, got = rows.parse(Path(f["to"]).read_bytes())
    assert head["agent"] == "windsurf" and {t for t, _, _ in got} == {"ItemTable"}
    assert {row["key"] for _, _, row in got} <= {
        "workbench.panel.aichat.view.aichat.chatdata",
        "aiChat.chatdata",
    }


def test_vault_status_names_files_gone_from_disk_and_restore_previews_them(tmp_path):
    """A session file the agent (or the user) deleted: ``vault status`` says the vault
    keeps it and how to write it back (before: "no session at risk" and nothing else);
    ``vault restore --all-missing --dry-run`` lists what it would write and writes
    nothing (newuser14 F5)."""
    import json

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "goose" / "home", home)
    store = tmp_path / "store"
    ingest(home, store, "goose")
    path = home / ".local/share/goose/sessions/20250301_legacy.jsonl"
    data = path.read_bytes()
    runner = CliRunner()
    env = {"HOME": str(home), "COLUMNS": "200"}
    r = runner.invoke(app, ["vault", "status", "--json", "--home", str(store)], env=env)
    assert r.exit_code == 0 and json.loads(r.stdout)["missing"] == []
    path.unlink()
    r = runner.invoke(app, ["vault", "status", "--json", "--home", str(store)], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["missing"] == [str(path)]
    r = runner.invoke(app, ["vault", "status", "--home", str(store)], env=env)
    assert "1 file gone from disk, kept by the vault: ctxkeep vault restore --all-missing" in r.output
    args = ["vault", "restore", "--all-missing", "--home", str(store)]
    r = runner.invoke(app, [*args, "--dry-run", "--json"], env=env)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["dry_run"] is True and [(f["to"], f["bytes"]) for f in got["files"]] == [
        (str(path), len(data))
    ]
    r = runner.invoke(app, [*args, "--dry-run"], env=env)
    shown = "~" + str(path)[len(env["HOME"]) :]  # the path with ~ (newuser15 F4: absolute before)
    assert r.exit_code == 0 and f"would restore {shown}" in r.output.replace("\n", "")
    assert not path.exists()  # a preview writes nothing
    r = runner.invoke(app, args, env=env)
    assert r.exit_code == 0 and path.read_bytes() == data
    r = runner.invoke(app, ["vault", "status", "--json", "--home", str(store)], env=env)
    assert json.loads(r.stdout)["missing"] == []
