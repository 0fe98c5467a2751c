"""Papercuts a new user met (issue 22 item 6, second pass): error lines name what the
user typed (a positional SESSION is not `--session`; purge says `--project`, never the
MCP field `projectDir`; resume names `--project` only when it was given); `show` of a
database agent's row gives no byte offset; a session id in brackets is no Rich
markup; an unknown project is no empty code span in
the exported index."""

from __future__ import annotations

import sqlite3

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


def _err(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, list(args))
    return r.exit_code, " ".join(r.stderr.split())


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def test_a_positional_session_is_named_as_the_argument(home):
    code, line = _err("resume", "--home", home, "zzzz-no-such")
    assert (
        code == 1
        and line == "error: no such session zzzz-no-such (SESSION) - see `ctxkeep sessions` for the ids"
    )
    code, line = _err("vault", "restore", "--home", home, "zzzz-no-such")
    assert code == 1 and "(SESSION)" in line and "--session" not in line
    # where it is an option, the option
    code, line = _err("show", "--home", home, "--session", "zzzz-no-such")
    assert code == 1 and "no such session zzzz-no-such (--session)" in line


def test_purge_names_its_options_not_the_mcp_fields(home, tmp_path):
    code, line = _err("purge", "--home", home, "--session", "zzzz-no-such", "--dry-run")
    assert code == 1 and "no such session zzzz-no-such (--session)" in line and "sessionId" not in line
    code, line = _err("purge", "--home", home, "--project", str(tmp_path / "nothing-here"), "--dry-run")
    assert code == 1 and f"nothing stored under project {tmp_path / 'nothing-here'}" in line
    assert "(--project)" in line and "projectDir" not in line


def test_resume_names_project_only_when_given(home, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # the store holds sessions, none of this folder: not "run ingest" (a new user's trial)
    code, line = _err("resume", "--home", home)
    assert code == 1 and line == (
        f"error: no session of project {tmp_path} - name one (`ctxkeep sessions` lists them)"
    )
    assert "(--project)" not in line and "ingest" not in line
    code, line = _err("resume", "--home", home, "--project", str(tmp_path))
    assert code == 1 and f"no session of project {tmp_path} (--project)" in line


def test_a_session_id_in_brackets_is_shown_not_read_as_markup(home):
    """The corpus keeps a session whose id is ``[trimmed for fixture]``: Rich read it
    as a markup tag, so `show --session '[tri'` printed its id as ``()``."""
    r = runner.invoke(app, ["show", "--home", home, "--session", "[tri"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].startswith("claude-code session [tri ([trimmed for fixture])")


@pytest.mark.parametrize("given", ["[nomatch", "[nomatch]", "*", "%"])
def test_a_session_id_with_glob_or_markup_characters_is_shown_as_typed(home, given):
    code, line = _err("show", "--home", home, "--session", given)
    assert (
        code == 1
        and line == f"error: no such session {given} (--session) - see `ctxkeep sessions` for the ids"
    )


def test_show_of_a_database_row_gives_no_byte_offset(home):
    conn = sqlite3.connect(f"file:{home}/store.db?mode=ro", uri=True)
    db_id, db_path = conn.execute(
        "SELECT entry_id, source_path FROM entries WHERE agent='crush' AND kind='message' LIMIT 1"
    ).fetchone()
    file_id, file_path, off = conn.execute(
        "SELECT entry_id, source_path, source_offset FROM entries WHERE agent='codex' AND source_offset > 0 LIMIT 1"
    ).fetchone()
    conn.close()
    r = runner.invoke(app, ["show", "--home", home, db_id])
    assert r.exit_code == 0, r.output
    assert f"  from {db_path} (a database row)" in r.stdout and "@ byte" not in r.stdout
    r = runner.invoke(app, ["show", "--home", home, file_id])
    assert f"  from {file_path} @ byte {off:,}" in r.stdout


def test_the_markdown_index_shows_an_unknown_project_as_a_dash():
    from ctxkeep.render.transcript import index_markdown
    from ctxkeep.service.transcripts import SessionSummary

    rows = [
        SessionSummary.model_construct(
            agent="codex",
            session_id=sid,
            title="t",
            project_dir=proj,
            started=None,
            depth=0,
            messages=1,
            tool_calls=0,
            tokens=0,
            cost_usd=None,
        )  # fmt: skip
        for sid, proj in (("s1", None), ("s2", "/w/x"))
    ]
    md = index_markdown(rows, tz="UTC", link=lambda s: None)
    lines = [x for x in md.splitlines() if x.startswith("| codex")]
    assert "``" not in md and lines[0].split("|")[3].strip() == "-"
    assert lines[1].split("|")[3].strip() == "`/w/x`"


@pytest.mark.parametrize("page", [["--limit", "3"], ["-n", "3"], ["--offset", "5"]])
def test_sessions_all_with_a_page_option_is_a_usage_error(home, page):
    """``sessions --all --limit 3`` printed every session and exit 0 (--limit silently
    ignored; newuser14 F2): the options exclude each other, one error line, exit 2."""
    r = runner.invoke(app, ["sessions", "--home", home, "--all", *page])
    assert r.exit_code == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    opt = "--offset" if page[0] == "--offset" else "--limit"
    assert len(lines) == 1 and lines[0].startswith(f"error: --all and {opt} exclude each other"), lines
