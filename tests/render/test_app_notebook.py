"""The app notebook (ctxkeep/notebooks/app.py) run as a script, and `ctxkeep ui`'s
checks before it starts a server (the served app is tested in tests/browser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_helpers import one_error_line
from conftest import q
from ctxkeep.cli import app
from ctxkeep.cli.ui import marimo_command
from ctxkeep.render import app_views, report

APP = Path(__file__).resolve().parents[2] / "ctxkeep" / "notebooks" / "app.py"


def _texts(outputs) -> str:
    return "\n".join(getattr(o, "text", "") for o in outputs if o is not None)


def test_app_on_an_empty_home_says_what_to_run(tmp_path):
    outputs, defs = report.run_notebook(APP, {"store": str(tmp_path / "nothing")})
    text = _texts(outputs)
    assert "Nothing to show yet" in text and "ctxkeep ingest" in text
    assert "overview" not in defs  # it stopped there: no half-drawn views


def test_app_on_a_damaged_store_says_what_failed_and_what_to_do(store):
    """analytics.duckdb cut to half its size: the app said "Nothing to show yet: IO
    Error … Run `ctxkeep ingest`", which cannot help; now it names the file and reindex."""
    import os

    duck = store / "analytics.duckdb"
    os.truncate(duck, duck.stat().st_size // 2)
    outputs, defs = report.run_notebook(APP, {"store": str(store)})
    import re

    text = re.sub(r"<[^>]+>", "", _texts(outputs))  # the markdown as rendered, tags removed
    assert "Cannot read the store: analytics store is unreadable: IO Error" in text
    assert f"({duck})" in text and "rebuild it from store.db with ctxkeep reindex" in text
    assert "Nothing to show yet" not in text
    assert "overview" not in defs


def test_app_overview_counts_equal_sqlite_and_hidden_views_compute_nothing(corpus_store):
    from ctxkeep.schema import reasoning_beside_sql
    from ctxkeep.service.sessions_core import SessionsArgs, session_list

    home, _ = corpus_store
    _outputs, defs = report.run_notebook(APP, {"store": str(home)})
    totals = defs["totals"]
    assert totals["responses"] == q(home, "SELECT count(*) FROM usage WHERE ts IS NOT NULL")[0][0]
    assert (
        totals["tokens"]
        == q(
            home,
            "SELECT sum(coalesce(input_tokens,0) + coalesce(output_tokens,0) + coalesce(cache_read_tokens,0)"
            f" + coalesce(cache_creation_tokens,0) + {reasoning_beside_sql()}) FROM usage WHERE ts IS NOT NULL",
        )[0][0]
    )  # (Gemini CLI's thoughts in the total, as `report`'s)
    # every session `ctxkeep sessions` lists (filters at their defaults), those without a
    # time too (they were dropped: 34 of 38), not the empty ones (no time, no message:
    # the CLI leaves them out and counts them apart; the app counted 38 against its 35)
    timed = q(home, "SELECT count(DISTINCT agent || session_id) FROM entries WHERE ts IS NOT NULL")[0][0]
    listed = session_list(home, SessionsArgs.parse(all=True, empty=False))
    every = len(listed.rows)
    assert (every, listed.empty) == (35, 3)
    assert totals["sessions"] == every > timed
    # the other tabs' cells ran but computed nothing
    assert defs["session_table"] is None and defs["store_view"] is None and defs["search_view"] is None
    _outputs, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Sessions"}})
    assert defs["overview"] is None and defs["totals"] is None
    table = defs["session_table"].data
    assert len(table) == defs["session_rows"] == every <= defs["TABLE_ROWS"]
    # an untitled session's cell is blank (its title is null since session 18: marimo
    # printed "None")
    assert all(isinstance(r["title"], str) for r in table) and sum(not r["title"] for r in table) == 6
    # the sessions without a start come last, their start empty
    assert [r["start"] for r in table[timed:]] == [""] * (every - timed)
    assert all(r["start"] for r in table[:timed])


def test_the_transcript_view_links_to_the_sessions_resume_snapshot(corpus_store):
    import re

    from ctxkeep.service import resume as svc_resume

    home, _ = corpus_store
    sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    _o, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Sessions", "session": sid}})
    text = defs["transcript_view"].text
    assert f'href="?tab=Sessions&amp;session={sid}&amp;resume=1"' in text
    # styled as a link: it had the body text's colour and no underline (newuser24 F20)
    link = re.search(r'<a class="resume"[^>]*>', text).group(0)
    assert f'style="{app_views.LINK_STYLE}"' in link and "text-decoration:underline" in app_views.LINK_STYLE
    _o, defs = report.run_notebook(
        APP, {"store": str(home), "qp": {"tab": "Sessions", "session": sid, "resume": "1"}}
    )
    text = defs["transcript_view"].text
    snap = svc_resume.resume(home, svc_resume.ResumeRequest(sessionId=sid))
    assert f"ctxkeep resume --session {sid}" in text and f"~{snap.tokens:,} tokens" in text
    # the snapshot's Markdown is on the page: every word of 3+ characters (tags aside)
    plain = set(re.findall(r"[A-Za-z0-9]{3,}", re.sub(r"<[^>]+>", " ", text)))
    words = set(re.findall(r"[A-Za-z0-9]{3,}", snap.markdown))
    assert len(words) > 20 and words <= plain, sorted(words - plain)[:10]


def test_the_transcript_view_links_to_its_sub_agents_and_parent(corpus_store):
    """ef95 started a sub-agent: its transcript links it (in the Sub-agents list and at
    the turn it started), opening in the app's window (``target="_top"``: a link in the
    frame would load the app inside the frame); the sub-agent links back to its parent.
    The links were drawn as plain text in the app."""
    import html as h
    import urllib.parse

    from ctxkeep.service import transcripts as svc_tr

    home, _ = corpus_store
    sid = "ef958aa1-0e93-49f0-bb71-150f63befcd1"
    kids = [
        k.session_id
        for k in next(svc_tr.transcripts(svc_tr.TranscriptRequest(home=home, sessions=[sid]))).subagents
    ]
    assert kids

    def a(session: str) -> str:
        href = h.escape("?" + urllib.parse.urlencode({"tab": "Sessions", "session": session}))
        return f'<a href="{href}" target="_top">'

    _o, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Sessions", "session": sid}})
    page = h.unescape(defs["transcript_view"].text)  # the frame's srcdoc, unescaped once
    for kid in kids:
        assert page.count(a(kid)) >= 2, kid  # in the Sub-agents list and where it started
    _o, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Sessions", "session": kids[0]}})
    page = h.unescape(defs["transcript_view"].text)
    assert f"<th>parent</th><td>{a(sid)}{sid}</a>" in page


def test_the_store_tab_shows_the_vault_and_the_runs(corpus_store):
    """Issue 23's Store tab: "sources, coverage, quarantine, vault status, schedule
    runs" (vault and runs were missing). The corpus store was made by one ingest: its
    run is listed with the entries it added; the vault lists the agents it captured."""
    from ctxkeep.render import app_views
    from ctxkeep.render.nbkit import Store

    home, _ = corpus_store
    _o, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Store"}})
    text = defs["store_view"].text
    assert (
        "Vault" in text
        and "Runs (the last 20; times UTC; an ingest that finds nothing new records none)" in text
    )
    vault, runs = app_views.vault_runs(Store(str(home), "UTC", "", ""))
    # the ingest that made the store (tests of `export` before this one record their
    # export-site runs in the shared corpus store too)
    (run,) = [r for r in runs.data if r["flow"] == "ingest"]
    entries = q(home, "SELECT count(*) FROM entries")[0][0]
    assert run["flow"] == "ingest" and run["status"] == "ok" and run["entries_new"] == entries > 0
    agents = {r["agent"]: r for r in vault[1].data}
    assert {"claude-code", "codex"} <= set(agents)
    assert all(r["files"] > 0 and r["stored (bytes)"] > 0 for r in agents.values())
    assert agents["claude-code"]["found (bytes)"] > agents["claude-code"]["stored (bytes)"]


def test_a_search_hit_shows_its_words_once(corpus_store):
    """A hit whose snippet starts with its title's words showed them twice (title,
    then snippet). The one rendering of a hit (``SearchHit.render``) now leaves out of
    the snippet what the title says; the app links the title and shows the rest once."""
    import html as h
    import re

    from ctxkeep.render import app_views
    from ctxkeep.service import search as svc_search

    home, _ = corpus_store
    query = "jupyter notebook"
    hits = (
        svc_search.search(home, svc_search.SearchRequest.parse({"queries": [query], "limit": 20}))
        .results[0]
        .hits
    )
    page = app_views.search_view(home, query, []).text
    shown = re.findall(r'<li class="hit"[^>]*>(.*?)</li>', page, re.S)
    assert len(shown) == len(hits) > 3
    # each hit set apart (a gap, a rule), its title styled as a link (newuser24 F20)
    assert page.count(f'<li class="hit" style="{app_views.HIT_STYLE}">') == len(hits)
    assert all(f'style="{app_views.LINK_STYLE}"' in re.search(r"<a [^>]*>", li).group(0) for li in shown)
    repeated = 0
    for hit, li in zip(hits, shown, strict=True):
        p = dict(hit.render())
        link = h.unescape(re.search(r"<a [^>]*>(.*?)</a>", li, re.S).group(1))
        body = h.unescape(li.split("</small>", 1)[1])
        title = (hit.title or "").rstrip("…")
        if title and hit.snippet.startswith(title):
            repeated += 1  # the raw snippet repeats the title: the render drops it
            assert not p.get("snippet", "").startswith(title)
        if "snippet" in p and p.get("title") and p["snippet"].startswith(p["title"].rstrip("…")):
            assert link == p["snippet"] and p["snippet"] not in body  # once, as the link
        else:
            assert link == (p.get("title") or hit.entry_id)
            assert body.count(p["snippet"]) == 1 if "snippet" in p else body == ""
        if title and len(title) > 20:
            assert (link + body).count(title) == 1, (link, body)
    assert repeated >= 2  # the corpus has such hits (they showed their words twice)


def test_the_sessions_table_holds_the_newest_table_rows_and_counts_the_rest(corpus_store):
    from ctxkeep.service import transcripts as svc_tr

    home, _ = corpus_store
    _o, defs = report.run_notebook(
        APP, {"store": str(home), "qp": {"tab": "Sessions"}, "TABLE_ROWS": 3, "TURNS_PER_PAGE": 300}
    )
    kept = set(defs["kept_sessions"]["session_id"].to_list())
    newest = [
        s.session_id
        for s in svc_tr.session_index(svc_tr.SessionIndexRequest(home=home)).sessions
        if s.session_id in kept
    ]
    assert len(newest) > 3
    table = defs["session_table"]
    assert [r["id"] for r in table.data] == newest[:3]  # the first 3 of the index's order
    assert defs["session_rows"] == len(newest)  # the count says how many match
    assert f"the newest 3 of {len(newest):,}" in table.text
    _o, defs = report.run_notebook(APP, {"store": str(home), "qp": {"tab": "Sessions"}})
    assert defs["TABLE_ROWS"] == 1000 and len(defs["session_table"].data) == len(newest)
    assert "the newest" not in defs["session_table"].text  # under the cap: no note


def _longest_session(home) -> tuple[str, int]:
    from ctxkeep.service import transcripts as svc_tr

    best = max(svc_tr.transcripts(svc_tr.TranscriptRequest(home=home)), key=lambda t: len(t.turns))
    return best.session.session_id, len(best.turns)


def test_a_long_transcript_is_read_and_drawn_a_page_at_a_time(corpus_store):
    """The service reads the texts of the page's turns only; the app draws that page,
    says which turns of how many, and links the other pages; a hit opens its page."""
    import html as h
    import re

    from ctxkeep.service import transcripts as svc_tr

    home, _ = corpus_store
    sid, n = _longest_session(home)
    assert n > 15
    whole = next(svc_tr.transcripts(svc_tr.TranscriptRequest(home=home, sessions=[sid])))
    paged = next(
        svc_tr.transcripts(svc_tr.TranscriptRequest(home=home, sessions=[sid], page_turns=5, page=1))
    )
    assert paged.window == (5, 10) and whole.window is None
    assert [t.entry_id for t in paged.turns] == [t.entry_id for t in whole.turns]
    assert paged.turns[5:10] == whole.turns[5:10]  # the page: texts, results, media whole
    outside = [t for i, t in enumerate(whole.turns) if not 5 <= i < 10 and t.kind != "subagent" and t.text]
    assert outside and all(paged.turns[whole.turns.index(t)].text == "" for t in outside)
    # a search hit (a tool result's id: its call's page) opens the page holding it
    at = next(i for i, t in enumerate(whole.turns) if i >= 10 and (t.result_entry_id or t.entry_id))
    hit = whole.turns[at].result_entry_id or whole.turns[at].entry_id
    focused = next(
        svc_tr.transcripts(svc_tr.TranscriptRequest(home=home, sessions=[sid], page_turns=5, focus=hit))
    )
    assert focused.window == (at // 5 * 5, min(at // 5 * 5 + 5, n))

    pages = -(-n // 5)
    _o, defs = report.run_notebook(
        APP,
        {
            "store": str(home),
            "qp": {"tab": "Sessions", "session": sid, "page": "2"},
            "TABLE_ROWS": 1000,
            "TURNS_PER_PAGE": 5,
        },
    )
    text = defs["transcript_view"].text
    assert f"Turns 6–10 of {n:,} (page 2 of {pages})" in text
    for k in (1, 3, pages):
        assert f"session={sid}&amp;page={k}" in text
    drawn = set(re.findall(r'id="e-([^"]+)"', h.unescape(text)))
    assert drawn == {t.entry_id for t in whole.turns[5:10] if t.entry_id}


@pytest.mark.parametrize(
    "args,words",
    [
        (["--host", "0.0.0.0"], "not a loopback address"),
        (["--host", "192.168.1.5", "--allow-remote"], "needs --token"),
        (
            ["--host", "192.168.1.5", "--allow-remote", "--token", "short"],
            "--token is 5 characters: --allow-remote needs 8 or more",
        ),
    ],
)
def test_ui_refuses_a_remote_host_without_allow_remote_and_a_token(tmp_path, args, words):
    r = CliRunner().invoke(app, ["ui", "--no-browser", "--home", str(tmp_path), *args])
    one_error_line(r, 2, words)


def test_ui_command_line():
    cmd = marimo_command(APP, Path("/h"), "127.0.0.1", 2718, browser=False, token=None)
    # -y -q: Ctrl+C stops marimo at once (it asked "Are you sure you want to quit?" on
    # the terminal and stopped answering meanwhile), no marimo banner or tips (newuser15 F7)
    assert cmd[:6] == [sys.executable, "-m", "marimo", "-y", "-q", "run"]
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and "--no-token" in cmd and "--headless" in cmd
    assert cmd[-3:] == ["--", "--store", "/h"]
    remote = marimo_command(APP, Path("/h"), "10.0.0.2", 9000, browser=True, token="s3cret-token")
    # the token goes through standard input, never the command line
    assert remote[remote.index("--token-password-file") + 1] == "-" and "--headless" not in remote
    assert "s3cret-token" not in " ".join(remote)


def test_an_open_notebook_store_never_holds_the_duckdb_file(store):
    """DuckDB lets no process write while another has the file open: the notebooks'
    Store opens it per query, so an ingest can sync while the app stays open."""
    import subprocess

    from ctxkeep.render.nbkit import Store

    st = Store(str(store), "UTC", "", "")
    assert st.q("SELECT count(*) AS n FROM usage")["n"][0] > 0
    code = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
        "c.execute('CREATE TABLE IF NOT EXISTS t_probe(x INT)'); c.close(); print('wrote')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(store / "analytics.duckdb")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.strip() == "wrote", r.stderr
    assert st.q("SELECT count(*) AS n FROM usage")["n"][0] > 0  # and it reads on after the write


def test_the_notebooks_read_while_another_process_writes_duckdb(store):
    """A writer (an ingest's DuckDB sync) holds analytics.duckdb: the notebooks' Store
    still opens and reads (a copy of the file's last checkpoint), without waiting."""
    import subprocess
    import time

    from ctxkeep.render.nbkit import Store

    code = (
        "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); sys.stdin.readline()"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(store / "analytics.duckdb")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout.readline().strip() == "held"
        t = time.monotonic()
        st = Store(str(store), "UTC", "", "")
        n = st.q("SELECT count(*) AS n FROM usage")["n"][0]
        assert time.monotonic() - t < 30  # no waiting on the writer (the lock wait is 1 s)
    finally:
        p.communicate("\n", timeout=30)
    assert n == q(store, "SELECT count(*) FROM usage")[0][0]


def test_the_pages_share_an_answer_until_the_store_changes(store):
    """``Store.cached``: one computation per store change for every page of a server
    (the sessions view aggregates every entry); a write to store.db computes again."""
    import os

    from ctxkeep.render.nbkit import Store

    st = Store(str(store), "UTC", "", "")
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    assert st.cached("k", compute) == 1
    assert Store(str(store), "UTC", "", "").cached("k", compute) == 1  # another page: shared
    assert len(calls) == 1
    t = os.stat(store / "store.db").st_mtime_ns + 1_000_000
    os.utime(store / "store.db", ns=(t, t))  # what an ingest's commit does to it
    assert st.cached("k", compute) == 2
    (store / "prices.toml").write_text("[models.x]\ninput_mtok = 1\n")  # the costs change
    assert st.cached("k", compute) == 3 and st.cached("k", compute) == 3


def test_ui_takes_its_token_from_the_environment_or_a_file_not_only_the_command_line(tmp_path, monkeypatch):
    """newuser18 F16: ``--token T`` is on the command line, which every user of the
    machine lists (``ps``); ``CTXKEEP_UI_TOKEN`` and ``--token-file`` keep it off it, and
    the server gets it on standard input as before."""
    import ctxkeep.cli.ui as ui_cli

    got = []
    monkeypatch.setattr(ui_cli, "run_server", lambda cmd, env, secret=None: got.append((cmd, secret)) or 0)
    base = [
        "ui",
        "--no-browser",
        "--home",
        str(tmp_path),
        "--host",
        "192.168.1.5",
        "--allow-remote",
        "--port",
        "40123",
    ]
    monkeypatch.setattr("ctxkeep.service.maintenance.port_free", lambda host, port: True)
    r = CliRunner().invoke(app, base, env={"CTXKEEP_UI_TOKEN": "from-the-env-1818"})
    assert r.exit_code == 0, r.output
    f = tmp_path / "token"
    f.write_text("from-a-file-1818\nignored\n")
    r = CliRunner().invoke(app, [*base, "--token-file", str(f)])
    assert r.exit_code == 0, r.output
    assert [s for _, s in got] == ["from-the-env-1818", "from-a-file-1818"]
    assert all("from-" not in " ".join(cmd) for cmd, _ in got)
    # the same checks as --token's
    one_error_line(
        CliRunner().invoke(app, base, env={"CTXKEEP_UI_TOKEN": "short"}), 2, "--token is 5 characters"
    )
    f.write_text("\n")
    one_error_line(CliRunner().invoke(app, [*base, "--token-file", str(f)]), 2, "the token file is empty")
    one_error_line(
        CliRunner().invoke(app, [*base, "--token-file", str(tmp_path / "nope")]),
        2,
        "cannot read the token file",
    )


def test_the_store_tab_counts_what_compress_archived(store):
    """The Store tab's "archived" column counted the rows retention moved out to the
    Parquet archive, so right after `compress` archived 60 entries it said "archived 0"
    for every agent (newuser19 F2). It now counts status `archived` (what compress
    removed from a file, as the README names it) and, apart, the Parquet archive's rows."""
    from ctxkeep.render import app_views
    from ctxkeep.render.nbkit import Store
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite.status import StatusChange

    ids = [
        r[0]
        for r in q(store, "SELECT entry_id FROM entries WHERE agent = 'codex' ORDER BY entry_id LIMIT 53")
    ]
    ids += [
        r[0]
        for r in q(
            store, "SELECT entry_id FROM entries WHERE agent = 'claude-code' ORDER BY entry_id LIMIT 7"
        )
    ]
    conn = sqlite_store.connect(store)
    try:
        sqlite_store.apply_changes(conn, [StatusChange("archived", tuple(ids))], home=store)
    finally:
        conn.close()
    assert q(store, "SELECT count(*) FROM entries WHERE status = 'archived'")[0][0] == 60
    cover = app_views.coverage(Store(str(store), "UTC", "", ""))
    by = {r["agent"]: r for r in cover.iter_rows(named=True)}
    assert (by["codex"]["archived by compress"], by["claude-code"]["archived by compress"]) == (53, 7)
    assert by["gemini-cli"]["archived by compress"] == 0
    assert all(r["in Parquet archive"] == 0 for r in by.values())  # retention moved nothing
    assert "archived" not in cover.columns  # the ambiguous name is gone
