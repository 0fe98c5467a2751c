"""Terminal escape sequences in session text never reach the terminal raw: ``search``,
``show --session``, ``resume`` and ``quarantine show`` drop formatting sequences
(colours, cursor moves, erasing: ``transforms.terminal_codes``) and print every other
C0/C1 control character (but newline and tab) and DEL escaped (``\\x1b``); ``--json``
keeps them exact."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

EVIL = "evil \x1b]0;TITLE\x07 clear \x1b[2J clip \x1b]52;c;ZXZpbA==\x07 c1 \x9b31m del \x7f end escapetoken"
RAW = (b"\x1b", b"\x07", b"\xc2\x9b", b"\x7f")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("esc")
    proj = root / "home" / ".claude" / "projects" / "-tmp-e"
    proj.mkdir(parents=True)
    rec = {"type": "user", "uuid": "u1", "sessionId": "esc1", "timestamp": "2025-01-01T00:00:01Z",
           "cwd": "/tmp/e", "message": {"role": "user", "content": EVIL}}  # fmt: skip
    (proj / "s.jsonl").write_text(json.dumps(rec) + "\n" + "{broken \x1b]0;QTITLE\x07 line\n")
    env = {"HOME": str(root / "home"), "CTXKEEP_HOME": str(root / "store"), "PATH": "/usr/bin:/bin"}

    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "ctxkeep", *a], capture_output=True, env=env, timeout=120
        )

    assert run("ingest", "--agent", "claude-code").returncode == 0
    return run


@pytest.mark.parametrize(
    "args",
    [
        ("search", "escapetoken"),
        ("show", "--session", "esc1"),
        ("resume", "esc1"),
        ("quarantine", "show", "1"),
    ],
)
def test_plain_output_shows_control_characters_escaped(world, args):
    p = world(*args)
    assert p.returncode == 0, p.stderr
    both = p.stdout + p.stderr
    for b in RAW:
        assert b not in both, (args, b, both[:400])
    assert b"\\x1b]0;" in both  # a control string: shown, escaped, not dropped
    if args[0] != "quarantine":
        assert b"\\x1b]52;c;ZXZpbA==" in p.stdout and b"\\x7f" in p.stdout
        # formatting only (erase the screen, a colour): dropped, the words around kept
        # (newuser19 F3)
        assert b"2J" not in p.stdout and b"31m" not in p.stdout
        assert b"clear  clip" in p.stdout and b"c1  del" in p.stdout


def test_json_keeps_the_text_exact(world):
    p = world("search", "escapetoken", "--json")
    assert not any(b in p.stdout for b in RAW)  # JSON escapes, never raw
    hit = json.loads(p.stdout)["hits"][0]
    # the snippet is an excerpt for display: its formatting sequences dropped (newuser19 F3)
    shown = " ".join(EVIL.replace("\x1b[2J", "").replace("\x9b31m", "").split())  # blanks collapsed
    assert shown.startswith(hit["snippet"].rstrip("…")) or hit["snippet"] == shown
    p = world("quarantine", "show", "1", "--json")
    assert json.loads(p.stdout)["raw_text"] == "{broken \x1b]0;QTITLE\x07 line"


def test_safe_text_and_bytes():
    from ctxkeep.cli import safe_bytes, safe_text

    assert safe_text("a\tb\nc\x1b[0m\x00\r\x85é") == "a\tb\nc\\x00\\x0d\\x85é"
    assert safe_text("t\x1b]0;T\x07 \x1b") == "t\\x1b]0;T\\x07 \\x1b"
    assert (
        safe_bytes("a\tb\n\x1b\x9b é —".encode() + b"\xff") == b"a\tb\n\\x1b\\x9b \xc3\xa9 \xe2\x80\x94\xff"
    )
