"""End to end: ``hooks install`` into a temporary HOME that already has settings, then
the installed ``SessionStart`` command, read back from settings.json and run as Claude
Code runs it (through a shell, the hook input JSON on stdin), prints the resume snapshot
of a corpus session on stdout; then uninstall gives back the user's bytes.

Runs once the hook runtime (``ctxkeep.hooks.runtime``) is in the tree."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT, corpus
from ctxkeep.cli import app

pytestmark = [
    pytest.mark.slow,  # starts a subprocess
    pytest.mark.skipif(
        importlib.util.find_spec("ctxkeep.hooks.runtime") is None,
        reason="the hook runtime is not in the tree yet",
    ),
]

SESSION = ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


def last_user_prompt(path: Path) -> tuple[str, str, str]:
    """(session id, cwd, the last prompt the user typed) read from the transcript: user
    records that are not meta, not a sub-agent's, and not slash-command records."""
    sid = cwd = last = None
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        sid, cwd = r.get("sessionId", sid), r.get("cwd", cwd)
        if r.get("type") != "user" or r.get("isMeta") or r.get("isSidechain"):
            continue
        c = r["message"]["content"]
        texts = [c] if isinstance(c, str) else [x.get("text", "") for x in c if x.get("type") == "text"]
        for t in texts:
            if t and not t.lstrip().startswith(("<command-", "<local-command")):
                last = t
    return sid, cwd, last


def test_installed_session_start_prints_the_snapshot(store, tmp_path):
    transcript = corpus(SESSION)
    sid, cwd, prompt = last_user_prompt(transcript)
    assert prompt and prompt.startswith("Well, the subagents seem")  # read by hand from the file

    home = tmp_path / "home"
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    user = {"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo stop"}]}]}}
    settings.write_text(json.dumps(user, indent=2) + "\n")
    before = settings.read_bytes()
    env = {**os.environ, "HOME": str(home), "CTXKEEP_HOME": str(store)}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    r = CliRunner().invoke(app, ["hooks", "install", "--agent", "claude-code"], env=env)
    assert r.exit_code == 0, r.output

    groups = json.loads(settings.read_text())["hooks"]["SessionStart"]
    (group,) = [g for g in groups if g.get("matcher") == "compact|resume"]
    command = group["hooks"][0]["command"]
    assert " hook claude-code session-start" in command
    hook_input = {
        "session_id": sid,
        "transcript_path": str(transcript),
        "cwd": cwd,
        "hook_event_name": "SessionStart",
        "source": "resume",
    }
    t0 = time.perf_counter()
    p = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(hook_input),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    seconds = time.perf_counter() - t0
    print(f"SessionStart hook: {seconds:.2f} s, {len(p.stdout):,} chars on stdout")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    try:  # the JSON form: hookSpecificOutput.additionalContext
        out = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    except (ValueError, KeyError, TypeError):
        pass
    assert prompt[:40] in out

    r = CliRunner().invoke(app, ["hooks", "uninstall", "--agent", "claude-code"], env=env)
    assert r.exit_code == 0 and settings.read_bytes() == before
