"""docs/cli.md is the command line as it is (sqlite-utils style): generated from the
Typer app, every command and option in it, and each documented ``--json`` shape equal
to what the command prints."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from ctxkeep.cli import app
from ctxkeep.cli.docs import iter_commands, json_keys, outputs, render_reference
from ctxkeep.service.fetch import FetchedEntry
from ctxkeep.service.sources import SourceRow

DOC = ROOT / "docs" / "cli.md"
runner = CliRunner()


def _sections() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## `ctxkeep ([^`]+)`.*$", text, flags=re.M)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}


def test_docs_cli_md_is_generated_from_the_app():
    assert DOC.read_text(encoding="utf-8") == render_reference(), (
        "docs/cli.md is stale: run `ctxkeep help --reference > docs/cli.md`"
    )


def test_every_command_and_option_is_documented():
    sections = _sections()
    missing = []
    for path, cmd, _ in iter_commands():
        if path not in sections:
            missing.append(path)
            continue
        for p in cmd.params:
            if getattr(p, "hidden", False):
                continue
            names = p.opts + p.secondary_opts if p.param_type_name == "option" else [p.metavar or p.name]
            missing += [
                f"{path} {n}" for n in names if f"`{n}" not in sections[path] and n not in sections[path]
            ]
    assert missing == []
    # and nothing documented that is not a command (a renamed or removed one)
    assert set(sections) == {path for path, _, _ in iter_commands()}


def test_every_json_option_has_a_documented_shape():
    undocumented = [
        path
        for path, cmd, _ in iter_commands()
        if any("--json" in p.opts for p in cmd.params)
        and not any(k == path or k.startswith(path + " --") for k in outputs())
    ]
    assert undocumented == []
    # every key is described in the model (docs/cli.md shows the description)
    for key, model in outputs().items():
        assert all(json_keys(model).values()), (key, [k for k, v in json_keys(model).items() if not v])


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _json(*args) -> object:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize(
    "key,args",
    [
        ("search", ["search", "error", "-n", "3"]),
        ("show --session", ["show", "--session", "c61729d4", "--budget", "300"]),
        ("stats", ["stats"]),
        ("sessions", ["sessions"]),
        ("resume", ["resume", "c61729d4"]),
        ("purge", ["purge", "--session", "c61729d4", "--dry-run"]),
        ("retention", ["retention", "--dry-run"]),
        ("backfill", ["backfill", "--dry-run", "--agent", "codex"]),
        ("compress --check", ["compress", "--check"]),
        ("doctor", ["doctor"]),
        ("report daily", ["report", "daily"]),
        ("report tools", ["report", "tools"]),
    ],
)
def test_documented_object_shapes_are_what_commands_print(home, key, args):
    out = _json(*args, "--home", home, "--json")
    model = outputs()[key]
    assert isinstance(out, dict) and out["schema"] == 1
    assert list(out)[0] == "schema"
    assert set(out) - {"schema"} <= set(json_keys(model)), set(out) - set(json_keys(model))


def test_show_sources_and_hooks_status_print_objects_with_schema(home, corpus_store):
    """``show ID`` and ``sources`` print objects with ``"schema": 1`` whose keys (and
    their items' keys) are the documented ones; ``hooks status``: test_cli_hooks."""
    import sqlite3

    conn = sqlite3.connect(f"file:{corpus_store[0] / 'store.db'}?mode=ro", uri=True)
    eid = conn.execute("SELECT entry_id FROM entries WHERE kind='message' LIMIT 1").fetchone()[0]
    conn.close()
    shown = _json("show", eid, "--home", home, "--json")
    assert shown["schema"] == 1 and set(shown) - {"schema"} == set(json_keys(outputs()["show"]))
    (item,) = shown["entries"]
    assert item["entry_id"] == eid and set(item) == set(json_keys(FetchedEntry))
    found = _json("sources", "--home", home, "--json")
    assert found["schema"] == 1 and set(found) - {"schema"} == set(json_keys(outputs()["sources"]))
    assert {r["agent"] for r in found["rows"]} >= {"claude-code", "codex"}
    assert set(found["rows"][0]) <= set(json_keys(SourceRow))


def test_search_and_show_notes_are_documented_as_they_are_printed(store):
    """``note`` is null when nothing was cut (as every ``--json`` spells "none" since
    session 18; ``""`` before), and docs/cli.md says so."""
    import json as _json

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["search", "setSectionResizeMode", "--home", str(store), "--json"])
    assert _json.loads(r.stdout)["note"] is None
    r = CliRunner().invoke(app, ["show", "--session", "c61729d4", "--home", str(store), "--json"])
    assert _json.loads(r.stdout)["note"] is None
    text = DOC.read_text()
    assert "`note`: why hits were cut or only some terms matched (null: none)" in text, "docs/cli.md"
    assert "`note`: why turns were left out (null: none)" in text
    assert '("": none)' not in text
