"""Figures a new user met that contradicted each other or said nothing (closing note
12, "What a new user found"): a compress plan left a file over both thresholds
without a word and printed "9,310 -> 9,349 tokens" beside "saved 1,613 tok"; a
garbage file in an agent's folder raised "format drift ... 0.0% parsed"; `vault
status` advised an ingest for a last line that never ends; `secrets` mixed table
styles at 80 columns; three commands gave three counts of redacted values.

Every run uses a copy of the corpus home (``home_copy``) or handmade files in tmp;
/work/shared is never written."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from typer.testing import CliRunner

from ctxkeep.cli import app

runner = CliRunner()

#: Claude Code v1.0.43 with a pasted 1,046,940-byte base64 image line (SOURCES.md)
IMAGE_FILE = (
    ".claude/projects/-Users-dain-workspace-claude-code-log-sample/0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl"
)
#: Claude Code v1.0.98 with 405 of 438 lines inline sidechains (SOURCES.md): keeping the
#: newest 100 messages keeps most of it
SIDECHAINS = ".claude/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl"


def _env(home: Path, store: Path) -> dict:
    return {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0", "COLUMNS": "200"}


def _age(home: Path, seconds: float = 3600) -> None:
    """Every agent file of ``home`` last changed ``seconds`` ago (not active)."""
    old = time.time() - seconds
    for p in home.rglob("*"):
        if p.is_file():
            os.utime(p, (old, old))


def _ok(args: list[str], env: dict):
    r = runner.invoke(app, args, env=env)
    assert r.exit_code == 0, (args, r.output)
    return r


# ---------------------------------------------------------------- (1) compress figures


def test_dry_run_says_when_a_file_stays_over_both_thresholds(home_copy, tmp_path):
    _age(home_copy)
    store = tmp_path / "store"
    e = _env(home_copy, store)
    path = home_copy / SIDECHAINS
    args = ["compress", "--dry-run", str(path), "--keep-messages", "100"]
    rep = json.loads(_ok([*args, "--json"], e).stdout)
    (f,) = rep["files"]
    assert f["status"] == "would-compress"
    # the defaults (compress.max_size_kb 500, max_lines 300) against the planned file
    assert f["bytes_after"] > 500 * 1024 and f["lines_after"] > 300, f
    assert f["still_exceeds"] == ["size", "lines"]
    assert rep["still_exceeding"] == 1
    text = _ok(args, e).output
    line = next(x for x in text.splitlines() if "still over" in x)
    assert "max_size_kb 500" in line and "max_lines 300" in line
    assert f"{f['lines_after']:,} lines" in line and "--keep-messages" in line
    # fewer messages kept: the plan gets under both thresholds, and nothing is said
    rep = json.loads(_ok(["compress", "--dry-run", str(path), "--keep-messages", "5", "--json"], e).stdout)
    (f,) = rep["files"]
    assert f["lines_after"] <= 300 and f["bytes_after"] <= 500 * 1024
    assert (f["still_exceeds"], f["still_over"], rep["still_exceeding"]) == ([], "", 0)


def test_token_figures_of_a_plan_add_up_and_images_are_counted_apart(home_copy, tmp_path):
    _age(home_copy)
    e = _env(home_copy, tmp_path / "store")
    path = home_copy / IMAGE_FILE
    rep = json.loads(_ok(["compress", "--dry-run", str(path), "--json"], e).stdout)
    (f,) = rep["files"]
    sv = f["savings"]
    # the strategies' tokens are the file's tokens before minus after, whatever the sign
    assert sum(v["tokens"] for v in sv.values()) == f["tokens_before"] - f["tokens_after"]
    # the pasted image's tokens are apart: the placeholder text made the texts longer
    img = sv["inline"]["image_tokens"]
    assert img > 1000 and f["tokens_after"] > f["tokens_before"]
    assert rep["image_tokens"] == img
    text = _ok(["compress", "--dry-run", str(path)], e).output
    figures = f"{f['tokens_before']:,} → {f['tokens_after']:,} text tokens"
    assert figures in text and f"images of {img:,} tokens moved" in text
    inline = sv["inline"]
    assert f"inline {inline['bytes']:,} B / {inline['tokens']:,} text tok + {img:,} image tok" in text
    # no token figure without saying what it counts
    assert {m.group(1) for m in re.finditer(r"\d (\w+ )?tok\b", text)} == {"text ", "image "}


# ---------------------------------------------------------------- (3) a garbage file is no drift


def test_a_garbage_file_in_an_agent_folder_is_unreadable_not_format_drift(home_copy, tmp_path):
    e = _env(home_copy, tmp_path / "store")
    _ok(["ingest"], e)
    junk = home_copy / ".claude" / "projects" / "-Users-chip-dev-ai-music" / "notes.jsonl"
    junk.write_bytes(b"".join(b"\x00\xff garbage line %d \x1b[0m not json\n" % i for i in range(12)))
    r = _ok(["ingest", "--json"], e)
    s = json.loads(r.stdout)
    assert s["quarantined"] == 12
    assert s["coverage_alerts"] == []  # the agent's format did not change
    assert (s["files_unreadable"], s["unreadable"]) == (1, [str(junk)])
    junk.write_bytes(junk.read_bytes() + b"more garbage\n")
    text = _ok(["ingest"], e).output
    assert "format drift" not in text and "parsed" not in text
    assert "1 file unreadable (quarantined): not in its agent's format" in text and str(junk) in text
