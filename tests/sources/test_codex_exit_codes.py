"""Codex tool results with a non-zero exit code are errors for every reader: the
DuckDB ``is_error`` flag behind ``report tools``, ``show --session``'s error flag and
resume's "Last failure" (issue 22 item 6).

Expected values are read from the corpus rollouts here with ``json`` (not through
ctxkeep): a ``function_call_output`` whose output is the JSON string
``{"output", "metadata": {"exit_code": N}}`` (Codex 0.34–0.46) or plain text headed
``Exit code: N`` (0.5x+) or ``failed in sandbox … exit code: N``, with N not 0."""

from __future__ import annotations

import json
import re
import sqlite3

import duckdb
import pytest

from conftest import CORPUS_HOME
from ctxkeep.query import reports as R
from ctxkeep.query.resume import build_snapshot
from ctxkeep.query.sessions import conversation
from ctxkeep.sources.codex import parse_record

#: the rollout whose seven failures all carry their exit code only in metadata
METADATA_ONLY = "019a802a-aab1-7c31-9831-d2510c7a74a2"
_HEAD = re.compile(r"(?:Exit code: |failed in sandbox [^\n]{0,200}?exit code: )(-?\d+)")


def _failed_calls() -> set[str]:
    """The call ids of the corpus's failed Codex tool results (module doc)."""
    out = set()
    for f in sorted((CORPUS_HOME / ".codex").rglob("rollout-*.jsonl")):
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            p = r.get("payload") or {}
            if r.get("type") != "response_item" or p.get("type") != "function_call_output":
                continue
            o = p.get("output")
            if not isinstance(o, str):
                continue
            if o.startswith("{"):
                try:
                    code = (json.loads(o).get("metadata") or {}).get("exit_code")
                except (ValueError, AttributeError):
                    code = None
            else:
                m = _HEAD.match(o)
                code = int(m.group(1)) if m else None
            if isinstance(code, int) and code != 0:
                out.add(p["call_id"])
    return out


def test_the_parser_marks_a_metadata_exit_code():
    def result(output: str) -> str:
        rec = {
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "c", "output": output},
        }
        [e] = parse_record(rec, 0, "h", {"session_id": "s"}, "f")
        return e["text"]

    assert result('{"output":"no such file\\n","metadata":{"exit_code":127}}') == "[error] no such file\n"
    assert result('{"output":"ok\\n","metadata":{"exit_code":0}}') == "ok\n"
    assert (
        result("Exit code: 2\nWall time: 0 seconds\nOutput:\nls: x")
        == "[error] Exit code: 2\nWall time: 0 seconds\nOutput:\nls: x"
    )
    assert (
        result("Exit code: 0\nWall time: 0 seconds\nOutput:\n")
        == "Exit code: 0\nWall time: 0 seconds\nOutput:\n"
    )
    assert result(
        "failed in sandbox LinuxSeccomp with execution error: denied, exit code: 2, stdout: "
    ).startswith("[error] ")
    assert result("Plan updated") == "Plan updated"


def test_report_tools_counts_every_failed_call(corpus_store):
    want = _failed_calls()
    assert len(want) == 44  # counted in the corpus as the module doc says
    con = duckdb.connect(str(corpus_store[0] / "analytics.duckdb"), read_only=True)
    try:
        got = {
            r[0]
            for r in con.execute(
                "SELECT native_id FROM all_entries WHERE agent = 'codex' AND kind = 'tool_result' AND is_error"
            ).fetchall()
        }
        rows = R.tools_report(con, R.Filters("UTC", agents=("codex",))).rows
    finally:
        con.close()
    assert got == want
    assert sum(r.errors for r in rows) == 44


@pytest.fixture(scope="module")
def conn(corpus_store):
    c = sqlite3.connect(f"file:{corpus_store[0] / 'store.db'}?mode=ro", uri=True)
    yield c
    c.close()


def test_show_flags_and_resume_names_the_failures(conn):
    calls = [t for t in conversation(conn, METADATA_ONLY).turns if t.kind == "tool_call"]
    flagged = [t for t in calls if t.result_error]
    assert len(flagged) == 7  # the rollout's seven non-zero exit codes
    # the last of them: its call line names the command
    assert "ls .specify.specify/templates/tasks-template.md" in flagged[-1].text
    [item] = build_snapshot(conn, METADATA_ONLY, budget=4000).sections["failure"]
    assert "ls .specify.specify/templates/tasks-template.md" in item.text
    assert "No such file or directory" in item.text
