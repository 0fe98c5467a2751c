"""The CLI's tables in an 80-column terminal (new-user trial, issue 22: `report session`
90 columns, `blocks` 109, `projects` 129, `tools` 94, `sessions` 154, `sources --coverage`
135, `secrets` 414, `vault status` 132, `compress --check` 164, `quarantine` 172, which
the terminal wrapped into a mess). Each command is run as a whole process with COLUMNS=80
(the console reads it once per process) on the corpus store; no line may pass 80 cells,
no figure may be cut with "…", and the values a person reads the table for (from the
command's own --json) must be on screen. Columns left out at this width are named."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.conftest import CORPUS_HOME


def _fig(v: int | None) -> str:
    """A token figure as the table prints it: ``12,345``; null (tokens not recorded by
    the agent: Crush, Go opencode) ``-``."""
    return "-" if v is None else f"{v:,}"


@pytest.fixture(scope="module")
def homes(corpus_store, tmp_path_factory):
    """(store home, a private copy of the corpus home as $HOME for compress --check)."""
    agent_home = tmp_path_factory.mktemp("agent-home") / "home"
    shutil.copytree(CORPUS_HOME, agent_home)
    return str(corpus_store[0]), str(agent_home)


def _run(store: str, *args: str, columns: int = 80, home: str | None = None) -> str:
    env = dict(os.environ, COLUMNS=str(columns), CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    if home is not None:
        env["HOME"] = home
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", store],
        capture_output=True, text=True, env=env, timeout=180, check=True,
    )  # fmt: skip
    return r.stdout


def _fits(text: str, columns: int = 80) -> list[str]:
    lines = text.splitlines()
    assert lines, "the command printed nothing"
    wide = [x for x in lines if cell_len(x) > columns]
    assert not wide, f"{len(wide)} lines wider than {columns}: {wide[:2]}"
    return lines


def _words(text: str) -> set[str]:
    return set(re.findall(r"\S+", text))


def _usd(x: float | None) -> str:
    return "" if x is None else f"${x:,.2f}"


@pytest.mark.parametrize("name", ["session", "blocks", "projects"])
def test_usage_reports_fit_and_keep_tokens_and_costs(homes, name):
    store, _ = homes
    rep = json.loads(_run(store, "report", name, "-z", "UTC", "--json"))
    rows = [r for r in rep["rows"] if not r.get("is_gap")]
    assert rows, "the corpus has usage"
    text = _run(store, "report", name, "-z", "UTC")
    _fits(text)
    # no figure cut: "…" only begins a project's path shortened from the left (``cli.short_path``)
    assert all(x.startswith("…") for x in text.splitlines() if "…" in x), text
    words = _words(text)
    for r in rows:
        for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
            assert _fig(r[k]) in words, (name, k, r[k])
        if r["cost_usd"] is not None:
            assert _usd(r["cost_usd"]) in words, (name, r["cost_usd"])
    cost = sum(r["cost_usd"] or 0 for r in rows)
    assert _usd(cost) in words  # the footer's total cost


def test_session_report_names_the_column_it_leaves_out_and_a_wide_terminal_shows_it(homes):
    store, _ = homes
    rep = json.loads(_run(store, "report", "blocks", "-z", "UTC", "--json"))
    narrow = _run(store, "report", "blocks", "-z", "UTC")
    wide = _run(store, "report", "blocks", "-z", "UTC", columns=200)
    # the model names would be folded at 80 columns: the column is left out, named
    # (newuser15 F1: `claude-` / `sonnet-` / `4-` / `20250514`, a row of 4 lines)
    assert "not shown at 80 columns: models (--json has them)" in narrow
    assert "not shown" not in wide
    rows = [r for r in rep["rows"] if not r.get("is_gap")]
    assert all(_fig(r["total_tokens"]) in _words(wide) for r in rows)
    assert all(m in _words(wide) for r in rows for m in r["models"])


def test_tools_report(homes):
    store, _ = homes
    rep = json.loads(_run(store, "report", "tools", "--json"))
    text = _run(store, "report", "tools")
    lines = _fits(text)
    for r in rep["rows"]:  # agent and tool whole on one line with calls and errors
        assert any(
            re.search(
                rf"(?<!\S){re.escape(r['agent'])}\s+{re.escape(r['tool'] or '(none)')}\s+{r['calls']:,}\s", x
            )
            and f" {r['errors']:,} " in x
            for x in lines
        ), r


def test_sessions_list(homes):
    store, _ = homes
    rep = json.loads(_run(store, "sessions", "--json"))
    text = _run(store, "sessions")
    lines = _fits(text)
    # (the empty sessions, no time and no message, are --json's only: newuser16 F2)
    rows = [r for r in rep["sessions"] if r["started"] or r["messages"]]
    assert len(lines) >= len(rows) + 1
    for r, x in zip(rows, lines[1:], strict=False):  # one line per session, in order
        assert r["short_id"] in x.split(), (r, x)
        if r["cost_usd"] is not None:  # within a cent: a parent and its sub-agents are
            # rounded together to add up to report session's figure (newuser17 F20)
            shown = next(float(w[1:].replace(",", "")) for w in x.split() if w.startswith("$"))
            assert abs(shown - r["cost_usd"]) < 0.01 + 1e-9, (r, x)
        # the title is what tells sessions apart: at least 20 cells of it (11 before,
        # `List the fi…`: newuser19 F5; the lead's option (a): the tokens go, the cost stays)
        title = r["title"] or ""
        want = title if cell_len(title) <= 20 else title[:19]
        assert want.strip() in x, (r, x)
    assert "not shown at 80 columns: ended, tools, msgs, project, tokens" in text
    wide = _run(store, "sessions", columns=250)
    assert "not shown" not in wide and "ended" in wide.splitlines()[0]
    # a wider terminal where the title already gets 20 cells keeps the tokens
    at120 = _run(store, "sessions", columns=120)
    assert "tokens" in at120.splitlines()[0].split()
    for r, x in zip(rows, at120.splitlines()[1:], strict=False):
        tokens = "-" if r["tokens"] is None else f"{r['tokens']:,}"  # "-": not recorded (Crush)
        assert tokens in x.split(), (r, x)


def test_sources_coverage(homes):
    store, _ = homes
    rep = json.loads(_run(store, "sources", "--coverage", "--json"))
    text = _run(store, "sources", "--coverage")
    lines = _fits(text)
    for r in rep["rows"]:
        version = r["agent_version"] or "?"
        assert any(
            x.split()[:2] == [r["agent"], version] and f"{r['records']:,}" in x.split() for x in lines
        ), r
    assert "not shown at 80 columns: parsed" in text


def test_secrets(homes):
    store, _ = homes
    rep = json.loads(_run(store, "secrets", "--json"))
    assert rep["total"], "the corpus holds redacted values"
    text = _run(store, "secrets")
    lines = _fits(text)
    # one table style for the four tables (the sessions table needs the borderless one:
    # the first three kept their borders beside it before, a new user's "mixed styles")
    titles = ["per kind", "per agent", "per date (UTC)", "sessions to look at"]
    assert [x for x in lines if x.strip() in titles] == titles
    rules = [x for x in lines if x.strip() and set(x.strip()) == {"─"}]
    assert len(rules) == 4 and not set("┏┃┡│└┗") & set(text), text
    assert str(rep["vault"]["values"]) in _words(text)  # and why the vault counts another figure
    words = _words(text)
    for kind, v in rep["kinds"].items():
        assert kind in words and f"{v['values']:,}" in words
        assert v["first_seen"][:10] in words  # the date and minute of the first sighting
    for s in rep["sessions"]:
        assert s["agent"] in words


def test_vault_status(homes):
    store, _ = homes
    rep = json.loads(_run(store, "vault", "status", "--json"))
    text = _run(store, "vault", "status")
    lines = _fits(text)
    for a in rep["agents"]:
        assert any(x.split()[:3] == [a["agent"], f"{a['files']:,}", f"{a['sessions']:,}"] for x in lines), a
    # an agent's deletion rule whole, never cut mid-word in a column (newuser14 F6:
    # "never (general.sessionR" / "etention not")
    for a in rep["agents"]:
        for word in (a["deletes"] or "").split():
            assert word in _words(text), (word, text)


def test_compress_check(homes):
    store, agent_home = homes
    rep = json.loads(_run(store, "compress", "--check", "--json", home=agent_home))
    assert rep["exceeding"], "the corpus has files over the thresholds"
    text = _run(store, "compress", "--check", "--all", home=agent_home)
    _fits(text)
    assert text.count("EXCEEDS") == rep["exceeding"]
    squeezed = re.sub(r"\s", "", text)  # file names fold inside their column
    for f in rep["files"]:
        assert f"{f['lines']:,}" in _words(text)
        if f.get("savings"):  # the savings line names the file whole
            assert Path(f["path"]).name in squeezed


def test_quarantine(tmp_path, store_home):
    from tests.cli.test_cli_quarantine import _home_with_bad_lines
    from tests.conftest import ingest

    home, f, _ = _home_with_bad_lines(tmp_path)
    ingest(home, store_home, "claude-code")
    rep = json.loads(_run(str(store_home), "quarantine", "--json"))
    assert rep["total"] == 2
    text = _run(str(store_home), "quarantine")
    lines = _fits(text)
    words = _words(text)
    for q in rep["lines"]:
        assert any(x.split()[:2] == [str(q["id"]), "claude-code"] for x in lines), q
        assert f"{q['length']:,}" in words and q["first_seen"][:10] in words
        # the reason's words whole (an 11-character column folded "Unterminate" / "d
        # string": newuser15 F3), the file name whole with its offset
        assert set(q["reason"].split()) <= words, q["reason"]
        assert f"{f.name} @ {q['offset']:,}" in text
    assert f.name in re.sub(r"\s", "", text)
