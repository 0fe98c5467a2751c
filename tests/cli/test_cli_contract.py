"""The command line's error contract (issue 15): exit 0 success, 1 failure, 2 wrong
usage, for every command; stderr is ONE line `error: …` without a traceback, in the
CLI's words (never MCP's `sessionId`/`projectDir`).

The table runs through Click's test runner on ``app``: the same code path as the
console script (``ctxkeep.cli._Group.main`` under ``run_command``); a sample of it runs
as whole processes (``python -m ctxkeep``) and must give the same code and line.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def world(corpus_store, tmp_path_factory):
    """A private copy of the corpus store, an empty HOME, a file, two entry ids, a
    session id and a damaged store."""
    base = tmp_path_factory.mktemp("contract")
    store = base / "store"
    shutil.copytree(corpus_store[0], store, ignore=shutil.ignore_patterns("*.lock"))
    empty_home = base / "home"
    empty_home.mkdir()
    a_file = base / "file.txt"
    a_file.write_text("not a directory\n")
    conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    ids = [r[0] for r in conn.execute("SELECT entry_id FROM entries ORDER BY entry_id LIMIT 2")]
    conn.close()
    damaged = base / "damaged"
    damaged.mkdir()
    (damaged / "store.db").write_bytes(b"this is not a SQLite database" * 200)
    empty_store = base / "empty-store"
    empty_store.mkdir()
    bad_config = base / "bad-config"
    bad_config.mkdir()
    (bad_config / "config.toml").write_text("[agents\n")
    return {
        "STORE": str(store),
        "EMPTY": str(empty_home),
        "FILE": str(a_file),
        "ID1": ids[0],
        "ID2": ids[1],
        "DAMAGED": str(damaged),
        "EMPTY_STORE": str(empty_store),
        "BAD_CONFIG": str(bad_config),
        "OUT": str(base / "out"),
        "ROLLOUT": str(
            CORPUS_HOME
            / ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
        ),
    }


# (args, exit code, a piece of the one stderr line); {NAME} is filled from `world`;
# every case runs with --home {STORE} unless it names its own --home
CASES = [
    # the findings of issue 15, one by one
    (["search", ""], 2, "the query is empty"),
    (["search", "x", "-n", "0"], 2, "limit 0 is out of range (--limit) - use 1 to 200"),
    (["search", "x", "--budget", "0"], 2, "budget 0 is out of range (--budget)"),
    (["search", "x", "--since", "2025-13-45"], 2, "cannot read the time '2025-13-45' (--since)"),
    (["search", "x", "--agent", "nosuch"], 2, "unknown agent 'nosuch' (--agent)"),
    (["search", "x", "--kind", "bogus"], 2, "unknown kind 'bogus' (--kind)"),
    (["search", "x", "--role", "bogus"], 2, "unknown role 'bogus' (--role)"),
    (["search", "x", "--status", "bogus"], 2, "unknown status 'bogus' (--status)"),
    (["show", "{ID1}", "{ID2}", "--offset", "5"], 2, "offset works with one entry id at a time (--offset)"),
    (
        ["purge", "--session", " "],
        2,
        "purge of a session needs a session id (--session) - give the session's id",
    ),
    (["ingest", "--agent", "nosuch"], 2, "unknown agent 'nosuch' (--agent)"),
    (["search", "x", "--bogus"], 2, "no such option: --bogus"),
    (["nosuch"], 2, "no such command 'nosuch'"),
    (["compress", "/nonexistent.jsonl"], 1, "no such file or directory: /nonexistent.jsonl (FILE)"),
    (["backfill", "--path", "/nonexistent"], 1, "no such file or directory: /nonexistent (--path)"),
    (["ingest", "--path", "/nonexistent"], 1, "no such file or directory: /nonexistent (--path)"),
    (["show", "nosuchid"], 1, "no entry nosuchid"),
    (["compress", "--check", "--restore", "{ROLLOUT}"], 2, "--check and --restore exclude each other"),
    (["serve", "--host", "0.0.0.0"], 2, "--host 0.0.0.0 is not a loopback address"),
    (["search", "x", "--since", "2025-11-02", "--until", "2025-11-01"], 2, "is after --until"),
    # the same vocabulary in the other commands
    (["sessions", "--agent", "nope"], 2, "unknown agent 'nope' (--agent) - did you mean 'note'?"),
    (["sessions", "--since", "tomorrow"], 2, "cannot read the time 'tomorrow' (--since)"),
    (["backfill", "--since", "last tuesday"], 2, "cannot read the time 'last tuesday' (--since)"),
    (["backfill", "--agent", "codx"], 2, "unknown agent 'codx' (--agent) - did you mean 'codex'?"),
    (["backfill", "--since", "2025-10-02", "--until", "2025-10-01"], 2, "is after --until"),
    (["report", "daily", "--since", "yesterday"], 2, "cannot read the time 'yesterday' (--since)"),
    (["report", "daily", "--agent", "nope"], 2, "unknown agent 'nope' (--agent)"),
    (["report", "daily", "--mode", "cheap"], 2, "unknown cost mode 'cheap'"),
    (["report", "daily", "--json", "--csv"], 2, "--json and --csv exclude each other"),
    (["report", "daily", "-z", "Mars/Base"], 2, "unknown time zone 'Mars/Base'"),
    (["report", "blocks", "--token-limit", "lots"], 2, "not a token limit"),
    (["report", "blocks", "--token-limit", "-5"], 2, "give a number above 0 or max"),
    (["report", "daily", "--home", "{EMPTY_STORE}"], 1, "no analytics store"),
    (["report", "html", "{OUT}", "--until", "June"], 2, "cannot read the time 'June' (--until)"),
    (["redact", "--dry-run"], 2, "--dry-run needs --rescan"),
    (["quarantine", "list", "--agent", "codx", "--home", "{STORE}"], 2, "unknown agent 'codx' (--agent)"),
    (["redact", "--rescan", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["secrets", "--dry-run"], 2, "--dry-run and FILE need --scrub"),
    (["secrets", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["secrets", "--scrub", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["vault", "status", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["vault", "verify", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["vault", "restore", "nosuch", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["reparse", "--home", "{EMPTY_STORE}"], 1, "no store"),
    (["reparse", "--agent", "nosuch"], 2, "nosuch"),
    (["export", "parquet", "{OUT}", "--tables", "bogus"], 2, "unknown table bogus (--tables)"),
    (["export", "parquet", "nosuch://x/y", "--home", "{STORE}"], 2, "unknown lake scheme nosuch://"),
    (["export", "parquet", "{OUT}", "--home", "{EMPTY_STORE}"], 1, "no store yet"),
    (["export", "html", "{OUT}", "--session", "nosuch"], 1, "nosuch"),
    (
        ["export", "markdown", "{OUT}", "-z", "Mars/Olympus"],
        2,
        "unknown time zone 'Mars/Olympus' (--timezone)",
    ),
    (["ui", "--host", "0.0.0.0", "--no-browser"], 2, "--host 0.0.0.0 is not a loopback address"),
    (["report", "daily", "--lake", "{EMPTY}"], 1, "the lake holds no usage"),
    (["hooks", "install", "--agent", "aider"], 2, "unknown agent 'aider' (--agent)"),
    (["hooks", "status", "--scope", "bogus"], 2, "unknown scope 'bogus'"),
    (["mcp", "install", "--agent", "aider"], 2, "unknown agent 'aider' (--agent)"),
    (["help", "nosuch"], 2, "unknown command 'nosuch'"),
    # show, resume, purge: what is asked for is not there (1) or does not fit (2)
    (["show"], 2, "nothing to show"),
    (["show", "{ID1}", "--session", "c61729d4"], 2, "give entry ids or --session, not both"),
    (["show", "{ID1}", "--max-bytes", "0"], 2, "max bytes 0 is out of range (--max-bytes)"),
    (["show", "{ID1}", "--budget", "0"], 2, "budget 0 is out of range (--budget) - use 1 to 200000"),
    (["show", "--session", "nosuchsession"], 1, "no such session nosuchsession"),
    (["resume", "nosuchsession"], 1, "no such session nosuchsession"),
    (["quarantine", "show", "999999"], 1, "no quarantined line 999999"),
    (["vault", "status", "--home", "{EMPTY_STORE}"], 1, "no store yet"),
    (["vault", "verify", "--home", "{EMPTY_STORE}"], 1, "no store yet"),
    (["vault", "restore", "--home", "{STORE}"], 2, "give a SESSION or --all-missing"),
    (["vault", "restore", "nosuchsession", "--home", "{STORE}"], 1, "no such session nosuchsession"),
    (
        ["reparse", "--since", "yesterday", "--home", "{STORE}"],
        2,
        "cannot read the time 'yesterday' (--since)",
    ),
    (["reparse", "--home", "{EMPTY_STORE}"], 1, "no store yet"),
    (["quarantine", "list", "--limit", "0"], 2, "limit 0 is out of range (--limit) - use at least 1"),
    (["quarantine", "list", "--action", "bogus"], 2, "unknown action 'bogus'"),
    (["resume", "--format", "xml"], 2, "unknown format 'xml' (--format)"),
    (["resume", "c61729d4", "--budget", "10"], 2, "too small for a snapshot (--budget)"),
    (["purge"], 2, "purge needs exactly one of --session ID, --project DIR or --all"),
    (["purge", "--session", "c61729d4", "--project", "/tmp"], 2, "got --session, --project"),
    (["purge", "--all", "--reingest"], 2, "--reingest does not apply to --all"),
    (["purge", "--session", "c61729d4"], 2, "without --yes in a non-interactive run"),
    (["purge", "--project", "/", "--dry-run"], 2, "refusing to purge project /"),
    # numbers out of range, options that exclude each other
    (["retention", "--archive-after-days", "-1"], 2, "-1 is not in the range x>=0"),
    (["backup", "--keep", "0"], 2, "0 is not in the range x>=1"),
    (["serve", "--port", "0"], 2, "0 is not in the range 1<=x<=65535"),
    (["compress", "--keep-messages", "0"], 2, "0 is not in the range x>=1"),
    (["compress", "--restore", "{ROLLOUT}", "--dry-run"], 2, "--restore has no --dry-run"),
    (["compress", "--restore", "{ROLLOUT}"], 1, "no backup to restore"),
    (["search", "foo AND", "--raw"], 2, "FTS5 syntax error"),
    # the store itself: missing, a file, damaged, a broken config
    (["stats", "--home", "{EMPTY_STORE}"], 1, "no store yet"),
    (["stats", "--home", "{FILE}"], 1, "it is a file, not a directory"),
    (["ingest", "--home", "{FILE}"], 1, "it is a file, not a directory"),
    # a path of the wrong kind is the file system's state (1), the same for every command
    (["export", "html", "{FILE}"], 1, "DEST is a file"),
    (["export", "markdown", "{FILE}"], 1, "DEST is a file"),
    (["export", "parquet", "{FILE}"], 1, "is a file"),
    (["ingest", "--path", "/nonexistent"], 1, "no such file or directory: /nonexistent (--path)"),
    (["compress", "/nonexistent.jsonl"], 1, "no such file or directory: /nonexistent.jsonl (FILE)"),
    (["search", "x", "--home", "{DAMAGED}"], 1, "store.db is damaged"),
    (["reindex", "--home", "{DAMAGED}", "--no-prefect"], 1, "store.db is damaged"),
    (["reindex", "--home", "{EMPTY_STORE}"], 1, "no store to reindex"),
    (["restore", "/nonexistent.db"], 1, "/nonexistent.db"),
    (["sources", "--home", "{BAD_CONFIG}"], 1, "config.toml"),
    # --agent means the same everywhere: sources ignored it without --coverage (rc 0)
    (["sources", "--agent", "nosuch"], 2, "unknown agent 'nosuch'"),
    # nothing to check is not a sound store
    (["doctor", "--home", "{EMPTY_STORE}"], 1, "no store yet ("),
    (["doctor", "--json", "--home", "{EMPTY_STORE}"], 1, "- run `ctxkeep ingest` first"),
]


def _fill(args: list[str], w: dict) -> list[str]:
    out = [a.format(**w) for a in args]
    if "--home" not in out and out[0] not in ("help", "nosuch", "hooks", "mcp"):
        out += ["--home", w["STORE"]]
    return out


def _env(w: dict) -> dict:
    return {"HOME": w["EMPTY"], "CTXKEEP_HOME": w["STORE"], "COLUMNS": "80"}


@pytest.mark.parametrize("args,code,needle", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_error_contract(world, args, code, needle):
    r = runner.invoke(app, _fill(args, world), env=_env(world))
    lines = r.stderr.splitlines()
    assert (r.exit_code, len(lines)) == (code, 1), r.output
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]
    assert "Traceback" not in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    for mcp_word in ("sessionId", "projectDir", "confirm: true", "ctx_purge"):
        assert mcp_word not in lines[0]
    assert r.stdout == "", r.stdout


def test_the_table_covers_every_command():
    """>= 40 cases, and every command (and every subcommand group) is in the table."""
    from ctxkeep.cli.docs import iter_commands

    assert len(CASES) >= 40
    named = {" ".join(a[:2]) for a, _, _ in CASES} | {a[0] for a, _, _ in CASES}
    commands = {path for path, cmd, _ in iter_commands() if not hasattr(cmd, "list_commands")}
    # hook always exits 0 (an agent's hook must never fail it); statusline prints a line
    # whatever happens (Claude Code shows it); mcp/hooks uninstall share install's options
    exempt = {
        "hook claude-code",
        "hook codex",
        "hook gemini-cli",
        "statusline",
        "hooks uninstall",
        "mcp uninstall",
        "doctor",  # its report of a damaged store is on stdout, exit 1 (tests/maintenance)
    }
    missing = sorted(c for c in commands - exempt if c not in named and c.split()[0] not in named)
    assert missing == []


WHOLE_PROCESS = [0, 4, 11, 13, 14, 17, 19, 36, 60]


def test_whole_process_gives_the_same_lines(world):
    """The console entry point (here ``python -m ctxkeep``) prints exactly what the
    table saw through the test runner."""
    env = {**os.environ, **_env(world)}
    for i in WHOLE_PROCESS:
        args, code, needle = CASES[i]
        full = _fill(args, world)
        r = subprocess.run(
            [sys.executable, "-m", "ctxkeep", *full], capture_output=True, text=True, env=env, timeout=120
        )
        inproc = runner.invoke(app, full, env=_env(world))
        assert (r.returncode, r.stderr, r.stdout) == (inproc.exit_code, inproc.stderr, ""), args
        assert r.returncode == code and needle in r.stderr


@pytest.mark.parametrize(
    "args,path",
    [
        (["search", "foo", "--session"], "ctxkeep search"),
        (["show", "--session"], "ctxkeep show"),
        (["search", "foo", "-n"], "ctxkeep search"),
        (["search", "foo", "--nosuch"], "ctxkeep search"),
        (["--nosuch"], "ctxkeep"),
    ],
)
def test_an_option_without_its_value_points_at_that_commands_help(args, path, tmp_path):
    """``Option '--session' requires an argument`` is raised with no Click context: the
    hint names the command the user ran, not ``ctxkeep --help``."""
    r = runner.invoke(app, ["--home", str(tmp_path), *args])
    assert r.exit_code == 2
    assert r.stderr.strip().endswith(f"- see `{path} --help`"), r.stderr


def test_help_of_an_unknown_command_lists_only_the_visible_ones():
    from ctxkeep.cli import COMMANDS

    r = runner.invoke(app, ["help", "nosuch"])
    assert r.exit_code == 2
    listed = r.stderr.strip().split("use one of: ", 1)[1].split(", ")
    assert "hook" not in listed and "hooks" in listed and "search" in listed
    assert set(listed) == set(COMMANDS) - {"hook"}


@pytest.mark.parametrize("extra", [[], ["--json"], ["--repair"]])
def test_doctor_on_a_home_that_does_not_exist_says_there_is_no_store(tmp_path, extra):
    """``doctor --home /tmp/nosuch`` printed "skipped sqlite-header … no store yet" and
    "the store is sound" with exit 0: nothing was checked. Now one error line naming the
    missing store.db and what to run, exit 1, nothing on stdout, the home not made."""
    home = tmp_path / "nosuch"
    r = runner.invoke(app, ["doctor", "--home", str(home), *extra], env={"COLUMNS": "80"})
    assert r.exit_code == 1, r.output
    assert r.stdout == ""
    assert r.stderr.splitlines() == [
        f"error: no store yet ({home / 'store.db'}) - run `ctxkeep ingest` first"
    ]
    assert not home.exists()


@pytest.mark.parametrize("group", ["report", "vault", "export", "hooks"])
def test_a_group_without_its_command_prints_its_help_laid_out(group, tmp_path):
    """``ctxkeep report`` alone: the group's help as ``--help`` lays it out (one command
    a line), on stderr, exit 2; not the help flattened into one ``error:`` line
    (newuser24 F1)."""
    r = runner.invoke(app, ["--home", str(tmp_path), group])
    helped = runner.invoke(app, [group, "--help"])
    assert r.exit_code == 2 and r.stdout == ""
    assert not r.stderr.startswith("error:")
    assert r.stderr.rstrip() == helped.stdout.rstrip()
    assert f"Usage: ctxkeep {group} [OPTIONS] COMMAND [ARGS]...\n" in r.stderr
    assert "\nCommands:\n" in r.stderr
