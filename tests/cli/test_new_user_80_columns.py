"""What a new user found at 80 columns (session 13's trial, note13.md "Left"): plain
lines of `sources` 90-100 characters and `sources --all` up to 393, `stats` up to 143,
`doctor` 14 of 15 lines up to 166, a 544-character `--agent nosuch` error, tables that
folded ids and paths into 13-16-character pieces (`compress --check`, `secrets`'
sessions, `report projects`), `help retention` cutting option names, and bare
`ctxkeep` exiting 2. Each command runs as a whole process with COLUMNS=80 on the corpus
store: no line wider than 80, and the ids, paths and figures a person copies from it
(from the command's own --json) are on screen whole."""

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


@pytest.fixture(scope="module")
def homes(corpus_store, tmp_path_factory):
    """(store home, a private copy of the corpus home as $HOME)."""
    agent_home = tmp_path_factory.mktemp("agent-home") / "home"
    shutil.copytree(CORPUS_HOME, agent_home)
    return str(corpus_store[0]), str(agent_home)


def _run(store: str | None, *args: str, home: str, columns: int | None = 80, code: int = 0):
    env = dict(os.environ, CTXKEEP_IDLE_SECONDS="0", TZ="UTC", HOME=home)
    env.pop("CTXKEEP_HOME", None)
    env.pop("COLUMNS", None)
    if columns is not None:  # None: piped with no COLUMNS, as `ctxkeep x --help | less`
        env["COLUMNS"] = str(columns)
    tail = ["--home", store] if store else []
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", *args, *tail], capture_output=True, text=True, env=env, timeout=180
    )
    assert r.returncode == code, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    return r


def _fits(text: str, columns: int = 80) -> list[str]:
    lines = text.splitlines()
    assert lines, "printed nothing"
    wide = [x for x in lines if cell_len(x) > columns]
    assert not wide, f"{len(wide)} lines wider than {columns}: {wide[:2]}"
    return lines


def _words(text: str) -> set[str]:
    return {w.strip(",;()") for w in text.split()}


def test_sources_and_sources_all_fit_and_keep_figures_and_paths(homes):
    store, home = homes
    rows = json.loads(_run(store, "sources", "--json", home=home).stdout)["rows"]
    for args in (["sources"], ["sources", "--all"]):
        text = _run(store, *args, home=home).stdout
        lines = _fits(text)
        for r in rows:
            if not r["files"] and args == ["sources"]:
                continue
            head = next((x for x in lines if x.startswith(r["agent"] + ":")), None)
            assert head is not None, r["agent"]
            if r["files"]:
                assert f"{r['files']:,} file" in head and f"{r['entries']:,} entr" in text, r["agent"]
                where = "~" + r["where"][len(home) :] if r["where"].startswith(home) else r["where"]
                # the folder whole, with ~ (a note may follow it)
                assert any(x == "  " + where or x.startswith(f"  {where} (") for x in lines), where
    every = _run(store, "sources", "--all", home=home).stdout
    assert "nothing found" in every and "393" not in every


def test_stats_fits_and_keeps_every_figure(homes):
    store, home = homes
    data = json.loads(_run(store, "stats", "--json", home=home).stdout)
    text = _run(store, "stats", home=home).stdout
    _fits(text)
    words = _words(text)
    u = data["usage"]
    for k in ("responses", "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
        assert f"{u[k]:,}" in words, k
    assert f"{data['contents']['token_estimate']:,}" in words
    assert f"{data['contents']['distinct']:,}" in words


def test_doctor_fits_and_names_every_check(homes):
    store, home = homes
    data = json.loads(_run(store, "doctor", "--json", home=home).stdout)
    lines = _fits(_run(store, "doctor", home=home).stdout)
    assert lines[0] == f"store {store}" and lines[-1] == "the store is sound"
    checks = [x.split()[1] for x in lines[1:-1] if x[:1] != " "]
    assert checks == [f["check"] for f in data["findings"]]
    # each finding's detail whole, folded between words
    body = " ".join(" ".join(lines).split())
    for f in data["findings"]:
        assert " ".join(f["detail"].split()) in body, f["detail"]


@pytest.mark.parametrize(("command", "near"), [("sessions", None), ("search", "codex")])
def test_an_unknown_agent_is_one_short_line(homes, command, near):
    store, home = homes
    args = [command, *(["word"] if command == "search" else []), "--agent", "codx" if near else "nosuch"]
    r = _run(store, *args, home=home, code=2)
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and cell_len(lines[0]) <= 80, lines
    if near:
        assert lines[0] == "error: unknown agent 'codx' (--agent) - did you mean 'codex'?"
    else:
        assert lines[0].startswith("error: unknown agent 'nosuch' (--agent) - `ctxkeep sources --all` lists")


def test_compress_check_keeps_each_file_name_whole_on_a_line(homes):
    store, home = homes
    rep = json.loads(_run(store, "compress", "--check", "--json", home=home).stdout)
    lines = _fits(_run(store, "compress", "--check", "--all", home=home).stdout)
    for f in rep["files"]:
        name = Path(f["path"]).name
        i = lines.index(name)  # a line of its own, whole
        figures = lines[i + 1].split()
        assert figures[:3] == [f["agent"], f"{f['bytes'] / 1024:,.0f}", f"{f['lines']:,}"], (
            name,
            lines[i + 1],
        )
    wide = _run(store, "compress", "--check", "--all", home=home, columns=200).stdout
    assert any(
        x.split()[:2] == [Path(rep["files"][0]["path"]).name, rep["files"][0]["agent"]]
        for x in wide.splitlines()
    )


def test_compress_check_fits_60_columns_and_names_what_it_leaves_out(homes):
    """newuser23 F9: at COLUMNS=60 the header and figures were 67-71 columns wide; now
    only a file name (never folded) may be wider, and the columns left out are named."""
    store, home = homes
    rep = json.loads(_run(store, "compress", "--check", "--json", home=home).stdout)
    names = {Path(f["path"]).name for f in rep["files"]}
    lines = _run(store, "compress", "--check", "--all", home=home, columns=60).stdout.splitlines()
    wide = [x for x in lines if cell_len(x) > 60 and x not in names]
    assert not wide, wide
    head = next(x for x in lines if x.split()[:2] == ["agent", "KiB"])
    assert head.split() == ["agent", "KiB", "lines", "status", "active"]
    assert "not shown at 60 columns: backups (--json has them)" in lines
    # every file's name whole, its figures under it
    for f in rep["files"]:
        i = lines.index(Path(f["path"]).name)
        assert lines[i + 1].split()[:3] == [f["agent"], f"{f['bytes'] / 1024:,.0f}", f"{f['lines']:,}"]


def test_secrets_sessions_show_short_ids_and_whole_paths(homes):
    store, home = homes
    rep = json.loads(_run(store, "secrets", "--json", home=home).stdout)
    hits = json.loads(_run(store, "sessions", "--json", "--limit", "500", home=home).stdout)["sessions"]
    short = {s["session_id"]: s["short_id"] for s in hits}
    lines = _fits(_run(store, "secrets", home=home).stdout)
    start = next(i for i, x in enumerate(lines) if x == "sessions to look at")
    rows = [x.split() for x in lines[start + 3 :] if x[:1] != " " and len(x.split()) > 4]
    assert rep["sessions"]
    for s, row in zip(rep["sessions"], rows, strict=False):
        assert row[:3] == [s["agent"], short[s["session_id"]], f"{s['values']:,}"], row
        f = s["files"][0]
        assert row[-1].startswith(("~", "…")) and f.endswith(row[-1].lstrip("~…").lstrip("/")), (row, f)


def test_report_projects_keeps_paths_and_costs_unfolded(homes):
    store, home = homes
    rep = json.loads(_run(store, "report", "projects", "-z", "UTC", "--json", home=home).stdout)
    r = _run(store, "report", "projects", "-z", "UTC", home=home)
    lines = _fits(r.stdout)
    _fits(r.stderr)  # the notes, folded
    firsts = [x.split()[0] for x in lines[3:] if x[:1] not in (" ", "─") and x.split()]
    for row in rep["rows"]:
        project = row["period"] or "(none)"
        shown = next(x for x in firsts if x == project or x.startswith("…") and project.endswith(x[1:]))
        assert len(shown) <= 30 or shown == project
        if row["cost_usd"] is not None:
            assert f"${row['cost_usd']:,.2f}" in _words(r.stdout)


def test_help_of_a_command_cuts_no_option_name(homes):
    store, home = homes
    text = _run(None, "help", "retention", home=home).stdout
    _fits(text)
    assert "…" not in text
    for opt in ("--archive-after-days", "--delete-archives-after-days", "--generation-max-age-days"):
        assert opt in text.split(), opt
    # (the config table's name written out: "[vault]" was swallowed by Rich markup in
    # --help, newuser17 F21)
    assert "retention.delete_archives_after_days" in text and "(config.toml's vault table)" in " ".join(
        text.split()
    )
    _fits(_run(None, "retention", "--help", home=home).stdout)
    assert "--archive-after-days" in _run(None, "retention", "--help", home=home, columns=200).stdout


def test_help_piped_without_columns_cuts_no_option_name(homes):
    """newuser18 F12: piped, no COLUMNS: Rich drew its panels at 80 columns and cut
    ``--archive-after-d…`` because the width looked at was the pipe's (unbounded)."""
    _, home = homes
    text = _run(None, "retention", "--help", home=home, columns=None).stdout
    _fits(text)
    assert "…" not in text
    for opt in ("--archive-after-days", "--delete-archives-after-days", "--generation-max-age-days"):
        assert opt in text.split(), opt


def test_bare_ctxkeep_prints_short_help_and_exits_0(homes):
    _, home = homes
    r = _run(None, home=home)  # no arguments at all
    lines = _fits(r.stdout)
    assert r.stderr == "" and lines[0].startswith("ctxkeep keeps")
    assert "Usage: ctxkeep COMMAND" in r.stdout and "ctxkeep ingest" in r.stdout
    assert len(lines) <= 20


def test_search_hits_fit_with_ids_whole(homes):
    """A hit's snippet line was ~300 columns, its head ~100 (newuser14 F1)."""
    store, home = homes
    hits = json.loads(_run(store, "search", "connection refused", "--json", home=home).stdout)["hits"]
    lines = _fits(_run(store, "search", "connection refused", home=home).stdout)
    assert hits
    heads = [x.split()[0] for x in lines if not x.startswith(" ")]
    assert heads == [h["entry_id"] for h in hits]  # each id whole, first on its head line


def test_ingest_summary_fits(homes, tmp_path):
    """The per-agent line (~130 columns) and each format drift line (~150) (newuser14 F1)."""
    _, home = homes
    r = _run(str(tmp_path / "store"), "ingest", "--no-progress", home=home)
    lines = _fits(r.stdout)
    flat = " ".join(r.stdout.split())
    assert flat.startswith("ingested 3,890 new entries from 28 of 28 files") and "records)" in flat
    assert "aider: 32, claude-code: 986, codex: 2,229" in flat
    # a fresh store's first read: no "format drift", one neutral line (newuser24 F8)
    assert not any("format drift" in x for x in lines)
    assert re.search(
        r"\b\d+ records of \d+ types not understood, kept as meta: `ctxkeep sources --coverage`", flat
    )
