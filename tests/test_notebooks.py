"""The analytics notebooks (ctxkeep/notebooks/*.py, marimo) and `ctxkeep report html`:
run as scripts against the corpus store, their figures are the CLI's (`ctxkeep report
… --json`, a different code path over the same model) and SQLite's; the static pages
load nothing from elsewhere and draw their charts."""

from __future__ import annotations

import ast
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import q as _lite
from ctxkeep.cli import app
from ctxkeep.render import report

NOTEBOOKS = Path(__file__).resolve().parent.parent / "ctxkeep" / "notebooks"
NAMES = [n for n, _ in report.NOTEBOOKS]


def _cli(*args):
    return CliRunner().invoke(app, list(args))


def _json(*args) -> dict:
    r = _cli(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.fixture(scope="module")
def runs(corpus_store):
    """Each notebook run once as a script against the corpus store (UTC, whole period):
    name → (outputs, defs)."""
    home, _ = corpus_store
    params = {"store": str(home), "timezone": "UTC", "since": "", "until": ""}
    return {n: report.run_notebook(NOTEBOOKS / f"{n}.py", params) for n in NAMES}


# ---------------------------------------------------------------- the files


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_a_marimo_app_with_the_four_parameters(name):
    src = (NOTEBOOKS / f"{name}.py").read_text()
    tree = ast.parse(src)
    assert "app = marimo.App(" in src and 'if __name__ == "__main__":' in src
    params = [
        f
        for f in tree.body
        if isinstance(f, ast.FunctionDef) and "page_params()" in ast.get_source_segment(src, f)
    ]
    assert len(params) == 1
    ret = params[0].body[-1]
    assert isinstance(ret, ast.Return)
    assert sorted(e.id for e in ret.value.elts) == ["since", "store", "timezone", "until"]
    # the setup is nbkit's (one copy): no notebook reads its command line or opens the store itself
    assert "mo.cli_args()" not in src and "Store(" not in src and "open_page(" in src


def test_every_notebook_is_listed():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.py") if p.stem != "app") == sorted(NAMES)


# ---------------------------------------------------------------- figures equal to the CLI's


def test_usage_per_agent_equals_report_daily(runs, corpus_store):
    home, _ = corpus_store
    per_agent = runs["usage"][1]["per_agent"]
    daily = _json("report", "daily", "--home", str(home), "-z", "UTC")["rows"]
    want = defaultdict(lambda: [None, 0, 0.0])
    for r in daily:  # null tokens: not recorded by the agent (Crush): null in both
        if r["total_tokens"] is not None:
            want[r["agent"]][0] = (want[r["agent"]][0] or 0) + r["total_tokens"]
        want[r["agent"]][1] += r["responses"]
        want[r["agent"]][2] += r["cost_usd"] or 0
    got = {r["agent"]: r for r in per_agent.iter_rows(named=True)}
    assert set(got) == set(want) and len(want) >= 5
    for agent, (tokens, responses, cost) in want.items():
        assert got[agent]["total_tokens"] == tokens
        assert got[agent]["responses"] == responses
        assert got[agent]["cost_usd"] == pytest.approx(cost, abs=1e-6)
    # and SQLite's own sums (the usage table of the system of record)
    from ctxkeep.schema import reasoning_beside_sql

    for agent, n, tokens in _lite(
        home,
        "SELECT agent, count(*), sum(CASE WHEN coalesce(input_tokens, output_tokens, cache_read_tokens, "
        "cache_creation_tokens) IS NOT NULL THEN coalesce(input_tokens,0) + coalesce(output_tokens,0)"
        f" + coalesce(cache_read_tokens,0) + coalesce(cache_creation_tokens,0) + {reasoning_beside_sql()} END) "
        "FROM usage GROUP BY agent",
    ):
        assert (got[agent]["responses"], got[agent]["total_tokens"]) == (n, tokens)


def test_usage_per_model_equals_report_models(runs, corpus_store):
    home, _ = corpus_store
    per_model = runs["usage"][1]["per_model"]
    rows = _json("report", "models", "--home", str(home), "-z", "UTC")["rows"]
    want = {(r["agent"], r.get("model")): (r["total_tokens"], r["cost_usd"]) for r in rows}
    got = {
        (r["agent"], r["model"]): (r["total_tokens"], r["cost_usd"]) for r in per_model.iter_rows(named=True)
    }
    assert len(want) >= 10
    for key, (tokens, cost) in want.items():
        assert got[key][0] == tokens, key
        assert (got[key][1] or 0) == pytest.approx(cost or 0, abs=1e-6), key


def test_a_cache_write_not_recorded_is_null_as_in_report_models(runs, corpus_store, pages):
    """newuser21 N4: Codex's cache write (not recorded) was 0 on the usage page and -
    in `report daily/models`: null in both now, "-" on the page."""
    home, _ = corpus_store
    rows = _json("report", "models", "--home", str(home), "-z", "UTC")["rows"]
    want = {(r["agent"], r.get("model")): r["cache_creation_tokens"] for r in rows}
    got = {
        (r["agent"], r["model"]): r["cache_creation_tokens"]
        for r in runs["usage"][1]["per_model"].iter_rows(named=True)
    }
    assert got == want
    assert want[("codex", "gpt-5")] is None and want[("claude-code", "claude-sonnet-4-20250514")] == 397_628
    per_agent = {
        r["agent"]: r["cache_creation_tokens"] for r in runs["usage"][1]["per_agent"].iter_rows(named=True)
    }
    assert (per_agent["codex"], per_agent["gemini-cli"], per_agent["claude-code"]) == (None, None, 644_095)
    usage = (pages[0] / "usage.html").read_text()
    codex = re.search(r"<tr><td>codex</td><td class=\"n\">563</td>(.*?)</tr>", usage)
    assert codex, usage[:2000]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", codex.group(1))
    # input, output, cache read, cache write, total, cost, unpriced
    assert cells == ["3,609,297", "281,069", "61,294,208", "-", "65,184,574", "$14.97", "0"], cells


def test_costliest_sessions_roll_sub_agents_into_parents_as_report_session(runs, corpus_store):
    home, _ = corpus_store
    costly = runs["usage"][1]["costly"]
    rows = _json("report", "session", "--home", str(home), "-z", "UTC")["rows"]
    want = [(r["period"], round(r["cost_usd"], 6)) for r in rows if r["cost_usd"] is not None][:5]
    got = [(s, round(c, 6)) for s, c in costly.select("session_id", "cost_usd").head(5).iter_rows()]
    assert got == want
    # fe5e1c67 started five sidechains: its row carries their cost (SQLite-independent
    # check: the sidechains are listed under it by `ctxkeep sessions`)
    fe5e = costly.filter(costly["session_id"] == "fe5e1c67-53e7-4862-81ae-d0e013e3270b").row(0, named=True)
    listed = _json("sessions", "--home", str(home))["sessions"]
    family = [s for s in listed if s["session_id"].startswith("fe5e1c67-53e7-4862-81ae-d0e013e3270b")]
    assert len(family) == 6 and fe5e["sub_agents"] == 5
    assert fe5e["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in family), abs=1e-6)


def test_sessions_tool_calls_equal_report_tools(runs, corpus_store):
    home, _ = corpus_store
    by_tool = runs["sessions"][1]["by_tool"]
    rows = _json("report", "tools", "--home", str(home))["rows"]
    want = Counter()
    for r in rows:
        want[r["tool"] or "(unnamed)"] += r["calls"]
    got = dict(by_tool.select("tool_name", "calls").iter_rows())
    top = [t for t, _ in want.most_common(10)]
    assert [got[t] for t in top] == [want[t] for t in top]
    # and SQLite's count of the tool calls of the most called tool
    (n,) = _lite(home, "SELECT count(*) FROM entries WHERE kind = 'tool_call' AND tool_name = ?", top[0])[0]
    assert got[top[0]] == n


def test_context_curve_restarts_at_each_compaction(runs, corpus_store):
    home, _ = corpus_store
    growth = runs["sessions"][1]["growth"]
    # d3ad4cdc (Claude Code) holds one compaction: after it, the curve starts again from
    # the summary's own estimate
    s = growth.filter(growth["session_id"] == "d3ad4cdc-5657-435d-98fa-0035d53e383d").sort("n")
    kinds = s["kind"].to_list()
    at = kinds.index("summary")
    assert s["context"][at] == s["tokens"][at] < s["context"][at - 1]
    est = _lite(
        home,
        "SELECT sum(coalesce(token_estimate, 0)) FROM entries WHERE session_id = ?",
        "d3ad4cdc-5657-435d-98fa-0035d53e383d",
    )[0][0]
    assert s["context"].max() < est  # never the whole session's total


def test_the_context_curve_is_drawn_from_a_bounded_sample(runs, corpus_store):
    """Each session's curve is drawn from at most GROWTH_POINTS entries (every k-th, its
    first and last, each compaction): the whole curve when a session is shorter."""
    import polars as pl

    home, _ = corpus_store
    growth, drawn = runs["sessions"][1]["growth"], runs["sessions"][1]["growth_drawn"]
    assert runs["sessions"][1]["GROWTH_POINTS"] == 1500 and growth.height < 1500 * 6
    assert drawn.sort("agent", "session_id", "n").equals(growth.sort("agent", "session_id", "n"))
    params = {"store": str(home), "timezone": "UTC", "since": "", "until": "", "GROWTH_POINTS": 40}
    _o, defs = report.run_notebook(NOTEBOOKS / "sessions.py", params)
    small = defs["growth_drawn"]
    key = ["agent", "session_id"]
    sampled = 0
    for (agent, sid), whole in growth.group_by(key):
        got = small.filter((pl.col("agent") == agent) & (pl.col("session_id") == sid))
        summaries = whole.filter(pl.col("kind") == "summary").height
        assert got.height <= 40 + 2 + summaries
        assert set(got["n"]) >= {1, whole["n"].max()} | set(whole.filter(pl.col("kind") == "summary")["n"])
        if whole.height > 40:
            assert got.height < whole.height  # a sample of it
            sampled += 1
        else:
            assert got.height == whole.height
    assert sampled > 0


def test_store_entries_and_dedup_equal_sqlite(runs, corpus_store):
    home, _ = corpus_store
    defs = runs["store"][1]
    per_agent = dict(defs["per_agent"].select("agent", "entries").iter_rows())
    assert per_agent == dict(_lite(home, "SELECT agent, count(*) FROM entries GROUP BY agent"))
    assert defs["ref_all"] == _lite(home, "SELECT sum(text_bytes) FROM entries")[0][0]
    assert defs["kept_all"] == _lite(home, "SELECT sum(bytes) FROM contents")[0][0]
    assert defs["by_status"].height == 1  # every corpus entry active: said in words, no one-slice pie
    # what compress archived and what retention moved out, apart (one "archived" column
    # counted the latter only: newuser19 F2); the corpus store has neither
    cols = ("archived by compress", "in Parquet archive")
    assert defs["per_agent"].select(cols).sum().row(0) == (0, 0)


def test_notebooks_follow_the_period_and_zone(corpus_store):
    """since/until are local days in the zone: a one-day window holds exactly the
    responses of that local day (counted here from SQLite's UTC stamps)."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    home, _ = corpus_store
    tz = ZoneInfo("America/Los_Angeles")
    stamps = [
        (a, dt.datetime.fromisoformat(t.replace("Z", "+00:00")))
        for a, t in _lite(home, "SELECT agent, ts FROM usage WHERE ts IS NOT NULL")
    ]
    day = Counter(s.astimezone(tz).date() for _, s in stamps).most_common(1)[0][0]
    _out, defs = report.run_notebook(
        NOTEBOOKS / "usage.py",
        {
            "store": str(home),
            "timezone": "America/Los_Angeles",
            "since": day.isoformat(),
            "until": day.isoformat(),
        },
    )
    want = Counter(a for a, s in stamps if s.astimezone(tz).date() == day)
    assert dict(defs["per_agent"].select("agent", "responses").iter_rows()) == dict(want)
    # local times: the hour of each response in the zone, not UTC
    local = defs["usage"]["local_ts"].to_list()
    utc = sorted(s for a, s in stamps if s.astimezone(tz).date() == day)
    assert sorted(t.hour for t in local) == sorted(s.astimezone(tz).hour for s in utc)


# ---------------------------------------------------------------- the command and its pages


@pytest.mark.parametrize(
    "args,code,words",
    [
        (["--timezone", "Mars/Olympus"], 2, "unknown time zone"),
        (["--since", "2026-02-01", "--until", "2026-01-01"], 2, "after --until"),
        (["--since", "yesterday"], 2, "cannot read the time"),
        ([], 1, "no store yet"),
    ],
)
def test_report_html_bad_input_is_one_line(tmp_path, args, code, words):
    r = _cli("report", "html", str(tmp_path / "out"), "--home", str(tmp_path / "empty"), *args)
    assert r.exit_code == code
    assert r.output.startswith("error: ") and words in r.output and len(r.output.strip().splitlines()) == 1


def test_report_html_without_the_extra_says_how_to_add_it(monkeypatch, tmp_path):
    monkeypatch.setattr(report, "missing_modules", lambda: ["marimo"])
    r = _cli("report", "html", str(tmp_path / "out"), "--home", str(tmp_path))
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "uv sync --extra notebooks" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def pages(corpus_store, tmp_path_factory):
    home, _ = corpus_store
    out = tmp_path_factory.mktemp("report")
    r = _cli("report", "html", str(out), "--home", str(home), "--timezone", "UTC")
    assert r.exit_code == 0, r.output
    return out, r


def test_report_html_pages_are_self_contained_tables_and_charts(pages, corpus_store):
    home, _ = corpus_store
    out, r = pages
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("running ")] == [
        f"running {n}.py …" for n in NAMES
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        report.MARKER,
        "index.html",
        "sessions.html",
        "store.html",
        "usage.html",
    ]
    for name in NAMES:
        page = (out / f"{name}.html").read_text()
        # nothing loaded or linked from elsewhere, no script at all
        assert not re.search(r"(src|href)\s*=\s*\"?\s*(https?:)?//", page), name
        assert "<script" not in page and "<link" not in page
        assert "http://" not in page and "https://" not in page, name
        # charts drawn (SVG with marks), tables as tables: no dtype row, no shape line, no null row
        assert page.count("<svg") >= 2, name
        assert '<table class="data">' in page
        assert "shape: (" not in page and "│ str" not in page and ">null<" not in page
    usage = (out / "usage.html").read_text()
    # a figure the page shows equals the CLI's: codex's tokens
    codex = sum(
        r["total_tokens"]
        for r in _json("report", "daily", "--home", str(home), "-z", "UTC")["rows"]
        if r["agent"] == "codex"
    )
    assert f"<strong>codex</strong>: {codex:,} tokens" in usage


def test_report_html_empty_tables_say_so(pages):
    out, _ = pages
    store = (out / "store.html").read_text()
    assert "No compress runs in this period" in store  # the corpus store was never compressed


@pytest.mark.parametrize("period", [["--since", "2099-01-01"], ["--until", "2000-01-01"]])
def test_report_html_of_a_period_without_usage_says_so(corpus_store, tmp_path, period):
    """A period the store holds no usage in gives the three pages (exit 0), each saying
    it is empty, as `report daily` does (a sub-agent roll-up of no session once failed
    the usage page: a join of a null column on a string one)."""
    home, _ = corpus_store
    daily = _cli("report", "daily", "--home", str(home), "-z", "UTC", *period)
    assert daily.exit_code == 0 and daily.stdout.strip() == "no usage in the store for this selection"
    out = tmp_path / "out"
    r = _cli("report", "html", str(out), "--home", str(home), "--timezone", "UTC", *period)
    assert r.exit_code == 0, r.output
    usage = (out / "usage.html").read_text()
    assert "<strong>No usage in this period</strong>" in usage
    assert "No priced session started in this period" in usage
    assert "Every response is priced" not in usage
    sessions = (out / "sessions.html").read_text()
    assert "No session started in this period" in sessions
    assert "These sessions logged no API usage" not in sessions
    assert "No entries in this period" in (out / "store.html").read_text()


# ---------------------------------------------------------------- DIR safety


def test_report_html_into_a_file_is_one_error_line(tmp_path, corpus_store):
    home, _ = corpus_store
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    r = _cli("report", "html", str(f), "--home", str(home))
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert r.output.strip().splitlines() == [f"error: DIR is a file ({f}) - give a folder (it is created)"]
    assert f.read_text() == "mine"


def test_report_html_refuses_a_foreign_folder_unless_forced(tmp_path, corpus_store, monkeypatch):
    """A non-empty DIR without a previous report is refused before any notebook runs
    (its index.html stays); --force writes into it and leaves the marker, after which
    a new report writes over it without --force."""
    home, _ = corpus_store
    ran = []
    monkeypatch.setattr(report, "run_notebook", lambda path, params: ran.append(path.stem) or ([], {}))
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("my own page")
    r = _cli("report", "html", str(out), "--home", str(home))
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    assert r.output.startswith("error: DIR is not empty and holds no previous ctxkeep report")
    assert "--force" in r.output and ran == []
    assert (out / "index.html").read_text() == "my own page"
    r = _cli("report", "html", str(out), "--home", str(home), "--force")
    assert r.exit_code == 0, r.output
    assert ran == NAMES and "ctxkeep reports" in (out / "index.html").read_text()
    marker = json.loads((out / report.MARKER).read_text())
    assert marker == {"schema": 1, "pages": [*(f"{n}.html" for n in NAMES), "index.html"]}
    (out / "extra.txt").write_text("kept")
    r = _cli("report", "html", str(out), "--home", str(home))
    assert r.exit_code == 0, r.output
    assert ran == NAMES * 2 and (out / "extra.txt").read_text() == "kept"


def test_report_html_draws_a_chart_of_more_than_5000_rows():
    """A static page inlines every row: Altair refuses more than 5,000 by default, and
    `report html` of a 200 MB store stopped with a traceback (sessions.py: the context
    growth of the largest sessions, 6,000+ entries)."""
    import altair as alt
    import polars as pl

    rows = 6_000
    df = pl.DataFrame({"n": list(range(rows)), "context": [i % 977 for i in range(rows)]})
    chart = alt.Chart(df).mark_line().encode(alt.X("n:Q"), alt.Y("context:Q"))
    # Altair's own default, as a `report html` process has it (a test that renders the
    # app's views before this one leaves marimo's transformer enabled in this process)
    with alt.data_transformers.enable("default"):
        with pytest.raises(alt.MaxRowsError):  # Altair's own default, still in force elsewhere
            chart.to_json()
        out = report.part_html(chart)
        assert out.startswith('<figure class="chart"><svg') and "<path" in out
        assert ">5,000<" in out or ">6,000<" in out  # the x axis reaches the last rows
        with pytest.raises(alt.MaxRowsError):  # the limit is lifted for the page only
            chart.to_json()


# ---------------------------------------------------------------- any failure: one line


def _one_error(r, code: int) -> str:
    """The one ``error:`` line of a failed `report html` (its other stderr lines are
    progress: ``running NAME.py …``, ``  wrote PATH (S s)``); no traceback, exit ``code``."""
    assert r.exit_code == code, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
    assert "Traceback" not in r.output
    progress = ("running ", "  wrote ")
    errors = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith(progress)]
    assert len(errors) == 1 and errors[0].startswith("error: "), r.stderr
    return errors[0]


def test_report_html_of_a_damaged_store_db_is_one_line(store, tmp_path):
    """store.db with a garbage header: `report html` wrote two pages, then blamed its
    store notebook ("notebook store failed: DatabaseError: file is not a database …
    open it with `marimo edit`"); now the store's own line before any page."""
    db = store / "store.db"
    db.write_bytes(b"this is not a SQLite database" * 4096)
    r = _cli("report", "html", str(tmp_path / "out"), "--home", str(store))
    assert _one_error(r, 1) == f"error: store.db is damaged ({db}) - run 'ctxkeep doctor'"
    assert not (tmp_path / "out" / "usage.html").exists()


@pytest.mark.parametrize("damage", ["checksum", "truncated"])
def test_report_html_of_a_damaged_analytics_file_is_one_line(store, tmp_path, damage):
    """analytics.duckdb with a block whose checksum does not match (what a SIGKILL
    mid-checkpoint left in CI's crash trials: found on opening), or cut to half its
    size (found by the first notebook's first query). Truncated, `report html` wrote
    its three pages saying "No data to show: IO Error … run `ctxkeep ingest` first"
    and exited 0; now one line naming the file and `reindex`, exit 1, no page."""
    import os

    duck = store / "analytics.duckdb"
    if damage == "checksum":
        with open(duck, "r+b") as f:  # the first data block after DuckDB's three 4 KiB headers
            f.seek(3 * 4096 + 200)
            b = f.read(1)
            f.seek(3 * 4096 + 200)
            f.write(bytes([b[0] ^ 0xFF]))
    else:
        os.truncate(duck, duck.stat().st_size // 2)
    out = tmp_path / "out"
    r = _cli("report", "html", str(out), "--home", str(store))
    line = _one_error(r, 1)
    assert line.startswith("error: analytics store is unreadable: ") and f"({duck})" in line
    assert line.endswith("- rebuild it from store.db with `ctxkeep reindex`")
    assert not list(out.glob("*.html"))


def test_report_html_a_failing_cell_and_a_full_disk_are_one_line(corpus_store, tmp_path, monkeypatch):
    import errno

    home, _ = corpus_store

    def boom(path, params):
        raise ValueError("cell 3 raised\nKeyError: 'cost_usd'")

    monkeypatch.setattr(report, "run_notebook", boom)
    r = _cli("report", "html", str(tmp_path / "a"), "--home", str(home))
    nb = report.notebooks_dir() / "usage.py"
    assert _one_error(r, 1) == (
        f"error: notebook usage failed: ValueError: KeyError: 'cost_usd' ({nb}) - "
        f"open it with `marimo edit {nb}` to see the cell"
    )
    monkeypatch.setattr(report, "run_notebook", lambda path, params: ([], {}))

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(Path, "write_text", full)
    r = _cli("report", "html", str(tmp_path / "b"), "--home", str(home))
    assert _one_error(r, 1).startswith(
        f"error: no space left on the device ({tmp_path / 'b' / 'usage.html'}) - "
    )


def _svg_of(page: str, title: str) -> str:
    i = page.index(title)
    return page[page.rfind("<svg", 0, i) : page.index("</svg>", i)]


def test_report_html_tool_chart_axis_labels_do_not_collide(pages):
    """newuser23 F12: the x-axis of "Tool calls per tool and agent" ended "480500" (two
    labels drawn over each other). Each label's extent (10 px sans digits ~6 px wide,
    from its anchor) keeps 2 px from the next."""
    out, _ = pages
    svg = _svg_of((out / "sessions.html").read_text(), "Tool calls per tool and agent")
    ticks = re.findall(
        r'<text text-anchor="(start|middle|end)" transform="translate\(([\d.]+),15\)"[^>]*>([\d,]+)</text>',
        svg,
    )
    assert len(ticks) >= 3
    spans = []
    for anchor, x, label in ticks:
        w, x0 = 6.0 * len(label), float(x)
        left = {"start": x0, "middle": x0 - w / 2, "end": x0 - w}[anchor]
        spans.append((left, left + w))
    spans.sort()
    assert all(b[0] - a[1] >= 2 for a, b in zip(spans, spans[1:], strict=False)), ticks


def test_report_html_legends_list_only_agents_with_marks(pages, corpus_store):
    """newuser23 F12: usage.html's legends listed every agent of the store (aider,
    copilot-cli, specstory: no usage); now only the agents the charts draw, each in its
    store-wide colour."""
    home, _ = corpus_store
    out, _ = pages
    usage = (out / "usage.html").read_text()
    used = {r["agent"] for r in _json("report", "daily", "--home", str(home), "-z", "UTC")["rows"]}
    stored = {a for (a,) in _lite(home, "SELECT DISTINCT agent FROM entries")}
    unused = stored - used
    assert {"aider", "specstory"} <= unused
    for a in unused:
        assert f">{a}<" not in usage, a
    for a in used:
        assert f">{a}<" in usage, a
