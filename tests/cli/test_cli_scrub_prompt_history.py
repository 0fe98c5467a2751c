"""``secrets --scrub`` redacts the agents' prompt-history files (newuser18 F3): a key
pasted in a prompt is written to ``~/.claude/history.jsonl``, ``~/.codex/history.jsonl``
or ``~/.gemini/tmp/<hash>/logs.json`` as well as to the transcript, and stayed there,
unreported. The lines are the shapes the trial appended (the agents' own formats:
``maintenance.prompt_history``)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from test_cli_scrub_skipped import run80
from typer.testing import CliRunner

from ctxkeep.cli import app
from fixtures.bad_input import line, rec

runner = CliRunner()
STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"  # fake
GHP = "ghp_" + "uJ8FgE2t0u1jOfto9ro4SAAnehAuuvYNnU04"  # fake
SLACK = "xoxp-" + "1234567890-1234567890-1234567890123-abcdef0123456789abcdef0123456789"  # fake


def _home(tmp_path: Path) -> tuple[dict, dict[str, Path]]:
    home = tmp_path / "home"
    proj = home / ".claude/projects/-tmp-p"
    proj.mkdir(parents=True)
    (proj / "00000000-0000-4000-8000-0000000000bb.jsonl").write_bytes(line(rec(1, "hello")))
    f = {
        "claude": home / ".claude/history.jsonl",
        "codex": home / ".codex/history.jsonl",
        "gemini": home / ".gemini/tmp/0123abcd/logs.json",
    }
    f["codex"].parent.mkdir(parents=True)
    f["gemini"].parent.mkdir(parents=True)
    f["claude"].write_text(
        json.dumps({"display": "hello", "pastedContents": {}, "timestamp": 1749384000000, "project": "/tmp/p"})
        + "\n"
        + json.dumps({"display": f"use STRIPE_SECRET_KEY={STRIPE} for the webhook test", "pastedContents": {},
                      "timestamp": 1749384060000, "project": "/tmp/p"})
        + "\n"
    )  # fmt: skip
    f["codex"].write_text(
        json.dumps({"session_id": "019a802a-aab1-7c31-9831-d2510c7a74a2", "ts": 1749384000, "text": f"export GH_TOKEN={GHP}"})
        + "\n"
    )  # fmt: skip
    f["gemini"].write_text(
        json.dumps([{"sessionId": "s1", "messageId": 0, "type": "user", "message": f"slack token {SLACK}",
                     "timestamp": "2025-06-08T12:00:00.000Z"}], indent=2)
    )  # fmt: skip
    t = time.time() - 86400
    for p in home.rglob("*"):
        if p.is_file():
            os.utime(p, (t, t))
    e = {
        "HOME": str(home),
        "CTXKEEP_HOME": str(tmp_path / "store"),
        "CTXKEEP_IDLE_SECONDS": "0",
        "COLUMNS": "80",
    }
    r = runner.invoke(app, ["ingest"], env=e)
    assert r.exit_code == 0, r.output
    return e, f


def test_scrub_redacts_the_prompt_histories_in_place_with_a_backup(tmp_path):
    e, f = _home(tmp_path)
    mtimes = {k: p.stat().st_mtime_ns for k, p in f.items()}
    r = run80(e, "secrets", "--scrub", "--dry-run")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert "would scrub 2 values in 2 files; 1 skipped" in flat, r.stdout
    for p in ("~/.claude/history.jsonl: 1 value", "~/.codex/history.jsonl: 1 value"):
        assert p in flat, r.stdout
    # Gemini CLI's array: named with its kind and line, to edit by hand
    assert (
        "logs.json: a JSON array ctxkeep does not rewrite: slack-token 1 on line 6; edit it out by hand, "
        "then rotate the keys"
    ) in flat, r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout
    d = json.loads(runner.invoke(app, ["secrets", "--scrub", "--json"], env=e).stdout)
    assert d["scrubbed"] == 2 and d["values"] == {"stripe-key": 1, "github-token": 1}, d
    by = {x["path"]: x for x in d["files"]}
    assert by[str(f["claude"])]["lines"] == [2]
    for k in ("claude", "codex"):
        data = f[k].read_text()
        assert STRIPE not in data and GHP not in data, (k, data)
        assert f[k].stat().st_mtime_ns == mtimes[k]
        assert Path(str(f[k]) + ".backup").exists()
    assert SLACK in f["gemini"].read_text() and f["gemini"].stat().st_mtime_ns == mtimes["gemini"]
    claude = [json.loads(x) for x in f["claude"].read_text().splitlines()]
    assert claude[1]["display"] == "use STRIPE_SECRET_KEY=[REDACTED:stripe-key] for the webhook test"
    assert claude[0]["display"] == "hello"  # the other lines byte for byte
    # no store bookkeeping: nothing ingested from them
    c = sqlite3.connect(Path(e["CTXKEEP_HOME"]) / "store.db")
    try:
        n = c.execute(
            "SELECT count(*) FROM watermarks WHERE path LIKE '%history.jsonl' OR path LIKE '%logs.json'"
        )
        assert n.fetchone()[0] == 0
    finally:
        c.close()
    again = json.loads(runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json"], env=e).stdout)
    assert again["would_scrub"] == 0 and again["skipped"] == 1, again


def test_secrets_reports_the_values_in_the_prompt_histories(tmp_path):
    e, f = _home(tmp_path)
    d = json.loads(runner.invoke(app, ["secrets", "--json"], env=e).stdout)
    got = [
        (Path(h["path"]).parent.name, h["agent"], h["values"], h["lines"], h["scrubbed_in_place"])
        for h in d["prompt_histories"]
    ]
    assert got == [
        (".claude", "claude-code", {"stripe-key": 1}, [2], True),
        (".codex", "codex", {"github-token": 1}, [1], True),
        ("0123abcd", "gemini-cli", {"slack-token": 1}, [6], False),
    ]
    r = run80(e, "secrets")
    assert r.returncode == 0, r.stderr
    flat = " ".join(r.stdout.split())
    assert (
        "the agents' prompt histories (not in the store; every prompt typed reaches them): "
        "~/.claude/history.jsonl: stripe-key 1 on line 2 ~/.codex/history.jsonl: github-token 1 on line 1 "
        "~/.gemini/tmp/0123abcd/logs.json: slack-token 1 on line 6 `ctxkeep secrets --scrub` redacts them "
        "in place (not ~/.gemini/tmp/0123abcd/logs.json: edit it by hand); rotate the keys"
    ) in flat, r.stdout
    assert max(map(len, r.stdout.splitlines())) <= 80, r.stdout


def test_a_named_prompt_history_is_scrubbed_once(tmp_path):
    e, f = _home(tmp_path)
    r = runner.invoke(app, ["secrets", "--scrub", "--dry-run", "--json", str(f["claude"])], env=e)
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [(x["path"], x["status"]) for x in d["files"]] == [(str(f["claude"]), "would-scrub")], d
    assert d["values"] == {"stripe-key": 1}
