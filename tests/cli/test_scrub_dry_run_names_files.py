"""``secrets --scrub --dry-run`` names each file it would rewrite in place, with its
value count (newuser17 F10: ``would scrub 2 values in 2 files`` named neither of the
agents' files; only the refused and the skipped ones)."""

from __future__ import annotations

import os
from types import SimpleNamespace as NS


def test_a_dry_run_lists_each_file_it_would_rewrite(monkeypatch, capsys):
    from ctxkeep import cli
    from ctxkeep.cli.secrets import _print_scrub

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(cli.out, "_console", None)
    user = os.path.expanduser("~")
    res = NS(
        dry_run=True, values={"password": 1, "aws-access-key": 2}, would_scrub=2, scrubbed=0, skipped=1, failed=0,
        files=[
            NS(status="would-scrub", path=f"{user}/.claude/projects/-p/a.jsonl", reason="", values={"password": 1}),
            NS(status="would-scrub", path=f"{user}/.codex/b.jsonl", reason="", values={"aws-access-key": 2}),
            NS(status="clean", path=f"{user}/c.jsonl", reason="", values={}),
            NS(status="skipped", path=f"{user}/x.db", reason="not a JSON or JSONL session file", values={}),
        ],
        note="", backups=[],
    )  # fmt: skip
    _print_scrub(res)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "would scrub 3 values in 2 files; 1 skipped, 0 failed"
    assert "would scrub: ~/.claude/projects/-p/a.jsonl: 1 value" in lines
    assert "would scrub: ~/.codex/b.jsonl: 2 values" in lines
    assert not any("c.jsonl" in x for x in lines)  # a clean file is not news
    assert "skipped: ~/x.db: not a JSON or JSONL session file" in lines


def test_a_real_run_does_not_repeat_them(monkeypatch, capsys):
    from ctxkeep import cli
    from ctxkeep.cli.secrets import _print_scrub

    monkeypatch.setattr(cli.out, "_console", None)
    res = NS(
        dry_run=False, values={"password": 1}, would_scrub=0, scrubbed=1, skipped=0, failed=0,
        files=[NS(status="scrubbed", path="/u/a.jsonl", reason="", values={"password": 1})],
        note="", backups=[],
    )  # fmt: skip
    _print_scrub(res)
    assert capsys.readouterr().out.splitlines() == ["scrubbed 1 value in 1 file; 0 skipped, 0 failed"]
