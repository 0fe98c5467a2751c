"""``ctxkeep compress`` on the command line (Typer CliRunner; no Prefect except the
one flow test)."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS_HOME
from ctxkeep.cli import app
from ctxkeep.sinks.files import STORE_DB

ROLLOUT = ".codex/sessions/2025/11/13/rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2.jsonl"
BIG_ROLLOUT = (
    ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
)
runner = CliRunner()


@pytest.fixture
def env(tmp_path):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".codex").mkdir()
    shutil.copytree(CORPUS_HOME / ".codex" / "sessions", home / ".codex" / "sessions")
    old = time.time() - 3600
    for p in home.rglob("*.jsonl"):
        os.utime(p, (old, old))
    store = tmp_path / "store"
    return {"HOME": str(home), "CTXKEEP_HOME": str(store)}, home, store


def _invoke(args, env):
    return runner.invoke(app, args, env=env)


def test_check_json_changes_nothing(env):
    e, home, store = env
    (store).mkdir()
    (store / "config.toml").write_text("[compress]\nmax_lines = 250\n")
    before = {p: p.read_bytes() for p in home.rglob("*.jsonl")}
    r = _invoke(["compress", "--check", "--json"], e)
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    st = {Path(f["path"]).name[:29]: (f["status"], f["exceeds"], f["lines"]) for f in rep["files"]}
    assert st["rollout-2025-10-31T19-02-58-c"] == ("EXCEEDS", ["size", "lines"], 1612)
    assert st["rollout-2025-11-13T18-21-11-0"] == ("EXCEEDS", ["lines"], 309)
    assert st["rollout-2025-10-31T18-36-16-f"] == ("OK", [], 2)
    assert rep["exceeding"] == 2 and len(rep["files"]) == 6
    assert before == {p: p.read_bytes() for p in home.rglob("*.jsonl")}
    assert sorted(x.name for x in store.iterdir()) == ["config.toml"]  # no store created
    r = _invoke(["compress", "--check"], e)
    assert r.exit_code == 0 and "2 of 6 files exceed a threshold" in r.stdout


def test_check_lists_only_the_files_over_a_threshold_and_plans_nothing(env, monkeypatch):
    """newuser16 F7: `--check` took 26-29 s on a 400 MB home (each file over a threshold
    planned as a dry run: the strategies) and printed every file, the OK ones too."""
    import ctxkeep.maintenance.compress.run as run

    def no_plan(*a, **k):
        raise AssertionError("--check planned a compress")

    monkeypatch.setattr(run, "compress_file", no_plan)
    e, home, store = env
    store.mkdir()
    (store / "config.toml").write_text("[compress]\nmax_lines = 250\n")
    rep = json.loads(_invoke(["compress", "--check", "--json"], e).stdout)
    assert len(rep["files"]) == 6 and rep["exceeding"] == 2  # --json: every file
    assert not [f for f in rep["files"] if "savings" in f or "would" in f]
    e80 = {**e, "COLUMNS": "200"}
    r = _invoke(["compress", "--check"], e80)
    assert r.exit_code == 0, r.output
    names = {Path(f["path"]).name: f["status"] for f in rep["files"]}
    shown = [n for n in names if n in r.stdout]
    assert sorted(shown) == sorted(n for n, st in names.items() if st == "EXCEEDS")
    lines = r.stdout.strip().splitlines()
    assert lines[-2:] == [
        "2 of 6 files exceed a threshold; 4 OK files not listed: --all lists them",
        "what compress would cut: `ctxkeep compress --dry-run`; full paths: --json",
    ]
    r = _invoke(["compress", "--check", "--all"], e80)
    assert all(n in r.stdout for n in names) and "not listed" not in r.stdout
    r = _invoke(["compress", "--all"], e)
    assert r.exit_code == 2 and "--all goes with --check" in r.output


@pytest.fixture
def columns80(monkeypatch):
    """Commands run as in a terminal 80 columns wide (the consoles are made again)."""
    import ctxkeep.cli as cli

    monkeypatch.setenv("COLUMNS", "80")
    cli.out._console = cli.err._console = None
    yield
    cli.out._console = cli.err._console = None


@pytest.mark.usefixtures("columns80")
def test_compress_says_one_line_per_file_and_what_the_backups_keep(env):
    """newuser16 F11: 8 lines per file by default (2,409 lines for 308 files), and
    nothing said the backups keep the originals on disk for backup_max_age_days."""
    import datetime as dt

    e, home, store = env
    store.mkdir()
    (store / "config.toml").write_text("[compress]\nmax_lines = 250\nbackup_max_age_days = 7\n")
    assert _invoke(["ingest", "--no-progress"], e).exit_code == 0
    until = (dt.datetime.now(dt.UTC) + dt.timedelta(days=7)).strftime("%Y-%m-%d")
    for args, verb, keep in (
        (["--dry-run"], "would compress", "would keep"),
        (["--no-prefect", "--no-progress"], "compressed", "keep"),
    ):
        r = _invoke(["compress", *args], e)
        assert r.exit_code == 0, r.output
        lines = r.stdout.splitlines()
        per_file = [x for x in lines if x.startswith(f"{verb} ") and ".jsonl: " in x]
        assert len(per_file) == 2 and all(len(x) <= 80 and x.endswith(" KB") for x in per_file), lines
        assert len(lines) <= 2 + 2 + 2, lines  # the files, the summary, the backups (each folded once)
        text = " ".join(r.stdout.split())
        assert (
            f"the backups {keep} the originals, 2.3 MB more on disk beside the files, until {until}" in text
        )
        assert "backup_max_age_days 7" in text
    assert len(list(home.rglob("*.backup"))) == 2


def test_dry_run_then_compress_then_restore(env):
    e, home, store = env
    f = home / ROLLOUT
    orig = f.read_bytes()
    r = _invoke(["compress", str(f), "--keep-messages", "5", "--dry-run", "--json"], e)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["dry_run"] and d["would_compress"] == 1 and d["files"][0]["bytes_after"] < 30_000
    assert f.read_bytes() == orig
    r = _invoke(["compress", str(f), "--keep-messages", "5", "--no-prefect", "--no-progress", "-v"], e)
    assert r.exit_code == 0, r.output
    assert "compressed 1 of 1 files: 412,256 →" in " ".join(r.stdout.split())
    assert len(f.read_bytes()) < 30_000 and Path(str(f) + ".backup").read_bytes() == orig
    r = _invoke(["compress", "--restore", str(f), "--json"], e)
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["bytes"] == len(orig) and res["reactivated"] > 200
    assert f.read_bytes() == orig


def test_rollout_with_a_secret_compresses_and_restores(env):
    """The user's sequence on the corpus rollout whose line 1591 holds a secret: with the
    vault on, its ingest names that line's entries by the redacted line's hash, which
    the dry run's check and the restore's check once missed (the dry run said "the
    store holds 1611 of 1612 lines", the restore refused even after ingest and with
    --force, and its entries would have stayed archived)."""
    e, home, store = env
    f = home / BIG_ROLLOUT
    orig = f.read_bytes()
    assert _invoke(["ingest", "--no-progress"], e).exit_code == 0
    r = _invoke(["compress", str(f), "--dry-run", "--json"], e)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)["files"][0]
    assert d["verified"]["missing"] == 0 and d["verified"]["lines"] == 1612
    assert not [n for n in d["notes"] if "store holds" in n]
    r = _invoke(["compress", str(f), "--no-prefect", "--no-progress", "-v"], e)
    assert r.exit_code == 0, r.output
    assert "1,919,704 → 192,239 bytes" in " ".join(r.stdout.split())
    assert _invoke(["ingest", "--no-progress"], e).exit_code == 0
    r = _invoke(["compress", "--restore", str(f), "--json"], e)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["bytes"] == len(orig)
    assert f.read_bytes() == orig == Path(str(f) + ".backup").read_bytes()
    with sqlite3.connect(store / STORE_DB) as db:
        rows = db.execute(
            "SELECT status, count(*) FROM entries WHERE source_path = ? GROUP BY 1", (str(f),)
        ).fetchall()
    assert dict(rows).get("archived", 0) == 0 and dict(rows)["active"] > 1000


def test_errors_are_one_line(env):
    e, home, store = env
    f = home / ROLLOUT
    r = _invoke(["compress", "--restore", str(f)], e)
    assert r.exit_code == 1
    out = " ".join(r.output.split())
    assert out.startswith("error: no backup to restore") and out.count("error:") == 1
    assert "`ctxkeep compress --check` lists files and their backups" in out
    assert "Traceback" not in r.output
    r = _invoke(["compress", "--check", "--restore", str(f)], e)
    assert r.exit_code == 2 and "--check and --restore exclude each other" in r.output
    # --check changes nothing: --dry-run adds nothing to it, and is no reason to complain
    r = _invoke(["compress", "--check", "--dry-run", "--json"], e)
    assert r.exit_code == 0 and "restore" not in r.output.split("{", 1)[0]
    assert json.loads(r.output)["schema"] == 1
    r = _invoke(["compress", "--keep-messages", "0"], e)
    assert r.exit_code == 2


def test_active_file_is_refused_with_the_reason(env):
    e, home, store = env
    f = home / ROLLOUT
    os.utime(f)  # just modified: the agent may be writing
    r = _invoke(["compress", str(f), "--no-prefect", "--no-progress", "--json"], e)
    assert r.exit_code == 0
    d = json.loads(r.stdout)["files"][0]
    assert d["status"] == "refused" and "active_minutes" in d["reason"]


@pytest.mark.slow
def test_prefect_flow_compresses(env, monkeypatch):
    """The Prefect flow (temporary local server: 15–30 s here) on one file."""
    e, home, store = env
    store.mkdir()
    for k, v in e.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("PREFECT_HOME", str(store / "prefect"))
    from ctxkeep.flows.prefect_env import configure_prefect

    configure_prefect(store)
    from ctxkeep.flows.compress import compress_flow

    f = home / ROLLOUT
    orig = f.read_bytes()
    s = compress_flow(str(store), paths=[str(f)], keep_messages=5)
    assert s["compressed"] == 1 and s["files"][0]["messages_after"] >= 5
    assert s["bytes_before"] == 412256 and s["bytes_after"] < 30_000
    assert s["tokens_after"] < s["tokens_before"]
    assert Path(str(f) + ".backup").read_bytes() == orig


def test_a_named_file_that_is_no_session_is_an_error(env, tmp_path):
    """`compress FILE` with a file that is no agent's session warned, said "0 of 0
    files" and exited 0 (newuser19 F19): nothing the user asked for was done. It is one
    error line and exit 1, as `secrets --scrub FILE` (newuser18 F7)."""
    e, home, _ = env
    other = tmp_path / "passwd"
    other.write_text("root:x:0:0:root:/root:/bin/bash\n")
    for extra in (["--dry-run"], []):
        r = _invoke(["compress", str(other), *extra], e)
        assert r.exit_code == 1, r.output
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        joined = " ".join(" ".join(lines).split())
        assert lines[0].startswith("error: ") and f"{other}: not a session file" in joined, r.stderr
        assert "0 of 0 files" not in r.output
    # a session file named beside it is compressed as before: the other one stays a warning
    rollout = next(home.rglob("rollout-*.jsonl"))
    r = _invoke(["compress", str(other), str(rollout), "--dry-run"], e)
    assert r.exit_code == 0, r.output
    assert "warning:" in r.stderr and f"{other}: not a session file" in " ".join(r.stderr.split())


def test_report_html_compression_table_fits_the_page(env, tmp_path):
    """newuser23 F12: store.html's "Compression savings" table (11 columns, full paths)
    ran past the right edge at 1280 px: the file's name, and no "after" columns."""
    e, home, store = env
    assert _invoke(["ingest"], e).exit_code == 0
    r = _invoke(["compress"], e)
    assert r.exit_code == 0, r.output
    r = _invoke(["report", "html", str(tmp_path / "rep")], e)
    assert r.exit_code == 0, r.output
    page = (tmp_path / "rep" / "store.html").read_text()
    part = page[page.index("Compression savings</h2>") :]
    part = part[: part.index("</table>")]
    head = re.findall(r"<th>([^<]*)</th>", part)
    assert head == [
        "run id", "started", "status", "file", "agent", "bytes before", "bytes saved", "tokens before", "tokens saved",
    ]  # fmt: skip
    files = [re.findall(r"<td[^>]*>([^<]*)</td>", row)[3] for row in part.split("<tr>")[2:]]
    assert sorted(files) == sorted([Path(ROLLOUT).name, Path(BIG_ROLLOUT).name])


def test_a_skipped_file_says_why_without_v(env):
    """newuser24 F11: `compress FILE` said only `skipped …/rollout-….jsonl`; the reason
    (too few messages to cut) was shown with -v alone."""
    e, home, store = env
    assert _invoke(["ingest", "--no-progress"], e).exit_code == 0
    r = _invoke(["compress", str(home / ROLLOUT), "--keep-messages", "100000", "--dry-run"], e)
    assert r.exit_code == 0, r.output
    line = next(x for x in r.stdout.splitlines() if x.startswith("skipped "))
    assert re.search(
        r"rollout-2025-11-13T18-21-11-019a802a-aab1-7c31-9831-d2510c7a74a2\.jsonl: "
        r"[0-9,]+ messages, not more than the 100000 to keep$",
        line,
    ), line
