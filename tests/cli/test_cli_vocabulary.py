"""One option vocabulary (issue 15): ``--agent`` repeatable and comma-separated,
``--since/--until`` inclusive everywhere through one parser, ``--home`` before or after
the command, and the small wrongs the issue lists. Expected values come from the store
(SQL) or the corpus files, read independently of the command under test."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME, ROOT, q
from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def sql(home: str, query: str, *args) -> list[tuple]:
    return q(home, query, *args)


def text_of(home: str, content_hash: str) -> str:
    """A content's text, read from its chunks in order."""
    rows = sql(
        home,
        "SELECT ch.text FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ? ORDER BY ch.seq",
        content_hash,
    )
    return "".join(r[0] for r in rows)


def ok_json(*args):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_repeated_agent_means_both_in_search(home):
    """`--agent codex --agent crush` searched only crush; now both, as `codex,crush`."""
    repeated = ok_json(
        "search", "error", "--agent", "codex", "--agent", "crush", "-n", "200", "--home", home, "--json"
    )
    comma = ok_json("search", "error", "--agent", "codex,crush", "-n", "200", "--home", home, "--json")
    assert {h["agent"] for h in repeated["hits"]} == {"codex", "crush"}
    assert [h["entry_id"] for h in repeated["hits"]] == [h["entry_id"] for h in comma["hits"]]


def test_comma_separated_agents_in_ingest_and_sessions(home, tmp_path):
    r = runner.invoke(app, ["ingest", "--agent", "codex,crush", "--home", str(tmp_path / "h"), "--json", "--no-prefect"],
                      env={"HOME": str(CORPUS_HOME)})  # fmt: skip
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)["per_agent"]) == {"codex", "crush"}
    rows = ok_json("sessions", "-a", "codex,crush", "--home", home, "--json")["sessions"]
    want = {
        s for (s,) in sql(home, "SELECT DISTINCT session_id FROM entries WHERE agent IN ('codex','crush')")
    }
    assert {r["session_id"] for r in rows} == want


def test_since_and_until_of_one_day_are_that_day(home):
    """`--since D --until D` was an error in search (until excluded its day)."""
    (eid, ts, cid) = sql(
        home,
        "SELECT entry_id, ts, content_hash FROM entries WHERE ts LIKE '2025-11-01T17:%' AND kind='message' "
        "ORDER BY ts DESC LIMIT 1",
    )[0]
    text = text_of(home, cid)
    words = " ".join(w for w in re.findall(r"[A-Za-z]{5,}", text)[:3])
    day = ok_json(
        "search",
        words,
        "--since",
        "2025-11-01",
        "--until",
        "2025-11-01",
        "-n",
        "200",
        "--home",
        home,
        "--json",
    )
    assert eid in [h["entry_id"] for h in day["hits"]] and ts.startswith("2025-11-01T17")
    assert all(h["ts"].startswith("2025-11-01") for h in day["hits"])
    before = ok_json("search", words, "--until", "2025-10-31", "-n", "200", "--home", home, "--json")
    assert eid not in [h["entry_id"] for h in before["hits"]]


def test_sessions_of_one_day(home):
    rows = ok_json("sessions", "--since", "2025-11-01", "--until", "2025-11-01", "--home", home, "--json")
    want = {
        s
        for (s,) in sql(
            home,
            "SELECT session_id FROM entries GROUP BY session_id "
            "HAVING max(ts) >= '2025-11-01' AND min(ts) < '2025-11-02'",
        )
    }
    assert {r["session_id"] for r in rows["sessions"]} == want and want


def test_home_before_the_command(home):
    """`ctxkeep --home DIR stats` was "No such option"."""
    before = ok_json("--home", home, "stats", "--json")
    after = ok_json("stats", "--home", home, "--json")
    before.pop("files"), after.pop("files")  # sizes may move between two reads
    assert before == after
    assert before["entries"] == sql(home, "SELECT count(*) FROM entries")[0][0]
    # the whole process too (the console script's own argv)
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "--home", home, "sessions", "--json", "--empty"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert (
        len(json.loads(r.stdout)["sessions"])
        == sql(home, "SELECT count(DISTINCT session_id) FROM entries")[0][0]
    )


def test_show_max_bytes_prints_text_not_only_the_marker(home):
    candidates = sql(
        home,
        "SELECT e.entry_id, e.content_hash, c.bytes FROM entries e JOIN contents c USING (content_hash) "
        "WHERE c.bytes > 2000 ORDER BY e.entry_id LIMIT 50",
    )
    eid, text, n = next((e, text_of(home, h), n) for e, h, n in candidates if text_of(home, h).isascii())
    (d,) = ok_json("show", eid, "--max-bytes", "100", "--home", home, "--json")["entries"]
    assert d["truncated"] and d["elided_bytes"] == n - 100
    head, tail = d["text"].split("\n[… ctxkeep:")[0], d["text"].rsplit("…]\n", 1)[1]
    assert text.startswith(head) and text.endswith(tail) and len(head) + len(tail) == 100 and head


def test_show_of_a_note_and_of_nothing(store):
    from ctxkeep.pipeline.notes import index_note
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store)
    try:
        index_note(conn, "deploy-checklist", text="Run the migrations before the deploy.")
    finally:
        conn.close()
    (eid,) = sql(str(store), "SELECT entry_id FROM entries WHERE agent='note'")[0]
    r = runner.invoke(app, ["show", eid, "--home", str(store)])
    assert r.exit_code == 0, r.output
    assert "from None" not in r.stdout and "a note indexed as 'deploy-checklist'" in r.stdout
    r = runner.invoke(app, ["show", "nosuchid", "--home", str(store)])
    assert (r.exit_code, r.stderr.splitlines()) == (
        1,
        ["error: no entry nosuchid (ENTRY_ID) - search hits give entry ids"],
    )


def test_stats_sizes_use_one_format(home):
    r = runner.invoke(app, ["stats", "--home", home], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "0.0 MB" not in r.stdout
    (opencode_bytes,) = sql(
        home,
        "SELECT sum(c.bytes) FROM entries e JOIN contents c USING (content_hash) WHERE e.agent='opencode'",
    )[0]
    assert opencode_bytes < 1000  # 3 entries: shown in bytes, as `sources` does
    line = next(ln for ln in r.stdout.splitlines() if re.match(r"\s*opencode\s", ln))
    assert re.search(r"\b\d+ B\b", line), line


def test_ingest_on_an_empty_home_points_to_sources(tmp_path):
    (tmp_path / "home").mkdir()
    r = runner.invoke(app, ["ingest", "--home", str(tmp_path / "store"), "--no-progress"],
                      env={"HOME": str(tmp_path / "home")})  # fmt: skip
    assert r.exit_code == 0, r.output
    assert (
        "from 0 of 0 files" in r.stdout
        and "`ctxkeep sources` shows where each agent was looked for" in r.stdout
    )


def test_compress_check_with_dry_run_is_a_check(home, tmp_path):
    r = runner.invoke(app, ["compress", "--check", "--dry-run", "--home", home, "--json"],
                      env={"HOME": str(CORPUS_HOME)})  # fmt: skip
    assert r.exit_code == 0 and r.stderr == "" and json.loads(r.stdout)["thresholds"]


def test_serve_refuses_a_remote_host_and_says_what_allow_remote_exposes():
    from ctxkeep.service.maintenance import is_loopback

    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost")] == [True] * 5
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.com")] == [False] * 4
    r = runner.invoke(app, ["serve", "--host", "192.168.1.5"])
    assert r.exit_code == 2 and "--allow-remote" in r.stderr and r.stdout == ""
    r = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "300"})
    assert "exposes the Prefect API to the network, unauthenticated" in " ".join(r.stdout.split())


def test_help_command_and_groups():
    top = runner.invoke(app, ["help"], env={"COLUMNS": "120"})
    assert top.exit_code == 0
    panels = re.findall(r"╭─ ([A-Za-z ]+?) ─", top.stdout)
    assert panels[:6] == [
        "Options",
        "Main job",
        "Search and read",
        "Usage and cost",
        "Maintenance",
        "Store health",
    ]
    assert {"Agents", "Help"} <= set(panels) and "Commands" not in panels
    sub = runner.invoke(app, ["help", "report", "daily"], env={"COLUMNS": "120"})
    direct = runner.invoke(app, ["report", "daily", "--help"], env={"COLUMNS": "120"})
    assert (
        sub.exit_code == 0
        and sub.stdout.rstrip() == direct.stdout.rstrip()
        and "Tokens and cost per local day" in sub.stdout
    )
    # ends with a newline, as --help does (newuser21 N1: the next prompt was glued on)
    assert sub.stdout.endswith("\n") and direct.stdout.endswith("\n")
    usage = runner.invoke(app, ["search", "--help"]).stdout
    assert "ctxkeep search [OPTIONS] QUERY" in usage and "{query}" not in usage


def test_new_user_findings_of_the_second_try(tmp_path):
    """What a new user still hit after the first fixes: `help search` showed {QUERY};
    a config warning about `[bogus]` lost its name (read as Rich markup); after an ingest
    that found nothing, `report daily` said to run ingest; `search -a` was no option."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["help", "search"])
    assert "ctxkeep search [OPTIONS] QUERY" in " ".join(r.output.split()) and "{QUERY}" not in r.output
    home = tmp_path / "store"
    home.mkdir()
    (home / "config.toml").write_text("[bogus]\nx = 1\n")
    env = {"HOME": str(tmp_path / "nobody")}
    r = CliRunner().invoke(app, ["ingest", "--home", str(home), "--no-progress"], env=env)
    assert r.exit_code == 0 and "unknown table [bogus]" in r.output
    assert r.output.count("no session files found") == 1
    r = CliRunner().invoke(app, ["report", "daily", "--home", str(home)], env=env)
    # an empty store is an empty report, rc 0, one line (as `sessions`: docs/cli.md "Exit codes")
    assert r.exit_code == 0 and r.stderr == ""
    assert r.stdout.startswith("no usage stored yet (") and "ctxkeep sources" in r.stdout
    assert len(r.stdout.splitlines()) == 1
    r = CliRunner().invoke(app, ["sessions", "--home", str(home)], env=env)
    assert (r.exit_code, r.stdout) == (0, "no sessions\n")
    r = CliRunner().invoke(app, ["report", "blocks", "--home", str(home), "--json"], env=env)
    d = json.loads(r.stdout)
    assert r.exit_code == 0 and d["rows"] == [] and d["notes"][0].startswith("no usage stored yet")
    r = CliRunner().invoke(app, ["search", "x", "-a", "codex,crush", "--home", str(home)], env=env)
    assert r.exit_code == 0, r.output


def test_commands_reading_the_settings_name_an_unknown_key(tmp_path):
    """`max_sizekb` was ignored silently by compress and retention (sources and ingest
    warned): every command that reads the settings names it with the closest key."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    (tmp_path / "config.toml").write_text("[compress]\nmax_sizekb = 800\n")
    for args in (["compress", "--check"], ["retention", "--dry-run"]):
        r = CliRunner().invoke(app, [*args, "--home", str(tmp_path)], env={"HOME": str(tmp_path / "nobody")})
        assert r.exit_code == 0, r.output
        assert "unknown key compress.max_sizekb - did you mean max_size_kb?" in r.output


def _timezone_commands() -> list[tuple[str, ...]]:
    """Every command path that takes ``--timezone`` (the whole CLI, walked)."""
    import typer.main

    found: list[tuple[str, ...]] = []

    def walk(cmd, path: tuple[str, ...]) -> None:
        if any("--timezone" in getattr(p, "opts", ()) for p in cmd.params):
            found.append(path)
        for name in getattr(cmd, "commands", {}):
            walk(cmd.commands[name], (*path, name))

    walk(typer.main.get_command(app), ())
    return found


def test_timezone_is_one_option_everywhere(home, tmp_path):
    """``--timezone`` was declared in four places of cli/ (reports, ``report html``, the
    two exports), each with its own help: now ``options.timezone_option``. Every command
    that takes it takes ``-z`` too, and rejects an unknown zone at parse time (exit 2,
    one line naming the zone and the option, nothing written), but the statusline,
    which says it in its one output line (exit 0)."""
    cmds = _timezone_commands()
    assert {c[0] for c in cmds} >= {"report", "export", "statusline"}
    assert ("report", "html") in cmds and ("export", "markdown") in cmds and ("export", "html") in cmds
    for path in cmds:
        dest = tmp_path / "-".join(path)
        args = [*path, *(["DEST-ARG"] if path[-1] in ("html", "markdown") else []), "-z", "Mars/Olympus"]
        args = [str(dest) if a == "DEST-ARG" else a for a in args]
        r = runner.invoke(app, [*args, "--home", str(tmp_path / "home")], input="{}")
        if path == ("statusline",):
            assert r.exit_code == 0 and "unknown time zone 'Mars/Olympus' (--timezone)" in r.stdout
            continue
        assert r.exit_code == 2, (path, r.output)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and "Mars/Olympus" in lines[0] and "--timezone" in lines[0], (path, lines)
        assert not dest.exists() and not (tmp_path / "home").exists(), path
    # a known zone passes the check and reaches the question
    assert (
        ok_json("report", "daily", "-z", "Asia/Tokyo", "--home", home, "--json")["timezone"] == "Asia/Tokyo"
    )


def test_stats_names_its_token_figure_text_tokens_estimated(home):
    """`stats` showed codex's 299,794 "tokens" (estimated from the stored text) while
    `sessions` and the reports show the API tokens the agents logged (63,117,293 for one
    codex session): its figure is headed "text tokens (est.)", the usage line says API
    tokens, and the JSON keys stay."""
    data = json.loads(runner.invoke(app, ["stats", "--home", home, "--json"]).stdout)
    assert set(data["agents"]["codex"]) == {"entries", "sessions", "text_bytes", "token_estimate", "kinds"}
    assert set(data["contents"]) == {"distinct", "bytes", "token_estimate"}
    r = runner.invoke(app, ["stats", "--home", home], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["agent"])
    # the last column's header, read down its three lines: text / tokens / (est.)
    assert [lines[i].split()[-1] for i in range(head - 2, head + 1)] == ["text", "tokens", "(est.)"]
    codex = next(ln.split() for ln in lines if ln.split()[:1] == ["codex"])
    assert codex[-1] == f"{data['agents']['codex']['token_estimate']:,}"
    cs = data["contents"]
    assert f"{cs['token_estimate']:,} text tokens (est.)" in r.stdout
    u = data["usage"]
    # the thoughts last (session 17): the API tokens named after them
    assert (
        f"cache write {u['cache_creation_tokens']:,}, thoughts {u['reasoning_tokens']:,} API tokens"
        in " ".join(r.stdout.split())
    )
