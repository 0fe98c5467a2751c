"""App benchmark: how long each page of ``ctxkeep ui`` takes to become usable in
Chromium, next to the CLI answering the same question (the peer column), on one store.

Build a large store once (2 GB: ``--mb 2000``), e.g.:

    python3 /work/shared/tools/scale_corpus.py /tmp/abench/home --mb 2000 --unique-text
    HOME=/tmp/abench/home CTXKEEP_HOME=/tmp/abench/store .venv/bin/ctxkeep ingest --no-prefect

then run:  uv run python tests/bench/bench_app.py /tmp/abench/store

Pages (seconds from navigation until the view's content is visible): Overview (its
summary line and every chart drawn), Sessions (the table), a transcript (the largest
session's page in its frame), Search (the hits of a word). Peers: ``ctxkeep report
daily --json``, ``ctxkeep sessions --json``, ``ctxkeep show --session ID``, ``ctxkeep
search WORD`` (whole process). Needs Debian's chromium and Playwright (dev group).
Prints figures (median of ``RUNS``, default 3); asserts nothing (target: every page
under 2 s on a 2 GB store).
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

RUNS = int(os.environ.get("RUNS", "3"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
EXE = Path(sys.executable).parent / "ctxkeep"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args: str) -> float:
    t = time.perf_counter()
    subprocess.run([str(EXE), *args], capture_output=True, check=True)
    return time.perf_counter() - t


def _largest_session(store: Path) -> str:
    import sqlite3

    conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
    try:
        return conn.execute(
            "SELECT session_id FROM entries GROUP BY session_id ORDER BY count(*) DESC LIMIT 1"
        ).fetchone()[0]
    finally:
        conn.close()


def main(store: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    word = os.environ.get("WORD", "error")
    sid = _largest_session(store)
    port = _port()
    url = f"http://127.0.0.1:{port}/"
    proc = subprocess.Popen(
        [str(EXE), "ui", "--no-browser", "--port", str(port), "--home", str(store)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    t0 = time.perf_counter()
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            break
        except OSError:
            time.sleep(0.2)
    print(f"server up in {time.perf_counter() - t0:.1f} s (store {store})")
    pages = {
        "overview": (url, lambda pg: (expect(pg.locator("text=API responses >> visible=true").first).to_be_visible(timeout=600_000), expect(pg.locator("text=Loading chart")).to_have_count(0, timeout=600_000))),
        "sessions": (url + "?tab=Sessions", lambda pg: expect(pg.locator("text=pick one to read it >> visible=true").first).to_be_visible(timeout=600_000)),
        "transcript": (url + f"?tab=Sessions&session={sid}", lambda pg: expect(pg.frame_locator("iframe >> visible=true").first.locator("main.transcript")).to_be_attached(timeout=600_000)),
        "search": (url + f"?tab=Search&q={word}", lambda pg: expect(pg.locator("text=hits for >> visible=true").first).to_be_visible(timeout=600_000)),
    }  # fmt: skip
    peers = {
        "overview": ("report", "daily", "--json", "--home", str(store)),
        "sessions": ("sessions", "--json", "--home", str(store)),
        "transcript": ("show", "--session", sid, "--home", str(store)),
        "search": ("search", word, "--home", str(store)),
    }
    times: dict[str, list[float]] = {k: [] for k in pages}
    cli: dict[str, list[float]] = {k: [] for k in pages}
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
            for _ in range(RUNS):
                for name, (target, ready) in pages.items():
                    pg = b.new_page(viewport={"width": 1400, "height": 1000})
                    t = time.perf_counter()
                    pg.goto(target)
                    ready(pg)
                    times[name].append(time.perf_counter() - t)
                    pg.close()
                    cli[name].append(_cli(*peers[name]))
            b.close()
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    print(f"{'page':<12}{'app (s)':>10}{'CLI peer (s)':>14}   peer command")
    for name in pages:
        print(
            f"{name:<12}{statistics.median(times[name]):>10.2f}{statistics.median(cli[name]):>14.2f}   "
            f"ctxkeep {' '.join(peers[name][:2])}"
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
