"""``ctxkeep report`` and ``ctxkeep statusline`` on the command line: tables, JSON, CSV,
and bad input (unknown zone, --since after --until, no store, a held or damaged
DuckDB file): one line, exit 1 or 2, never a traceback."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
import textwrap
from datetime import datetime

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def run(*args):
    return runner.invoke(app, list(args))


def one_error_line(r, code: int, *needles: str) -> None:
    assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for n in needles:
        assert n in lines[0]


def test_daily_table_has_separators_totals_and_dollars(home):
    r = run("report", "daily", "--home", home, "-z", "UTC", "--agent", "claude-code")
    assert r.exit_code == 0, r.output
    # 2025-06-08: the d3ad4cdc session (CC 1.0.17), 3,754,072 cache-read tokens, $2.03
    line = next(ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("2025-06-08"))
    assert "3,754,072" in line and "$2.03" in line
    total = next(ln for ln in r.stdout.splitlines() if ln.lstrip().startswith("Total"))
    assert "$" in total and "," in total


def test_json_rows_and_totals(home):
    r = run(
        "report",
        "daily",
        "--home",
        home,
        "-z",
        "UTC",
        "--json",
        "--since",
        "2025-12-03",
        "--until",
        "20251203",
    )
    d = json.loads(r.stdout)
    assert d["report"] == "daily" and d["since"] == d["until"] == "2025-12-03"
    assert [(x["period"], x["agent"]) for x in d["rows"]] == [("2025-12-03", "gemini-cli")]
    assert d["rows"][0]["models"] == ["gemini-2.5-flash", "gemini-3-pro-preview"]
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")
    assert set(keys) | {"cost_usd"} <= set(d["totals"])
    # Gemini CLI's thoughts are in the total (ccusage's totalTokens that day: 182,422)
    thoughts = d["rows"][0]["reasoning_tokens"]
    assert (
        thoughts == 1310
        and d["totals"]["total_tokens"] == sum(d["totals"][k] or 0 for k in keys[:4]) + thoughts
    )
    assert d["totals"]["total_tokens"] == 182422


def test_csv(home):
    r = run("report", "models", "--home", home, "--csv", "--agent", "gemini-cli")
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {x["model"] for x in rows} == {
        "gemini-2.5-flash",
        "gemini-2.5-pro",
        "gemini-3-flash-preview",
        "gemini-3-pro-preview",
    }


@pytest.mark.parametrize("name", ["weekly", "monthly", "session", "blocks", "models", "projects", "tools"])
def test_every_report_renders(home, name):
    r = run("report", name, "--home", home, "-z", "America/New_York")
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output


def test_tools_report(home):
    d = json.loads(run("report", "tools", "--home", home, "--json", "--agent", "claude-code").stdout)
    bash = next(x for x in d["rows"] if x["tool"] == "Bash")
    assert bash["calls"] > 0 and bash["errors"] <= bash["results"]
    assert bash["error_rate"] == pytest.approx(bash["errors"] / bash["results"])


def test_unknown_timezone(home):
    one_error_line(
        run("report", "daily", "--home", home, "-z", "Mars/Olympus"), 2, "Mars/Olympus", "--timezone"
    )


def test_since_after_until(home):
    r = run("report", "daily", "--home", home, "--since", "2025-12-02", "--until", "2025-12-01")
    one_error_line(r, 2, "after", "--since/--until")


def test_bad_date_agent_mode_limit(home):
    one_error_line(run("report", "daily", "--home", home, "--since", "yesterday"), 2, "cannot read the time")
    one_error_line(run("report", "daily", "--home", home, "--agent", "nope"), 2, "unknown agent 'nope'")
    one_error_line(run("report", "daily", "--home", home, "--mode", "cheap"), 2, "--mode")
    one_error_line(run("report", "blocks", "--home", home, "--token-limit", "lots"), 2, "--token-limit")


def test_empty_store(tmp_path):
    one_error_line(run("report", "daily", "--home", str(tmp_path)), 1, "no analytics store", "ctxkeep ingest")


def test_damaged_store(store):
    (store / "analytics.duckdb").write_bytes(b"\0garbage" * 4096)
    one_error_line(run("report", "daily", "--home", str(store)), 1, "unreadable", "ctxkeep reindex")


@pytest.mark.parametrize("ingest", [True, False])
def test_held_store_reports_last_synced_state(store, ingest):
    """A writer holds analytics.duckdb: the report reads a copy of its last checkpoint
    and says so, naming the holder: a running ingest when the store lock is held too,
    else the process DuckDB names (newuser20 F5: a user's own read-write connection was
    blamed on "a running ingest" that was not there)."""
    from ctxkeep.sinks.lock import StoreLock

    want = json.loads(run("report", "monthly", "--home", str(store), "--json", "-z", "UTC").stdout)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import duckdb, sys, time
                con = duckdb.connect({str(store / "analytics.duckdb")!r})
                print("held", flush=True)
                sys.stdin.read()
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lock = StoreLock(store).acquire(timeout=0) if ingest else None
    try:
        assert holder.stdout.readline().strip() == "held"
        r = run("report", "monthly", "--home", str(store), "--json", "-z", "UTC")
    finally:
        if lock is not None:
            lock.release()
        holder.stdin.close()
        holder.wait(timeout=30)
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert got["rows"] == want["rows"]
    if ingest:
        assert any("held by a running ingest" in n for n in got["notes"])
        assert "held by a running ingest" in r.stderr
    else:
        flat = " ".join(r.stderr.split())
        assert "running ingest" not in flat, flat
        assert f"held by another process (PID {holder.pid})" in flat, flat
        assert "read_only=True" in flat, flat


def test_statusline_from_stdin_and_cache(store, monkeypatch):
    payload = json.dumps(
        {
            "session_id": "d3ad4cdc-5657-435d-98fa-0035d53e383d",
            "model": {"id": "claude-sonnet-4-20250514", "display_name": "Sonnet 4"},
        }
    )
    r = runner.invoke(app, ["statusline", "--home", str(store), "-z", "UTC"], input=payload)
    assert r.exit_code == 0, r.output
    line = r.stdout.strip()
    assert "\n" not in line and line.startswith("Sonnet 4 | $")
    # the session's last response (CC 1.0.17 file): its input side, independent of ctxkeep
    last = _last_claude_input("d3ad4cdc-5657-435d-98fa-0035d53e383d")
    assert f"ctx {last:,} ({last / 200_000:.0%})" in line
    assert (store / "statusline.json").exists()
    assert (store / "statusline.json").stat().st_mode & 0o777 == 0o600  # user-only, as the store
    # a cached call imports no DuckDB (the reason the cache exists)
    code = (
        "import sys, io; from ctxkeep.query import statusline as s; "
        f"print(s.line(__import__('pathlib').Path({str(store)!r}), io.StringIO({payload!r}), 'UTC')); "
        "print('duckdb' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == [line, "False"]


def test_statusline_without_store_is_one_line(tmp_path):
    r = runner.invoke(app, ["statusline", "--home", str(tmp_path)], input="not json")
    assert r.exit_code == 0
    assert r.stdout.strip().startswith("ctxkeep: no analytics store")


def test_statusline_with_an_unknown_time_zone_names_it_and_the_option(tmp_path):
    """``-z Mars/Base`` printed ``ctxkeep: 'No time zone found with key Mars/Base'``
    (zoneinfo's KeyError text). Claude Code runs the statusline and shows its stdout,
    so it stays one line, exit 0, but says what is wrong and where, as other commands'
    ``error:`` lines do; nothing is written to the home."""
    r = runner.invoke(app, ["statusline", "--home", str(tmp_path), "-z", "Mars/Base"], input="{}")
    assert r.exit_code == 0
    assert r.stdout.splitlines() == [
        "ctxkeep: unknown time zone 'Mars/Base' (--timezone) - give an IANA name such as Europe/Berlin or UTC"
    ]
    assert list(tmp_path.iterdir()) == []


def _last_claude_input(session_id: str) -> int:
    from conftest import CORPUS_HOME

    (path,) = list((CORPUS_HOME / ".claude" / "projects").rglob(f"{session_id}.jsonl"))
    last = None
    for ln in path.read_text().splitlines():
        try:
            d = json.loads(ln)
        except ValueError:
            continue
        u = (d.get("message") or {}).get("usage") if isinstance(d.get("message"), dict) else None
        if u and d.get("timestamp") and (last is None or d["timestamp"] >= last[0]):
            last = (
                d["timestamp"],
                u.get("input_tokens", 0)
                + u.get("cache_read_input_tokens", 0)
                + u.get("cache_creation_input_tokens", 0),
            )
    return last[1]


def test_project_dot_and_home_mean_this_dir_or_below(tmp_path, monkeypatch):
    """``--project .`` from a project's folder counts that project and its subfolders,
    not a sibling whose name starts alike; ``--project ~`` counts every project under
    the home dir (it found nothing as a substring)."""
    import datetime as dt

    from ctxkeep.sinks import duckdb as duckdb_store

    user = tmp_path / "u"
    noora = user / "code" / "noora"
    (noora / "api").mkdir(parents=True)
    (user / "code" / "noora-old").mkdir()
    store = tmp_path / "store"
    store.mkdir()
    con = duckdb_store.connect(store)
    dirs = [noora, noora / "api", user / "code" / "noora-old", "/elsewhere/crush"]
    for i, d in enumerate(dirs):
        con.execute(
            "INSERT INTO usage(usage_key, agent, session_id, project_dir, ts, model, input_tokens, "
            "output_tokens, cache_read_tokens, cache_creation_tokens, reasoning_tokens, model_source, "
            "calculated_cost_usd, cost_usd) VALUES (?, 'claude-code', ?, ?, ?, 'm', ?, 0, 0, 0, 0, 'logged', 1, 1)",
            [f"k{i}", f"s{i}", str(d), dt.datetime(2025, 5, 1, 12, i, tzinfo=dt.UTC), 10**i],
        )
    con.close()
    monkeypatch.chdir(noora)
    monkeypatch.setenv("HOME", str(user))

    def total(project: str) -> int:
        r = run("report", "daily", "--home", str(store), "-z", "UTC", "--json", "--project", project)
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)["totals"]["input_tokens"]

    assert total(".") == 1 + 10
    assert total("api") == 10
    assert total("~") == 1 + 10 + 100
    assert total("/") == 1111


def test_blocks_gap_rows_name_their_provider(home):
    """Blocks are per provider: a gap row says whose window was idle (before: an empty
    agents cell, so two providers' gaps at one time could not be told apart)."""
    d = json.loads(run("report", "blocks", "--home", home, "--json").stdout)
    gaps = [b for b in d["rows"] if b["is_gap"]]
    assert gaps and all(g["provider"] for g in gaps)
    r = CliRunner().invoke(app, ["report", "blocks", "--home", home], env={"COLUMNS": "250"})
    lines = [" ".join(x.split()) for x in r.stdout.splitlines() if " gap " in x]
    assert len(lines) == len(gaps)
    for line, g in zip(lines, gaps, strict=True):
        assert re.search(rf" gap [0-9,.]+[hd] {g['provider']}", line), line


def test_blocks_keep_a_span_and_its_unit_together_at_80_columns(home):
    """newuser23 F10: at 80 columns "gap 1,416.0 h" wrapped, leaving a lone "h": a
    span is one word now, in days from 48 h (1,416.0 h: 59.0d)."""
    d = json.loads(run("report", "blocks", "--home", home, "--json").stdout)
    r = CliRunner().invoke(app, ["report", "blocks", "--home", home], env={"COLUMNS": "80"})
    assert r.exit_code == 0, r.output
    cells = [c for x in r.stdout.splitlines() for c in x.split()]
    assert "h" not in cells and "d" not in cells
    spans = [c for c in cells if re.fullmatch(r"[0-9,]+\.[0-9][hd]", c)]
    want = []
    for b in d["rows"]:
        if b["is_gap"] or not b["is_active"]:
            a = datetime.fromisoformat(b["start"].replace("Z", "+00:00"))
            z = datetime.fromisoformat((b["end"] if b["is_gap"] else b["actual_end"]).replace("Z", "+00:00"))
            h = (z - a).total_seconds() / 3600
            want.append(f"{h / 24:,.1f}d" if h >= 48 else f"{h:,.1f}h")
    assert spans == want and any(x.endswith("d") for x in want)


def test_a_logged_cost_is_said_to_be_the_agents_own(home):
    """In the default mode (auto) an agent's logged cost wins over list prices: Crush's
    own figure (~20x list price in the corpus) was shown as if ctxkeep had priced it.
    A note names each agent whose cost is its own logged figure; --mode calculate, the
    list-price cost, has no such note."""
    d = json.loads(run("report", "daily", "--home", home, "--json", "--agent", "opencode").stdout)
    assert d["rows"] and any(
        n.startswith("opencode: the cost of ") and "the agent's own logged figure" in n for n in d["notes"]
    ), d["notes"]
    calc = json.loads(
        run("report", "daily", "--home", home, "--json", "--agent", "opencode", "--mode", "calculate").stdout
    )
    assert not any("logged figure" in n for n in calc["notes"])
    sess = json.loads(run("report", "session", "--home", home, "--json", "--agent", "opencode").stdout)
    assert any("opencode: the cost of " in n for n in sess["notes"])


def test_crush_and_go_opencode_tokens_are_not_recorded(home):
    """Crush / Go opencode log a session's cost but only its last response's tokens
    (newuser15 F14): the reports book none of those tokens, say so in every mode, and
    --mode calculate keeps the logged cost (it priced one response's context before:
    crush $3.20 -> $0.16); `sessions --json` gives their tokens as null."""
    for mode in ("auto", "calculate", "display"):
        d = json.loads(
            run(
                "report", "daily", "--home", home, "--json", "--agent", "crush,opencode-go", "--mode", mode
            ).stdout
        )
        tot = d["totals"]
        assert (tot["total_tokens"], round(tot["cost_usd"], 6)) == (
            None,  # not recorded (it was 0)
            round(3.2015050 + 0.02034625 + 0.69006315, 6),
        )
        for agent, n in (("crush", 2), ("opencode-go", 1)):
            assert any(
                x.startswith(f"{agent}: tokens not recorded by the agent ({n} session") for x in d["notes"]
            ), d["notes"]
        assert not any("--mode calculate prices them" in x for x in d["notes"])
    s = json.loads(run("sessions", "--home", home, "--json", "--agent", "crush,opencode-go").stdout)
    got = {r["session_id"][:4]: (r["tokens"], round(r["cost_usd"], 4)) for r in s["sessions"]}
    assert got == {"a20c": (None, 3.2015), "f306": (None, 0.0203), "2530": (None, 0.6901)}
    r = runner.invoke(app, ["sessions", "--home", home, "--agent", "crush"], env={"COLUMNS": "200"})
    assert "crush: tokens not recorded by the agent (2 sessions:" in " ".join(r.stderr.split()), r.stderr
    assert "  -  $3.20  " in r.stdout  # the tokens column says "-", the cost stands


def test_report_rows_of_unrecorded_tokens_say_so_not_0(home):
    """A report row whose responses all lack recorded tokens (Crush, Go opencode: a
    logged cost only) gives its tokens as null in --json and "-" in text, as `sessions`
    does; before, 0 (newuser15). A row mixing recorded and unrecorded tokens sums the
    recorded ones, and the totals too."""
    sess = json.loads(run("report", "session", "--home", home, "--json", "--agent", "crush,opencode").stdout)
    by = {r["period"][:4]: r for r in sess["rows"]}
    tok = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")
    assert {k: by["a20c"][k] for k in tok} == dict.fromkeys(tok, None)
    assert round(by["a20c"]["cost_usd"], 4) == 3.2015
    assert by["test"]["total_tokens"] == 160  # opencode (sst) records its tokens (10 reasoning)
    assert sess["totals"]["total_tokens"] == 160  # the recorded ones only
    r = runner.invoke(app, ["report", "session", "--home", home, "--agent", "crush"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("a20c"))
    assert row.split()[-6:] == ["-", "-", "-", "-", "-", "$3.20"], row
    assert " 0 " not in row
    daily = json.loads(run("report", "daily", "--home", home, "--json", "--agent", "crush").stdout)
    assert daily["rows"] and all(x["total_tokens"] is None for x in daily["rows"])


def test_blocks_of_unrecorded_tokens_say_so_not_0(home):
    """`report blocks` gave 0 tokens for a block made only of responses whose tokens the
    agent did not record (the Go opencode's 2025-05-28 block, Crush's of 2025-08-09 and -22:
    a logged cost only), while `report daily` gave null / "-" (newuser19 F1). Every
    report does as docs/analytics.md says: null in --json, "-" in the table."""
    d = json.loads(
        run("report", "blocks", "--home", home, "--json", "-z", "UTC", "--agent", "crush,opencode-go").stdout
    )
    tok = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "total_tokens")
    blocks = [b for b in d["rows"] if not b["is_gap"]]
    assert sorted((b["start"][:10], b["agents"]) for b in blocks) == [
        ("2025-05-28", ["opencode-go"]),
        ("2025-08-09", ["crush"]),
        ("2025-08-22", ["crush"]),
    ]
    for b in blocks:
        assert {k: b[k] for k in tok} == dict.fromkeys(tok, None), b
    assert round(sum(b["cost_usd"] for b in blocks), 6) == round(3.2015050 + 0.02034625 + 0.69006315, 6)
    assert d["totals"]["total_tokens"] is None
    r = runner.invoke(
        app,
        ["report", "blocks", "--home", home, "-z", "UTC", "--agent", "opencode-go"],
        env={"COLUMNS": "200"},
    )
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("2025-05-28"))
    assert row.split()[-6:] == ["-", "-", "-", "-", "-", "$0.69"], row
    # a block whose responses recorded tokens still sums them (Claude Code's d3ad, 2025-06-08)
    cc = json.loads(
        run("report", "blocks", "--home", home, "--json", "-z", "UTC", "--agent", "claude-code").stdout
    )
    assert sum(b["total_tokens"] or 0 for b in cc["rows"] if b["start"].startswith("2025-06-08")) > 3_754_072


def test_unrecorded_tokens_are_null_in_duckdb_s_macro_and_view_too(home):
    """newuser19 F1's addendum: `daily_usage(tz)` and the `sessions` view gave such rows'
    total_tokens as 0 (the four parts null), and `report daily --json` their
    reasoning_tokens as 0. A session without any response keeps its 0."""
    from pathlib import Path

    import duckdb

    json.loads(run("report", "daily", "--home", home, "--json").stdout)  # DuckDB current
    con = duckdb.connect(str(Path(home) / "analytics.duckdb"), read_only=True)
    try:
        daily = con.execute(
            "SELECT agent, input_tokens, total_tokens, cost_usd FROM daily_usage('UTC') "
            "WHERE agent IN ('crush', 'opencode-go') ORDER BY day"
        ).fetchall()
        sess = con.execute(
            "SELECT agent, input_tokens, total_tokens FROM sessions "
            "WHERE agent IN ('crush', 'opencode-go') AND responses > 0"
        ).fetchall()
        none = con.execute(
            "SELECT DISTINCT total_tokens FROM sessions WHERE coalesce(responses, 0) = 0"
        ).fetchall()
    finally:
        con.close()
    assert [(a, i, t) for a, i, t, _ in daily] == [
        ("opencode-go", None, None),
        ("crush", None, None),
        ("crush", None, None),
    ]
    assert len(sess) == 3 and all(t is None for _, _, t in sess), sess
    assert none == [(0,)]
    d = json.loads(run("report", "daily", "--home", home, "--json", "--agent", "crush,opencode-go").stdout)
    assert [r["reasoning_tokens"] for r in d["rows"]] == [None, None, None]


def test_session_project_is_the_parents_not_a_sub_agents_worktree(home):
    """`report session` rolls sub-agents into their root session; its project was the
    most frequent over every rolled row, so a sub-agent in a git worktree with more
    responses than its parent named the worktree. It is the root session's own."""
    d = json.loads(run("report", "session", "--home", home, "--json", "--agent", "claude-code").stdout)
    by = {r["period"]: r for r in d["rows"]}
    row = by["ef958aa1-0e93-49f0-bb71-150f63befcd1"]
    assert row["subagent_sessions"] and row["project"] == "-experiments/worktrees"
    assert by["fe5e1c67-53e7-4862-81ae-d0e013e3270b"]["project"] == "/path/to/Demo"


def test_session_table_labels_the_time_under_the_id_as_the_last_response(home):
    """The time under a session's id is its last API response (``last_activity``), not
    its start nor its last entry: unlabelled, codex c617 showed 17:21 while `sessions`
    said started 01:02 ended 17:31. The header names it."""
    d = json.loads(run("report", "session", "--home", home, "--json", "-z", "UTC", "--agent", "codex").stdout)
    top = max(d["rows"], key=lambda r: r["total_tokens"])
    r = run("report", "session", "--home", home, "-z", "UTC", "--agent", "codex")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:1] == ["session"])
    assert lines[head + 1].split()[:2] == ["last", "response"]
    row = next(
        i
        for i, ln in enumerate(lines)
        if i > head + 2 and ln.split() and top["period"].startswith(ln.split()[0])
    )
    assert lines[row + 1].split() == [top["last_activity"][:10], top["last_activity"][11:16]]


def test_blocks_head_their_span_column_length_not_status(home):
    """newuser24 F12: the column holding "0.8h", "gap 21.6d" or "active" was headed
    "status"; it is each block's length (or "active")."""
    r = CliRunner().invoke(app, ["report", "blocks", "--home", home], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    head = next(x for x in r.stdout.splitlines() if x.split()[:1] == ["block"])
    assert head.split()[:4] == ["block", "start", "length", "agents"]
    assert "status" not in head
