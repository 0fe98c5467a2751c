"""The static pages at a phone's width, in Chromium (newuser19 F11): `report html`'s
usage, sessions and store pages and `export html`'s index scrolled sideways at 390 px
(the page 793, 1,018, 510 and 903 px wide: tables and charts wider than the screen
pushed the whole page). Each page is now the screen's width; a wide table or chart
scrolls in its own box, whole (nothing cut: the box's content is wider than the box)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: the page's width, and of its scroll boxes those whose content is wider than they are
MEASURE = """() => [document.documentElement.scrollWidth,
  [...document.querySelectorAll('.part, .wide, figure.chart')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).length]"""


@pytest.fixture(scope="module")
def pages(corpus_store, tmp_path_factory):
    if not CHROMIUM:
        pytest.skip("no chromium on PATH (Debian: apt-get install -y chromium)")
    pytest.importorskip("playwright")
    out = tmp_path_factory.mktemp("pages")
    # a copy: `export html` records its run in the store, and the corpus store is shared
    # read-only by the whole run (test_app_notebook counts its one run)
    store = out / "store"
    shutil.copytree(corpus_store[0], store, ignore=shutil.ignore_patterns("*.lock"))
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    for cmd in ("report", "export"):
        r = subprocess.run(
            [sys.executable, "-m", "ctxkeep", cmd, "html", str(out / cmd), "--home", str(store)],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-800:]
    return out


def test_every_page_fits_a_phone_and_its_wide_parts_scroll_whole(pages):
    from playwright.sync_api import sync_playwright

    files = [pages / "report" / f"{n}.html" for n in ("index", "usage", "sessions", "store")]
    files.append(pages / "export" / "index.html")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            pg = b.new_page(viewport={"width": 390, "height": 844})
            seen = {}
            for f in files:
                pg.goto(f.as_uri())
                seen[f"{f.parent.name}/{f.name}"] = pg.evaluate(MEASURE)
        finally:
            b.close()
    assert all(width == 390 for width, _ in seen.values()), seen
    # the wide tables and charts are there, in boxes that scroll (not squeezed or cut)
    for page in ("report/usage.html", "report/sessions.html", "export/index.html"):
        assert seen[page][1] >= 1, (page, seen[page])
