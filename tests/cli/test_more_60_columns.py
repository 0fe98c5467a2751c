"""The last wide commands fit a 60-column terminal (session 17's closing note: at
``COLUMNS=60`` ``secrets`` was 80 wide, ``sources --coverage`` 71, ``vault status`` 69,
``doctor`` 61, ``show --session`` 253 and ``resume`` 116 even at 80): tables leave out
their low-value columns and say so, texts fold between words, and what a user copies
(an id, a version, a record type) stays whole. 80 and 120 columns keep every column."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest


@pytest.fixture(scope="module")
def home(corpus_store):
    return str(corpus_store[0])


def _run(home: str, *args: str, columns: int | None = 60) -> tuple[str, str]:
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", TZ="UTC")
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = str(columns)
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, "--home", home],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    return r.stdout, r.stderr


def _fits(text: str, width: int) -> None:
    wide = [x for x in text.splitlines() if len(x) > width]
    assert not wide, f"{len(wide[0])} > {width}: {wide[0]!r}"


def _words(text: str) -> set[str]:
    return set(re.split(r"[\s,()]+", text))


def test_secrets_fits_60_columns_with_every_session_and_kind_whole(home):
    got = json.loads(_run(home, "secrets", "--json")[0])
    out, err = _run(home, "secrets")
    _fits(out, 60)
    _fits(err, 60)
    words = _words(out)
    assert set(got["kinds"]) <= words  # `url-credentials` never folded inside its name
    table = out.split("sessions to look at", 1)[1].splitlines()
    shown = [x.split() for x in table if x.split() and x.split()[0] in ("crush", "codex")]
    assert [(r[0], r[2]) for r in shown] == [(s["agent"], f"{s['values']:,}") for s in got["sessions"]]
    assert "not shown at 60 columns: first seen (--json has them)" in out
    assert "not shown at 60 columns: last seen (--json has them)" in out
    for w in (80, 120):  # every column
        wide, _ = _run(home, "secrets", columns=w)
        _fits(wide, w)
        assert "not shown" not in wide and wide.count("last seen") == 3 and wide.count("first seen") == 2


def test_coverage_fits_60_columns_with_every_version(home):
    rows = json.loads(_run(home, "sources", "--coverage", "--json")[0])["rows"]
    out, err = _run(home, "sources", "--coverage")
    _fits(out, 60)
    _fits(err, 60)
    lines = [x.split()[:2] for x in out.splitlines()]
    for r in rows:
        assert [r["agent"], r["agent_version"] or "?"] in lines
    assert "inter_agent_communication_metadata" in _words(out)  # named whole below the table
    assert "not underst." in out.split("not shown at 60 columns:", 1)[1]
    wide, _ = _run(home, "sources", "--coverage", columns=120)
    assert "not underst." in wide.splitlines()[1] and "not shown" not in wide


def test_vault_status_fits_60_columns(home):
    agents = json.loads(_run(home, "vault", "status", "--json")[0])["agents"]
    out, err = _run(home, "vault", "status")
    _fits(out, 60)
    _fits(err, 60)
    rows: dict = {}
    for x in out.splitlines():
        if x.split():
            rows.setdefault(x.split()[0], x.split())
    for a in agents:
        assert rows[a["agent"]][1:3] == [f"{a['files']:,}", f"{a['sessions']:,}"]
    assert "redacted" in out.split("not shown at 60 columns:", 1)[1]
    assert "redacted: values counted" not in out  # the column's note goes with it
    wide, _ = _run(home, "vault", "status", columns=120)
    _fits(wide, 120)
    assert "redacted: values counted" in wide and "not shown" not in wide


def test_doctor_fits_60_columns(home):
    out, err = _run(home, "doctor")
    _fits(out, 60)
    _fits(err, 60)
    # the coverage line (a neutral count since newuser24 F8, no type names) folds whole
    assert "not understood, kept as meta: `ctxkeep sources --coverage`" in " ".join(out.split())
    assert out.splitlines()[-1] == "the store is sound"
    # at 80 the details stay under their column
    wide, _ = _run(home, "doctor", columns=80)
    _fits(wide, 80)
    assert all(x.startswith(("store ", "ok ", "warning ", " " * 27, "the store")) for x in wide.splitlines())


@pytest.mark.parametrize("session", ["019fc8be", "ef958aa1", "c61729d4", "019985ca"])
def test_show_session_fits_60_columns_with_every_entry_id(home, session):
    conv = json.loads(_run(home, "show", "--session", session, "--json")[0])
    out, err = _run(home, "show", "--session", session)
    _fits(out, 60)
    _fits(err, 60)
    assert conv["session_id"] in _words(out)
    # (a message, a tool call and a meta record show their entry's id)
    ids = {t["entry_id"][:12] for t in conv["turns"] if t["kind"] in ("message", "tool_call", "meta")}
    assert ids and ids <= _words(out)


def test_show_session_piped_keeps_each_line_whole(home):
    """Without a terminal and COLUMNS, nothing is folded (one record per line)."""
    out, _ = _run(home, "show", "--session", "ef958aa1", columns=None)
    assert max(len(x) for x in out.splitlines()) > 500  # the first prompt, on one line


@pytest.mark.parametrize("session", ["ef958aa1", "c61729d4", "a20c5ed5", "019b2241"])
def test_resume_fits_the_terminal_and_piped_is_the_snapshot(home, session):
    snap = json.loads(_run(home, "resume", session, "--json")[0])
    for width in (60, 80):
        out, err = _run(home, "resume", session, columns=width)
        _fits(out, width)
        _fits(err, width)
        assert snap["session_id"] in _words(out.replace("`", " "))
        # the same words, folded
        assert (
            out.replace("\n> ", " ").split() == snap["markdown"].replace("\n> ", " ").split() or width == 60
        )
    piped, _ = _run(home, "resume", session, columns=None)
    assert piped == snap["markdown"]
    # at 80, a command to copy stays on one line
    out80, _ = _run(home, "resume", session, columns=80)
    assert f"`ctxkeep show --session {snap['session_id']}`" in out80
