"""The analytics notebooks (ctxkeep/notebooks/*.ipynb) and `ctxkeep report html`: stripped in
git, executed against stores built from the corpus, showing figures computed here
independently (from SQLite `store.db` and the corpus files, not the views they draw),
and rendered to HTML whose plots a headless Chromium shows."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import time
from collections import Counter, defaultdict
from pathlib import Path

import nbformat
import pytest

from conftest import CORPUS_HOME, ingest
from conftest import q as _lite
from ctxkeep.query import notebooks as nbq

NOTEBOOKS = Path(__file__).resolve().parent.parent / "ctxkeep" / "notebooks"
NAMES = [n for n, _ in nbq.NOTEBOOKS]


def _run(name: str, home: Path, **params):
    import papermill

    return papermill.execute_notebook(
        str(NOTEBOOKS / f"{name}.ipynb"),
        None,
        parameters={"store": str(home), **params},
        kernel_name="python3",
        cwd=str(NOTEBOOKS),
        progress_bar=False,
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )


def _text(nb) -> str:
    return "\n".join(
        o["text"] for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream"
    )


def _pngs(nb) -> list[bytes]:
    return [
        base64.b64decode(o["data"]["image/png"])
        for c in nb.cells
        for o in c.get("outputs", [])
        if "image/png" in o.get("data", {})
    ]


def _not_blank(png: bytes) -> bool:
    """True when the image has real content: many pixels differ from the background."""
    import matplotlib.image as mpimg
    import numpy as np

    a = mpimg.imread(io.BytesIO(png), format="png")[..., :3]
    background = np.median(a.reshape(-1, 3), axis=0)
    return float(a.std()) > 0.02 and float((np.abs(a - background).sum(axis=2) > 0.1).mean()) > 0.005


# ---------------------------------------------------------------- stripped in git


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_has_no_outputs_and_a_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code), (
        "strip the outputs before committing"
    )
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1
    assert set(re.findall(r"^(\w+) =", params[0].source, re.M)) == {
        "store",
        "timezone",
        "since",
        "until",
    }


def test_every_rendered_notebook_exists():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(NAMES)


# ---------------------------------------------------------------- the command's errors


def _cli(*args, env=None):
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    return CliRunner().invoke(app, list(args), env=env)


def test_report_html_without_the_extra_says_how_to_add_it(monkeypatch, tmp_path):
    monkeypatch.setattr(nbq, "missing_modules", lambda: ["papermill", "nbconvert"])
    r = _cli("report", "html", str(tmp_path / "out"), "--home", str(tmp_path))
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "uv sync --extra notebooks" in lines[0] and "ctxkeep[notebooks]" in lines[0]
    assert not (tmp_path / "out").exists()


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


# ---------------------------------------------------------------- executed against the corpus


@pytest.mark.slow
def test_usage_notebook_shows_sqlite_totals(corpus_store):
    home, _ = corpus_store
    nb = _run("usage", home)
    text = _text(nb)
    rows = _lite(
        home,
        "SELECT agent, count(*), sum(coalesce(input_tokens,0) + coalesce(output_tokens,0)"
        " + coalesce(cache_read_tokens,0) + coalesce(cache_creation_tokens,0)) FROM usage GROUP BY agent",
    )
    assert len(rows) >= 5
    for agent, n, tokens in rows:
        assert f"{agent}: {tokens:,} tokens in {n:,} response" in text
    assert f"all agents: {sum(r[2] for r in rows):,} tokens" in text
    # the costliest session: the one with the most tokens of the most expensive rows,
    # here a Codex session (gpt-5) whose total dwarfs every other session's
    per_session = _lite(
        home,
        "SELECT agent, session_id, sum(coalesce(input_tokens,0) + coalesce(output_tokens,0)) AS t"
        " FROM usage GROUP BY 1, 2 ORDER BY t DESC LIMIT 2",
    )
    assert per_session[0][2] > 3 * per_session[1][2]
    assert f"costliest session: {per_session[0][0]} {per_session[0][1]} $" in text
    pngs = _pngs(nb)
    assert len(pngs) == 4 and all(_not_blank(p) for p in pngs)  # tokens, cost, cache ratio, sessions


@pytest.mark.slow
def test_usage_notebook_period_and_zone(corpus_store):
    """since/until are local days in the given zone: a one-day window holds exactly the
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
    nb = _run("usage", home, timezone="America/Los_Angeles", since=day.isoformat(), until=day.isoformat())
    want = Counter(a for a, s in stamps if s.astimezone(tz).date() == day)
    text = _text(nb)
    for agent, n in want.items():
        assert re.search(rf"^{re.escape(agent)}: [\d,]+ tokens in {n:,} response", text, re.M), (agent, n)
    assert len(re.findall(r"^[\w-]+: [\d,]+ tokens in", text, re.M)) == len(want)


@pytest.mark.slow
def test_sessions_notebook_shows_sqlite_sessions_and_tools(corpus_store):
    home, _ = corpus_store
    nb = _run("sessions", home)
    text = _text(nb)
    # the largest session: the most estimated tokens over its entries (none rewound here)
    assert _lite(home, "SELECT count(*) FROM entries WHERE status = 'rewound'") == [(0,)]
    agent, sid, n, tokens, summaries = _lite(
        home,
        "SELECT agent, session_id, count(*), sum(coalesce(token_estimate, 0)) AS t,"
        " count(*) FILTER (WHERE kind = 'summary') FROM entries GROUP BY 1, 2 ORDER BY t DESC LIMIT 1",
    )[0]
    plural = "" if summaries == 1 else "s"
    assert (
        f"{agent} {sid}: {n:,} entries, final context ~{tokens:,} tokens, {summaries} compaction{plural}"
        in text
    )
    # a session with a compaction is among those drawn, and its marker is counted
    compacted = _lite(
        home, "SELECT agent, session_id, count(*) FROM entries WHERE kind = 'summary' GROUP BY 1, 2"
    )
    assert any(f"{a} {s}:" in text and f"{k} compaction" in text for a, s, k in compacted)
    # the five most called tools, with their error counts from the results' flags
    calls = Counter(t for (t,) in _lite(home, "SELECT tool_name FROM entries WHERE kind = 'tool_call'"))
    for tool, k in calls.most_common(3):
        assert f"{tool}: {k:,} calls" in text
    pngs = _pngs(nb)
    assert len(pngs) == 3 and all(_not_blank(p) for p in pngs)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """A store of one Codex rollout and one Claude Code session with a broken line
    appended (quarantined), compressed once: quarantine and compression have rows."""
    from ctxkeep.maintenance.compress.run import run_compress

    tmp = tmp_path_factory.mktemp("small")
    home = tmp / "home"
    codex = home / ".codex/sessions/2025/11/13"
    codex.mkdir(parents=True)
    src = (
        CORPUS_HOME
        / ".codex/sessions/2025/11/13/rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl"
    )
    claude_src = next((CORPUS_HOME / ".claude/projects").rglob("*.jsonl"), None)
    if not src.exists() or claude_src is None:
        pytest.skip("corpus files missing")
    rollout = codex / src.name
    shutil.copyfile(src, rollout)
    claude = home / ".claude/projects" / claude_src.parent.name / claude_src.name
    claude.parent.mkdir(parents=True)
    claude.write_bytes(claude_src.read_bytes() + b'{"type": "user", "message": {broken\n')
    old = time.time() - 7 * 86400
    for p in (rollout, claude):
        os.utime(p, (old, old))
    store = tmp / "store"
    ingest(home, store)
    summary = run_compress(store, paths=[rollout], keep_messages=5)
    # the compress run reaches analytics.duckdb's `compression` at the next DuckDB sync
    # (the run's own sync happens before its record is final; an ingest that finds
    # nothing new does not sync)
    from ctxkeep.sinks import duckdb as duckdb_store
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store)
    try:
        duckdb_store.sync(conn, store)
    finally:
        conn.close()
    return store, summary, [rollout, claude]


@pytest.mark.slow
def test_store_notebook_shows_entries_dedup_compression_quarantine(small_store):
    store, summary, _files = small_store
    assert summary["compressed"] == 1
    nb = _run("store", store)
    text = _text(nb)
    entries = _lite(store, "SELECT agent, text_bytes, content_hash, status FROM entries")
    per_agent = Counter(a for a, *_ in entries)
    for agent, n in per_agent.items():
        assert re.search(rf"^{agent}: {n:,} entries in", text, re.M)
    # dedup: the entries' text bytes against each distinct content once (contents.bytes)
    referenced = sum(b or 0 for _, b, _, _ in entries)
    kept = sum(b for (b,) in _lite(store, "SELECT bytes FROM contents"))
    assert (
        f"referenced {referenced:,} bytes, kept {kept:,} bytes: dedup ratio {referenced / kept:.3f}" in text
    )
    # compression: the run's own summary (bytes of the rewritten session file)
    saved = summary["bytes_before"] - summary["bytes_after"]
    assert saved > 0 and f"compression saved {saved:,} bytes" in text
    # quarantine: the broken line, counted from SQLite
    q = defaultdict(int)
    for agent, action in _lite(store, "SELECT agent, action FROM quarantine"):
        q[agent, action] += 1
    assert q, "the broken line was quarantined"
    for (agent, action), n in q.items():
        assert f"quarantine {agent} {action}: {n:,}" in text
    assert "broken" not in "".join(str(o.get("data", "")) for c in nb.cells for o in c.get("outputs", []))
    pngs = _pngs(nb)
    assert len(pngs) == 5 and all(_not_blank(p) for p in pngs)


# ---------------------------------------------------------------- report html in Chromium


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
def test_report_html_renders_plots_in_chromium(small_store, tmp_path):
    store, _, _ = small_store
    out = tmp_path / "report"
    r = subprocess.run(
        [
            str(Path(os.sys.executable).parent / "ctxkeep"),
            "report",
            "html",
            str(out),
            "--home",
            str(store),
            "--timezone",
            "UTC",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stderr.splitlines() if ln.startswith("running ")] == [
        f"running {n}.ipynb …" for n in NAMES
    ]
    assert sorted(p.name for p in out.iterdir()) == [
        "index.html",
        "sessions.html",
        "store.html",
        "usage.html",
    ]
    index = (out / "index.html").read_text()
    assert all(f'href="{n}.html"' in index for n in NAMES)
    for name in NAMES:
        page = (out / f"{name}.html").read_text()
        assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched: self-contained
        assert "def q(sql" not in page  # inputs hidden
        imgs = re.findall(r'<img[^>]+src="data:image/png;base64,([^"]+)"', page)
        assert imgs, name
        assert all(_not_blank(base64.b64decode(i)) for i in imgs), name
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium) - the screenshot is not taken")
    shot = tmp_path / "usage.png"
    subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium-profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,2400",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
            (out / "usage.html").as_uri(),
        ],
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert shot.exists(), "chromium wrote no screenshot"
    if os.environ.get("CTXKEEP_KEEP_SCREENSHOT"):
        shutil.copyfile(shot, os.environ["CTXKEEP_KEEP_SCREENSHOT"])
    assert _not_blank(shot.read_bytes())
