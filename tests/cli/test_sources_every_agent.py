"""``ctxkeep sources --all`` lists every known agent with where it looked, also on a
home that holds none of them (issue 25, item 4; without ``--all`` the agents found
only: ``test_sources_found_first``)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep import schema
from ctxkeep.cli import app
from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import ImportOnly

#: the sources that read only files the user names (data exports)
IMPORT_ONLY = {"chatgpt", "claude-ai"}


def test_every_agent_is_listed_with_where_it_looked_on_an_empty_home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "COLUMNS": "200"}
    r = CliRunner().invoke(app, ["sources", "--json", "--home", str(tmp_path / "ck")], env=env)
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["rows"]
    assert [x["agent"] for x in rows] == list(SOURCES)
    assert set(SOURCES) <= set(schema.AGENTS)
    # import-only sources (contract.ImportOnly: the ChatGPT and Claude.ai data exports)
    # look nowhere in the home: the user names the export with `ingest --path`, so they
    # list no place and their reason says how to import
    import_only = {n for n, src in SOURCES.items() if isinstance(src, ImportOnly)}
    assert import_only == IMPORT_ONLY
    for x in rows:
        if x["agent"] in import_only:
            assert x["searched"] == [] and x["files"] == 0, x
            assert "import-only" in x["reason"] and "ingest --path" in x["reason"], x
            continue
        # each names the places it looked, all under this home, and why nothing was found
        assert x["searched"] and x["files"] == 0, x
        assert all(p.startswith(str(home)) for p in x["searched"]), x
        assert x["reason"], x
    # the text with --all (two lines per agent at this width) names every place each agent looked; the
    # console is made afresh, at this width (an earlier command may have made it wider)
    from ctxkeep.cli import out, short_path

    monkeypatch.setattr(out, "_console", None)
    monkeypatch.setenv("HOME", str(home))  # short_path's ~, as in the command
    text = CliRunner().invoke(
        app, ["sources", "--all", "--home", str(tmp_path / "ck")], env=dict(env, COLUMNS="100")
    )
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert flat.count("looked in") == len(rows) - len(import_only)
    for x in rows:
        assert x["agent"] in flat
        if x["agent"] in import_only:
            assert "import-only" in flat
            continue
        # the places with ~ for the home, a long one shortened from the left (``cli.short_path``)
        looked = [short_path(p, 95) for p in x["searched"][:4]]
        assert "looked in " + ", ".join(looked) in flat, x["agent"]
