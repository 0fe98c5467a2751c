"""What a new user found in session 20's trial (newuser20), each a CLI run:

- F6: a typo in ``[purge]`` (``older_than_day``): ``purge --policy`` said only "no
  [purge] rules" and ``doctor`` nothing; the did-you-mean warning came from a later
  ``ingest``. The command that reads that table, and ``doctor``, now name it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def test_a_purge_table_typo_is_named_by_purge_policy_and_doctor(store):
    home = store
    (home / "config.toml").write_text("[purge]\nolder_than_day = 365\n")
    want = "unknown key purge.older_than_day - did you mean older_than_days?"
    r = runner.invoke(app, ["purge", "--policy", "--dry-run", "--home", str(home)])
    assert r.exit_code == 1 and "no [purge] rules" in r.stderr
    flat = " ".join(r.stderr.split())
    assert want in flat and flat.index(want) < flat.index("no [purge] rules"), r.stderr
    d = runner.invoke(app, ["doctor", "--home", str(home), "--json"])
    found = [f for f in json.loads(d.stdout)["findings"] if f["check"] == "config"]
    assert [(f["status"], want in f["detail"]) for f in found] == [("warning", True)], found
    assert found[0]["file"] == str(home / "config.toml")


def test_every_command_with_a_progress_bar_takes_no_progress(store, tmp_path):
    """newuser20 F11: `export html DEST --no-progress` (as a script passes it to ingest)
    was refused as an unknown option. The exports draw a bar too: they take it. (On a
    copy of the corpus store: an export records its run in the store.)"""
    store = str(store)
    for i, fmt in enumerate(("html", "markdown")):
        dest = tmp_path / f"site{i}"
        r = runner.invoke(app, ["export", fmt, str(dest), "--no-progress", "--home", store])
        assert r.exit_code == 0, r.output
        assert "wrote " in r.stdout and (dest / f"index.{'html' if fmt == 'html' else 'md'}").is_file()
    r = runner.invoke(
        app, ["export", "parquet", str(tmp_path / "lake"), "--dry-run", "--no-progress", "--home", store]
    )
    assert r.exit_code == 0, r.output


def test_an_unknown_agent_in_the_config_is_named_by_compress_and_doctor(store):
    """newuser21 M5: `[agents.codx]` was named (did you mean codex?) by `ingest` only;
    `compress --check` and `doctor` said nothing, and beside an error in the file
    `compress` printed the error alone."""
    home = store
    want = "config.toml names agent 'codx', which ctxkeep has no source for - did you mean codex?"
    (home / "config.toml").write_text("[agents.codx]\nenabled = false\n")
    r = runner.invoke(app, ["compress", "--check", "--home", str(home)])
    assert want in " ".join(r.stderr.split()), r.stderr
    d = runner.invoke(app, ["doctor", "--home", str(home), "--json"])
    found = [f["detail"] for f in json.loads(d.stdout)["findings"] if f["check"] == "config"]
    assert [want in x for x in found] == [True], found
    (home / "config.toml").write_text("[compress]\nmax_size_kb = -5\n[agents.codx]\nenabled = false\n")
    r = runner.invoke(app, ["compress", "--check", "--home", str(home)])
    flat = " ".join(r.stderr.split())
    assert r.exit_code == 1 and want in flat and "error: " in flat, r.stderr
    d = runner.invoke(app, ["doctor", "--home", str(home), "--json"])
    found = [f["detail"] for f in json.loads(d.stdout)["findings"] if f["check"] == "config"]
    assert len(found) == 2 and want in found[1] and "max_size_kb" in found[0], found
