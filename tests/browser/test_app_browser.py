"""`ctxkeep ui` in Chromium: the app (a marimo notebook served by `marimo run`) started
on the corpus store, driven by Playwright on Debian's chromium (Playwright's own
browser download cannot work offline). Screenshots are written to the test's tmp dir,
and to $CTXKEEP_SCREENSHOT_DIR when set (CI artifacts)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import q

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
EF95 = "ef958aa1-0e93-49f0-bb71-150f63befcd1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_url(corpus_store):
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    pytest.importorskip("playwright")
    home, _ = corpus_store
    port = _free_port()
    exe = Path(sys.executable).parent / "ctxkeep"
    proc = subprocess.Popen(
        [str(exe), "ui", "--no-browser", "--port", str(port), "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the app did not start: {proc.stderr.read().decode()[-2000:]}")
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def browser(app_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    yield pg
    pg.close()


def _shot(page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    if os.environ.get("CTXKEEP_SCREENSHOT_DIR"):
        d = Path(os.environ["CTXKEEP_SCREENSHOT_DIR"])
        d.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, d / path.name)
    assert path.stat().st_size > 20_000  # a drawn page, not a blank one
    return path


def _visible(page, text: str, timeout: float = 90_000):
    loc = page.locator(f"text={text} >> visible=true").first
    loc.wait_for(timeout=timeout)
    return loc


def _charts_drawn(page, n: int = 6) -> None:
    """Wait until the overview's charts are drawn (Vega has replaced marimo's 'Loading
    chart' placeholders with at least ``n`` canvases or SVGs)."""
    from playwright.sync_api import expect

    expect(page.locator("text=Loading chart")).to_have_count(0, timeout=90_000)
    expect(page.locator("canvas, svg.marks").nth(n - 1)).to_be_attached(timeout=30_000)
    page.wait_for_timeout(1000)  # the last frame painted


def test_app_serves_each_page(page, app_url, corpus_store, tmp_path):
    home, _ = corpus_store
    page.goto(app_url)
    responses = q(home, "SELECT count(*) FROM usage WHERE ts IS NOT NULL")[0][0]
    _visible(page, f"{responses:,} API responses")
    _charts_drawn(page)
    _shot(page, tmp_path, "app-overview")
    page.get_by_role("tab", name="Sessions").click()
    _visible(page, "pick one to read it")
    _visible(page, "ef95")
    _shot(page, tmp_path, "app-sessions")
    page.get_by_role("tab", name="Search").click()
    _visible(page, "Type words to search")
    page.get_by_role("tab", name="Store").click()
    _visible(page, "Sources and coverage")
    _shot(page, tmp_path, "app-store")


def test_transcript_shows_its_first_prompt_and_a_folded_tool_call(page, app_url, tmp_path):
    page.goto(f"{app_url}?tab=Sessions&session={EF95}")
    _visible(page, "Transcript ·")
    frame = page.frame_locator("iframe >> visible=true").first
    frame.locator("text=OK, we're going to make a little experiment here").first.wait_for(timeout=60_000)
    tool = frame.locator("details.tool").first
    assert tool.evaluate("d => d.open") is False  # folded
    assert "result" in tool.locator("summary").inner_text()
    tool.locator("summary").click()
    assert tool.evaluate("d => d.open") is True
    _shot(page, tmp_path, "app-transcript")
    # its sub-agent's link opens the sub-agent's transcript in the app's window
    kid = frame.locator("div.subagent a").first
    kid.click()
    page.wait_for_url("**session=agent-*", timeout=60_000)
    sub = urllib.parse.parse_qs(page.url.split("?", 1)[1])["session"][0]
    heading = _visible(page, "Transcript ·")
    assert sub in heading.inner_text(), heading.inner_text()
    assert len(page.frames) == 2  # the app and one transcript frame: not the app inside the frame


def test_a_long_transcript_opens_a_page_at_a_time(page, app_url, tmp_path):
    """The corpus's longest session (Codex rollout c61729d4, 1,487 entries) is drawn
    300 turns at a time; "next ›" opens the next page."""
    page.goto(f"{app_url}?tab=Sessions&session=c61729d4-da6d-46a4-9a29-ec2c614e5e23")
    _visible(page, "Turns 1–300 of")
    frame = page.frame_locator("iframe >> visible=true").first
    frame.locator("main.transcript").wait_for(state="attached", timeout=60_000)
    first = frame.locator("main.transcript > [id^=e-]").first.get_attribute("id")
    page.locator("a.page >> text=next ›").first.click()
    _visible(page, "Turns 301–")
    frame = page.frame_locator("iframe >> visible=true").first
    frame.locator("main.transcript").wait_for(state="attached", timeout=60_000)
    assert "page=2" in page.url
    assert frame.locator(f"[id='{first}']").count() == 0  # another page's turns
    page.locator("a.page >> visible=true").first.scroll_into_view_if_needed()
    _shot(page, tmp_path, "app-transcript-pages")


def test_search_finds_a_corpus_phrase_and_opens_its_transcript(page, app_url, corpus_store, tmp_path):
    home, _ = corpus_store
    page.goto(f"{app_url}?tab=Search")
    box = page.locator("input[type=text] >> visible=true").first
    box.wait_for(timeout=90_000)
    box.fill("jupyter notebook")
    box.press("Enter")
    _visible(page, "hits for")
    _shot(page, tmp_path, "app-search")
    hit = page.locator("li.hit a >> visible=true").first
    # a link looks like one, and the hits are set apart (newuser24 F20: the body text's
    # colour rgb(15, 23, 42), no underline, hits run together)
    looks = hit.evaluate("e => [getComputedStyle(e).color, getComputedStyle(e).textDecorationLine]")
    assert looks == ["rgb(29, 78, 216)", "underline"], looks
    gap = page.locator("li.hit >> visible=true").first.evaluate(
        "e => [getComputedStyle(e).marginBottom, getComputedStyle(e).borderBottomStyle]"
    )
    assert gap[1] == "solid" and float(gap[0].removesuffix("px")) >= 8, gap
    href = hit.get_attribute("href")
    assert "session=d3ad4cdc-5657-435d-98fa-0035d53e383d" in href  # the ai-music session
    hit.click()
    _visible(page, "Transcript ·")
    frame = page.frame_locator("iframe >> visible=true").first
    focus = frame.locator(".focus").first
    focus.wait_for(timeout=60_000)
    assert "jupyter notebook" in focus.inner_text().lower()
    _shot(page, tmp_path, "app-search-hit")


def _hit_place(focus) -> dict:
    """Where the marked entry ``focus`` (a locator inside the transcript's frame) is, in
    the app's page: ``top``/``bottom`` in the browser's viewport (its
    getBoundingClientRect plus the frame's), ``depth`` its top below the top of the
    app's page (the scroll offsets of the frame's ancestors added back), ``viewport``
    the browser viewport's height, ``cls`` its classes, ``id`` its id."""
    return focus.evaluate(
        """e => {
        const f = window.frameElement, fr = f.getBoundingClientRect(), r = e.getBoundingClientRect();
        let scrolled = 0;
        for (let n = f.parentElement; n; n = n.parentElement) scrolled += n.scrollTop;
        return {top: fr.top + r.top, bottom: fr.top + r.bottom, depth: fr.top + r.top + scrolled,
                viewport: window.parent.innerHeight, cls: e.className, id: e.id};
    }"""
    )


def test_a_search_hit_far_down_its_transcript_is_scrolled_into_view(page, app_url, corpus_store, tmp_path):
    """The hit's link opens the transcript's page, marks the entry and scrolls the app's
    page to it. The hit is the 16th of the ai-music session's 19 messages (after ~50
    folded tool calls), drawn far below the fold: before, the transcript's script
    scrolled inside its frame, which marimo grows to its content (nothing to scroll),
    and the hit stayed ~6,000 px below the top."""
    home, _ = corpus_store
    page.goto(f"{app_url}?tab=Search")
    box = page.locator("input[type=text] >> visible=true").first
    box.wait_for(timeout=90_000)
    box.fill('"church-like sound"')
    box.press("Enter")
    _visible(page, "hits for")
    hit = page.locator("li.hit a >> visible=true").first
    href = hit.get_attribute("href") or ""
    assert "session=d3ad4cdc-5657-435d-98fa-0035d53e383d" in href
    entry = urllib.parse.parse_qs(href.lstrip("?"))["entry"][0]
    hit.click()
    _visible(page, "Transcript ·")
    frame = page.frame_locator("iframe >> visible=true").first
    focus = frame.locator(".focus").first
    focus.wait_for(timeout=60_000)
    assert "church-like sound" in focus.inner_text()
    deadline = time.monotonic() + 20
    while True:  # the app lays its page out after the frame loads: the script follows
        at = _hit_place(focus)
        inside = 0 <= at["top"] < at["viewport"]
        if inside or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    assert at["id"] == f"e-{entry}" and "focus" in at["cls"].split()  # the hit's own entry, marked
    assert at["depth"] > 2 * at["viewport"], at  # drawn far below the fold: the page had to scroll
    assert inside, at  # and it did: the hit is inside the viewport
    _shot(page, tmp_path, "app-search-hit-scrolled")


def test_a_filter_changes_the_overview(page, app_url, corpus_store):
    """Choosing a project changes the summary line and the charts (the cost per
    project keeps one bar: its chart shrinks by the other projects' bands)."""
    home, _ = corpus_store
    page.goto(app_url)
    total = q(home, "SELECT count(*) FROM usage WHERE ts IS NOT NULL")[0][0]
    _visible(page, f"{total:,} API responses")
    _charts_drawn(page)
    projects = q(home, "SELECT count(DISTINCT coalesce(project_dir, '')) FROM usage WHERE ts IS NOT NULL")[0][
        0
    ]
    assert projects > 5
    project_chart = page.locator("canvas, svg.marks").nth(2)
    project_chart.wait_for(state="visible", timeout=60_000)
    before = project_chart.bounding_box()["height"]
    assert before >= 16 * projects
    project = "/Users/chip/dev/ai-music"
    # the dropdown names it by the overview's short label (whole paths ran off a phone's screen)
    page.locator("select >> visible=true").first.select_option(label="…/dev/ai-music")
    n = q(
        home,
        "SELECT count(*) FROM usage WHERE ts IS NOT NULL AND session_id IN "
        "(SELECT DISTINCT session_id FROM entries WHERE project_dir = ?)",
        project,
    )[0][0]
    assert 0 < n < total
    _visible(page, f"{n:,} API responses")
    # the charts follow: "Cost per project" (the 3rd chart, a band of 16 px per project)
    # is drawn again with the one project left
    # while Vega redraws, the chart is replaced: for a moment nothing is laid out there
    # (bounding_box() is None), so a missing box is "not yet", like an unchanged height
    deadline = time.monotonic() + 60
    after = None
    while time.monotonic() < deadline:
        box = project_chart.bounding_box()
        after = box["height"] if box else None
        if after is not None and after != before:
            break
        page.wait_for_timeout(200)
    assert after is not None and before - after >= 16 * (projects - 1) / 2, (before, after, projects)


def test_a_token_guards_the_app(corpus_store):
    """--allow-remote --token: without the token a browser is sent to the login page;
    with it (?access_token=…) it gets the app. Binds loopback here (what a remote host
    would see is the same server)."""
    import http.cookiejar

    home, _ = corpus_store
    port = _free_port()
    exe = Path(sys.executable).parent / "ctxkeep"
    token = "t0ken-for-the-test"
    proc = subprocess.Popen(
        [
            str(exe),
            "ui",
            "--no-browser",
            "--port",
            str(port),
            "--home",
            str(home),
            "--allow-remote",
            "--token",
            token,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    try:
        bare = urllib.request.build_opener(NoRedirect)
        deadline = time.monotonic() + 120
        while True:
            try:
                bare.open(url, timeout=2)
            except urllib.error.HTTPError as e:
                status, where = e.code, e.headers.get("location", "")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert status in (302, 303, 307) and where.startswith("/auth/login")
        with_cookies = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        page = with_cookies.open(f"{url}?access_token={token}", timeout=10)
        assert page.status == 200 and "/auth/login" not in page.url
        # the token is never on the marimo server's command line (it reads it from stdin)
        servers = [
            ln
            for ln in subprocess.run(
                ["ps", "-ww", "-eo", "args"], capture_output=True, text=True
            ).stdout.splitlines()
            if "marimo -y -q run" in ln and str(port) in ln
        ]
        assert servers and not [ln for ln in servers if token in ln]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)


def test_a_phone_width_shows_every_chart_whole_and_the_session_figures(browser, app_url, tmp_path):
    """Session 17 in Chromium: at 390 px the overview's charts (520 px wide, the blocks
    1,080) ran past the screen's edge, cut; at 1280 px the sessions table's tokens and
    cost were out of view (right of the title and the whole project path)."""
    pg = browser.new_page(viewport={"width": 390, "height": 2400})
    try:
        pg.goto(app_url)
        _charts_drawn(pg)
        _shot(pg, tmp_path, "app-overview-390")
        past = pg.evaluate(
            """() => [...document.querySelectorAll('marimo-mime-renderer, canvas, svg.marks')]
                 .map(e => e.getBoundingClientRect()).filter(r => r.width > 0 && r.right > 391).length"""
        )
        assert past == 0
        # the filters too: the project dropdown listed whole paths and ran 300 px past the
        # edge (session 17); it lists the overview's short labels now
        selects = pg.locator("select >> visible=true")
        assert selects.count() >= 2
        for i in range(selects.count()):
            box = selects.nth(i).bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (i, box)
        # the sessions `ctxkeep sessions` lists (35), not the 3 empty ones with them
        _visible(pg, "35 sessions")
    finally:
        pg.close()
    pg = browser.new_page(viewport={"width": 1280, "height": 1000})
    try:
        pg.goto(f"{app_url}?tab=Sessions")
        head = pg.locator("th >> text=cost").first
        head.wait_for(timeout=90_000)
        box = head.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280
    finally:
        pg.close()
