"""Output in a terminal that is not UTF-8 degrades, never a traceback (newuser17 F4):
a Latin-1 terminal (``PYTHONIOENCODING=latin-1``) and a plain ASCII one (``LC_ALL=C``
without Python's UTF-8 coercion) get ``...``, ``->`` and ``?`` for what they cannot show;
a query typed there in UTF-8 (``请你分析``) still finds its entry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TEXT = "notebook \u2192 \u8bf7\u4f60\u5206\u6790 the plan \u2026 caf\u00e9 " + "word " * 120


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("loc")
    proj = root / "home" / ".claude" / "projects" / "-tmp-l"
    proj.mkdir(parents=True)
    recs = [
        {"type": "user", "uuid": "u1", "sessionId": "loca1", "timestamp": "2025-01-01T00:00:01Z",
         "cwd": "/tmp/l", "message": {"role": "user", "content": TEXT}},
        {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "loca1",
         "timestamp": "2025-01-01T00:00:02Z", "cwd": "/tmp/l",
         "message": {"role": "assistant", "content": [{"type": "text", "text": "done \u2192 " + TEXT}]}},
    ]  # fmt: skip
    (proj / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    base = {"HOME": str(root / "home"), "CTXKEEP_HOME": str(root / "store"), "PATH": "/usr/bin:/bin"}

    def run(*a, env=None):
        return subprocess.run(
            [sys.executable, "-m", "ctxkeep", *a],
            capture_output=True,
            env={**base, **(env or {})},
            timeout=120,
        )

    assert run("ingest", "--agent", "claude-code").returncode == 0
    return run


LATIN1 = {"PYTHONIOENCODING": "latin-1"}
ASCII = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0", "COLUMNS": "200"}


@pytest.mark.parametrize("env", [LATIN1, ASCII], ids=["latin-1", "ascii"])
@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "-n", "3"),
        ("show", "--session", "loca1"),
        ("search", "notebook", "-n", "2"),
        ("resume", "loca1"),
    ],
)
def test_output_degrades_without_a_traceback(world, env, args):
    p = world(*args, env=env)
    assert p.returncode == 0, p.stderr.decode("latin-1")[-600:]
    assert b"Traceback" not in p.stderr and b"UnicodeEncodeError" not in p.stderr
    if args[0] == "show":
        assert b"notebook -> " in p.stdout, p.stdout[:600]  # an arrow the terminal cannot show
    if args[0] == "resume":
        assert b"00:00 -> 2025" in p.stdout, p.stdout[:600]  # the snapshot's time span
    if env is LATIN1 and args[0] == "show":
        assert "caf\u00e9".encode("latin-1") in p.stdout  # what Latin-1 can show stays as it is


def test_a_utf8_query_in_an_ascii_terminal_finds_its_entry(world):
    p = world("search", "\u8bf7\u4f60\u5206\u6790", "--json", env=ASCII)
    assert p.returncode == 0, p.stderr
    hits = json.loads(p.stdout)["hits"]
    assert hits and "loca1" in json.dumps(hits[0]), hits
