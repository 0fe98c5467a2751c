"""``ctxkeep export html|markdown``: transcripts of the corpus store as a static site.
The expected figures come from ``store.db`` read here with SQL (not through the
service layer the export uses)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_helpers import one_error_line
from conftest import q
from ctxkeep.cli import app
from ctxkeep.render import site
from ctxkeep.render.transcript import MD_MESSAGE_MARK, markdown_html


def run_cli(args: list[str]):
    return CliRunner().invoke(app, args)


class _Page(HTMLParser):
    """Every attribute value that loads or links something, the visible text, the ids."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.tags: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href", "srcset", "action", "poster", "data"):
                self.refs.append((tag, k, v or ""))
            if k == "id":
                self.ids.add(v or "")
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag):
        if tag in ("style", "script"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def _parse(path: Path) -> _Page:
    p = _Page()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def _words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9]+", text)


def _sessions(home: Path) -> dict[str, tuple[str, int]]:
    """session id → (agent, messages) from store.db (kind 'message', rewound left out)."""
    return {
        sid: (agent, n)
        for agent, sid, n in q(
            home,
            "SELECT agent, session_id, sum(kind = 'message') FROM entries "
            "WHERE status IS NOT 'rewound' GROUP BY agent, session_id",
        )
    }


def _empty(home: Path) -> set[str]:
    """The sessions `ctxkeep sessions` leaves out, from store.db: no time, no message."""
    return {
        sid
        for (sid,) in q(
            home,
            "SELECT session_id FROM entries WHERE status IS NOT 'rewound' GROUP BY session_id "
            "HAVING max(ts) IS NULL AND sum(kind = 'message') = 0",
        )
    }


def _first_user_message(home: Path, sid: str) -> tuple[str, str] | None:
    """(entry id, text) of a session's first user message with text, from store.db."""
    rows = q(
        home,
        "SELECT e.entry_id, (SELECT group_concat(text, '') FROM (SELECT ch.text FROM chunks ch "
        " WHERE ch.content_id = c.content_id ORDER BY ch.seq)) FROM entries e "
        "JOIN contents c ON c.content_hash = e.content_hash "
        "WHERE e.session_id = ? AND e.kind = 'message' AND e.role = 'user' AND e.status IS NOT 'rewound' "
        "ORDER BY e.ts, e.source_path, e.source_offset, e.rowid",
        sid,
    )
    return next(((eid, t) for eid, t in rows if t and t.strip()), None)


@pytest.fixture(scope="module")
def own_store(corpus_store, tmp_path_factory):
    """A copy of the corpus store for this module: an export records its run in the
    store it reads (``service.export.record_site``), never in the shared one (the
    conftest guard ``_corpus_store_keeps_its_runs``)."""
    import shutil

    home = tmp_path_factory.mktemp("export-store") / "store"
    shutil.copytree(corpus_store[0], home, ignore=shutil.ignore_patterns("*.lock"))
    return home, corpus_store[1]


@pytest.fixture(scope="module")
def html_site(own_store, tmp_path_factory):
    home, _ = own_store
    dest = tmp_path_factory.mktemp("site")
    rep = site.export(site.ExportRequest(home=home, dest=dest, fmt="html", tz="Europe/Berlin"))
    return home, dest, rep


def test_export_html_one_page_per_session_and_an_index(html_site):
    home, dest, rep = html_site
    stored, empty = _sessions(home), _empty(home)
    assert len(stored) >= 30  # the corpus: Claude Code, Codex, Gemini, … sessions
    # the empty sessions (no time, no message) are left out, as `ctxkeep sessions`
    # leaves them out, and the index says how many (newuser23 F5: 3 "(no prompt)" pages)
    assert len(empty) == rep.empty == 3
    stored = {sid: v for sid, v in stored.items() if sid not in empty}
    pages = sorted(p.name for p in dest.glob("*.html") if p.name != "index.html")
    assert len(pages) == len(stored) == len(rep.pages)
    assert (dest / "index.html").is_file() and rep.index == str(dest / "index.html")
    # the index links every page, and nothing else but pages
    index = _parse(dest / "index.html")
    linked = sorted(v for tag, k, v in index.refs if tag == "a")
    assert linked == pages
    text = " ".join("".join(index.text).split())
    assert f"{len(stored)} sessions;" in text
    assert "+3 empty sessions were left out (no time, no message)." in text
    listed = run_cli(["sessions", "--all", "--json", "--home", str(home)])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["empty"] == 3
    # every page holds as many message sections as the session has messages
    for p in rep.pages:
        html = Path(p).read_text(encoding="utf-8")
        assert html.count('<section class="msg ') == rep.messages[p]
    assert sorted(rep.messages.values()) == sorted(n for _, n in stored.values())


def test_export_html_loads_and_links_nothing_remote(html_site):
    _home, dest, _rep = html_site
    names = {p.name for p in dest.iterdir()}
    for path in dest.glob("*.html"):
        page = _parse(path)
        assert "link" not in page.tags and "iframe" not in page.tags, path.name  # CSS inline
        for tag, attr, value in page.refs:
            if value.startswith("data:"):
                continue
            # within the page (#anchor) or another page of the site: nothing else
            assert value.startswith("#") or value in names, (path.name, tag, attr, value[:80])
            assert not re.match(r"^\s*([a-z][a-z0-9+.-]*:|//)", value, re.I), value
        raw = path.read_text(encoding="utf-8")
        styles = "".join(re.findall(r"<style>(.*?)</style>", raw, re.S))
        assert styles and "url(" not in styles and "@import" not in styles
        assert not re.search(r"<script[^>]+src=", raw, re.I)


def test_export_html_each_page_shows_its_first_prompt(html_site):
    home, dest, rep = html_site
    by_name = {Path(p).name: Path(p) for p in rep.pages}
    checked = 0
    for sid, (agent, _n) in _sessions(home).items():
        first = _first_user_message(home, sid)
        if first is None:
            continue
        eid, text = first
        page = _parse(by_name[site.page_name(agent, sid, ".html")])
        assert f"e-{eid}" in page.ids, sid  # the message's own section
        want = " ".join(_words(text)[:8])
        assert want in " ".join(_words("".join(page.text))), (sid, want)
        checked += 1
    assert checked >= 25


def test_export_html_folds_tool_calls_with_size_and_error(html_site):
    home, dest, _rep = html_site
    # the Claude Code session ef958aa1 called Bash; its call is a <details> whose summary
    # gives the result's size
    page = (dest / site.page_name("claude-code", "ef958aa1-0e93-49f0-bb71-150f63befcd1", ".html")).read_text()
    calls = q(
        home,
        "SELECT count(*) FROM entries WHERE session_id = 'ef958aa1-0e93-49f0-bb71-150f63befcd1' "
        "AND kind = 'tool_call' AND status IS NOT 'rewound'",
    )[0][0]
    assert page.count('<details class="tool') == calls == 40
    assert re.search(r"<summary><span class=\"tag\">tool</span> Bash · git status[^<]*· result \d+ B", page)
    # sub-agent linked at the point it started, and from the sub-agent back to its parent
    kid = site.page_name("claude-code", "agent-a4ca7529859c158c2", ".html")
    assert f'<a href="{kid}">' in page
    assert 'href="ef958aa1-0e93-49f0-bb71-150f63befcd1-' in (dest / kid).read_text()
    # a failed tool result is flagged: one stored result with the [error] prefix
    errors = q(
        home,
        "SELECT e.session_id, e.agent FROM entries e JOIN contents c ON c.content_hash = e.content_hash "
        "JOIN chunks ch ON ch.content_id = c.content_id AND ch.seq = 0 "
        "WHERE e.kind = 'tool_result' AND ch.text LIKE '[error]%' LIMIT 1",
    )
    assert errors
    sid, agent = errors[0]
    assert "· ERROR" in (dest / site.page_name(agent, sid, ".html")).read_text()


def test_export_markdown_round_trips_the_message_count(own_store, tmp_path):
    home, _ = own_store
    r = run_cli(
        ["export", "markdown", str(tmp_path / "md"), "--session", "fe5e1c67", "--home", str(home), "--json"]
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["schema"] == 1 and rep["index"] is None
    # the session and the five sidechains it started
    assert len(rep["pages"]) == 6
    main = Path(next(p for p in rep["pages"] if "sidechain" not in p))
    text = main.read_text(encoding="utf-8")
    roles = re.findall(re.escape(MD_MESSAGE_MARK) + r" role=(\w+) entry=(\w+) -->", text)
    stored = q(
        home,
        "SELECT role, entry_id FROM entries WHERE session_id = 'fe5e1c67-53e7-4862-81ae-d0e013e3270b' "
        "AND kind = 'message' AND status IS NOT 'rewound' ORDER BY ts, source_path, source_offset, rowid",
    )
    assert roles == stored and len(roles) == 9  # `ctxkeep sessions` shows 9 messages
    assert rep["messages"][str(main)] == 9
    # each sidechain's page: its own count, and a link back to the parent
    for p in rep["pages"]:
        n = len(re.findall(re.escape(MD_MESSAGE_MARK), Path(p).read_text()))
        assert n == rep["messages"][p]


def test_export_unknown_session_is_one_line_and_writes_nothing(own_store, tmp_path):
    home, _ = own_store
    r = run_cli(["export", "html", str(tmp_path / "x"), "--session", "nosuch", "--home", str(home)])
    one_error_line(r, 1, "nosuch")
    assert not (tmp_path / "x").exists()


def test_export_html_of_a_store_with_secrets_holds_none(tmp_path):
    from conftest import ingest
    from fixtures.bad_input import line, rec
    from fixtures.secrets import positives

    cases = positives(3)
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-tmp-export"
    proj.mkdir(parents=True)
    (proj / "5e551011-0000-4000-8000-0000000000bb.jsonl").write_bytes(
        b"".join(line(rec(i + 1, c.text)) for i, c in enumerate(cases))
    )
    ingest(home, tmp_path / "store", "claude-code")
    for fmt in ("html", "markdown"):
        rep = site.export(site.ExportRequest(home=tmp_path / "store", dest=tmp_path / fmt, fmt=fmt))
        assert len(rep.pages) == 1
        data = b"".join(p.read_bytes() for p in (tmp_path / fmt).iterdir())
        values = [v for c in cases for v in c.secrets if v]
        assert values and not [v for v in values if v.encode() in data]


def test_markdown_html_escapes_raw_html_and_keeps_no_remote_link():
    out = markdown_html(
        "<script>alert(1)</script> see [docs](https://example.com/x) ![pic](http://e.x/p.png)\n\n"
        "```python\ndef f():\n    return 1\n```"
    )
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert "href=" not in out and "src=" not in out
    assert "&lt;https://example.com/x&gt;" in out and "[image: pic]" in out
    assert '<pre class="hl"' in out or 'class="hl"' in out
    assert '<span class="k">def</span>' in out  # Pygments' keyword class


def test_export_refuses_a_non_empty_dest_it_did_not_write_unless_forced(own_store, tmp_path):
    home, _ = own_store
    dest = tmp_path / "site"
    dest.mkdir()
    (dest / "index.html").write_text("my own page")
    r = run_cli(["export", "html", str(dest), "--home", str(home)])
    one_error_line(r, 2, "not empty")
    assert [p.name for p in dest.iterdir()] == ["index.html"]
    assert (dest / "index.html").read_text() == "my own page"
    # --force writes into it; from then on the folder is a ctxkeep export: no --force needed again
    r = run_cli(["export", "html", str(dest), "--home", str(home), "--force"])
    assert r.exit_code == 0, r.output
    assert "my own page" not in (dest / "index.html").read_text()
    r = run_cli(["export", "html", str(dest), "--home", str(home)])
    assert r.exit_code == 0, r.output


def test_export_after_a_purge_removes_the_purged_sessions_stale_pages(store, tmp_path):
    dest = tmp_path / "site"
    first = site.export(site.ExportRequest(home=store, dest=dest, fmt="html"))
    (dest / "notes.txt").write_text("mine")  # not ctxkeep's: never removed
    empty = _empty(store)  # left out of the export (as `ctxkeep sessions` does)
    sessions = {sid: v for sid, v in _sessions(store).items() if sid not in empty}
    gone = next(sid for sid in sorted(sessions) if "/" not in sid)
    gone_page = dest / site.page_name(sessions[gone][0], gone, ".html")
    assert str(gone_page) in first.pages and gone_page.exists()
    r = run_cli(["purge", "--session", gone, "--yes", "--home", str(store)])
    assert r.exit_code == 0, r.output
    left = {sid: v for sid, v in _sessions(store).items() if sid not in empty}
    assert gone not in left
    second = site.export(site.ExportRequest(home=store, dest=dest, fmt="html"))
    assert not gone_page.exists()
    assert str(gone_page) in second.stale_removed
    # every page left is one of a stored session (plus the index), and the user's file stays
    expected = {site.page_name(a, sid, ".html") for sid, (a, _) in left.items()} | {"index.html"}
    assert {p.name for p in dest.glob("*.html")} == expected
    assert (dest / "notes.txt").read_text() == "mine"
    assert gone not in (dest / "index.html").read_text()


def test_export_markdown_refuses_an_html_export_folder(own_store, tmp_path):
    """`export markdown` into the folder of an `export html` (and the reverse) mixed two
    sites, two index pages, in one folder: refused with one line, nothing written; with
    --force both live there."""
    home, _ = own_store
    dest = tmp_path / "site"
    assert run_cli(["export", "html", str(dest), "--home", str(home)]).exit_code == 0
    before = sorted(p.name for p in dest.iterdir())
    r = run_cli(["export", "markdown", str(dest), "--home", str(home)])
    one_error_line(r, 2, "DEST holds a ctxkeep html export")
    assert "give another folder for the markdown export" in r.stderr
    assert sorted(p.name for p in dest.iterdir()) == before
    r = run_cli(["export", "markdown", str(dest), "--home", str(home), "--force"])
    assert r.exit_code == 0, r.output
    assert (dest / "index.md").exists() and (dest / "index.html").exists()
    md = tmp_path / "md"
    assert run_cli(["export", "markdown", str(md), "--home", str(home)]).exit_code == 0
    one_error_line(
        run_cli(["export", "html", str(md), "--home", str(home)]), 2, "holds a ctxkeep markdown export"
    )


def test_an_interrupted_export_is_continued_by_the_same_command(own_store, tmp_path):
    """newuser20 F10: Ctrl-C of `export html` after 566 pages said "run the command
    again", which then refused DEST ("not empty and holds no previous ctxkeep export"):
    the marker was written at the end only. It is written before the first page, so
    the same command goes on, and the finished DEST is as a whole export's."""
    import json as _json

    from ctxkeep.render.site import ExportRequest, export
    from ctxkeep.sinks.site_names import MARKER

    dest = tmp_path / "site"
    req = ExportRequest(home=own_store[0], dest=dest, fmt="html")

    def stop(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export(req, progress=stop)
    assert len(list(dest.glob("*.html"))) == 2 and not (dest / "index.html").exists()
    res = export(req)  # no --force: DEST is ctxkeep's
    assert (dest / "index.html").is_file() and len(res.pages) > 2
    listed = set(_json.loads((dest / MARKER).read_text())["pages"])
    assert listed == {p.name for p in dest.iterdir() if p.name != MARKER}
