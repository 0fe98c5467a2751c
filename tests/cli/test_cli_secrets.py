"""``ctxkeep secrets`` (counts of what redaction took out, never values) and ``ctxkeep
secrets --scrub`` (the values redacted in the agents' own files through compress's
safe rewrite), on the planted home of ``fixtures.secrets.planted_home``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli_helpers import one_error_line
from compress_helpers import records
from ctxkeep.cli import app
from fixtures.secrets.planted_home import plant

runner = CliRunner()


@pytest.fixture
def planted(tmp_path):
    home = tmp_path / "home"
    claude, codex, gemini, values = plant(home)
    store = tmp_path / "ctxhome"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}
    r = runner.invoke(app, ["ingest"], env=e)
    assert r.exit_code == 0, r.output
    return e, claude, codex, gemini, values


def _run(e, *args):
    r = runner.invoke(app, list(args), env=e)
    assert r.exit_code == 0, (args, r.output)
    return r


@pytest.mark.slow
def test_report_counts_per_kind_agent_session_and_date_without_values(planted):
    e, claude, codex, gemini, values = planted
    r = _run(e, "secrets", "--json")
    d = json.loads(r.stdout)
    assert d["schema"] == 1
    assert set(d["agents"]) == {"claude-code", "codex", "gemini-cli"}
    # every agent's session got the .env text at least twice (user text and a tool input)
    for a in d["agents"].values():
        assert a["values"] >= 2 * 30 and a["sessions"] == 1
    assert d["kinds"]["digitalocean-pat"]["sessions"] == 3
    assert d["kinds"]["age-secret-key"]["first_seen"] <= d["kinds"]["age-secret-key"]["last_seen"]
    assert sum(d["kinds"][k]["values"] for k in d["kinds"]) == d["total"]
    assert sum(sum(k.values()) for k in d["dates"].values()) <= d["total"]
    assert "2026-08-03" in d["dates"] and "2025-12-03" in d["dates"]  # Codex and Gemini days
    files = {f for s in d["sessions"] for f in s["files"]}
    assert {str(claude), str(codex), str(gemini)} <= files
    assert d["quarantine"]["lines"] == 1 and d["quarantine"]["files"] == [str(claude)]
    assert "rotate" in d["note"]
    text = r.stdout + _run(e, "secrets").stdout
    assert [v for v in values if v in text] == []
    assert "sessions to look at" in _run(e, "secrets").stdout


@pytest.mark.slow
def test_scrub_dry_run_then_scrub_keeps_the_files_valid_and_the_store_whole(planted):
    e, claude, codex, gemini, values = planted
    before = {p: p.read_bytes() for p in (claude, codex, gemini)}
    d = json.loads(_run(e, "secrets", "--scrub", "--dry-run", "--json").stdout)
    assert d["dry_run"] and d["would_scrub"] == 3 and d["scrubbed"] == 0
    assert {p: p.read_bytes() for p in before} == before
    n_entries = json.loads(_run(e, "stats", "--json").stdout)["entries"]

    d = json.loads(_run(e, "secrets", "--scrub", "--json").stdout)
    assert d["scrubbed"] == 3 and d["failed"] == 0
    assert sorted(d["backups"]) == sorted(str(p) + ".backup" for p in (claude, codex, gemini))
    for p in (claude, codex):
        data = p.read_bytes()
        assert [v for v in values if v.encode() in data or json.dumps(v)[1:-1].encode() in data] == []
        # each line parses where it parsed (the agent can resume it); the malformed
        # line stays where it was, unparsable, its values redacted on its bytes (F12)
        new_lines, old_lines = data.splitlines(), before[p].splitlines()
        assert [_ok(x) for x in new_lines] == [_ok(x) for x in old_lines]
        assert p != claude or not all(_ok(x) for x in new_lines)
        recs = records(b"\n".join(x for x in new_lines if _ok(x)))
        old = [json.loads(x) for x in before[p].splitlines() if x.strip().startswith(b"{") and _ok(x)]
        assert [r.get("uuid") or r.get("type") for r in recs] == [r.get("uuid") or r.get("type") for r in old]
        assert (p.parent / (p.name + ".backup")).read_bytes() == before[p]
    g = gemini.read_bytes()
    assert [v for v in values if v.encode() in g or json.dumps(v)[1:-1].encode() in g] == []
    old_doc, new_doc = json.loads(before[gemini]), json.loads(g)
    assert [m["id"] for m in new_doc["messages"]] == [m["id"] for m in old_doc["messages"]]
    assert new_doc["sessionId"] == old_doc["sessionId"]
    # the store is unchanged by it and the next ingest adds nothing
    _run(e, "ingest")
    assert json.loads(_run(e, "stats", "--json").stdout)["entries"] == n_entries
    again = json.loads(_run(e, "secrets", "--scrub", "--json").stdout)
    assert again["scrubbed"] == 0
    # the vault holds each scrubbed file whole: deleted, each comes back as scrubbed
    scrubbed = {p: p.read_bytes() for p in (claude, codex, gemini)}
    for p in scrubbed:
        p.unlink()
    d = json.loads(_run(e, "vault", "restore", "--all-missing", "--json").stdout)
    assert d["not_restored"] == [] and {p: p.read_bytes() for p in scrubbed} == scrubbed


def _ok(raw: bytes) -> bool:
    try:
        json.loads(raw)
        return True
    except ValueError:
        return False


def test_dry_run_without_scrub_is_a_usage_error(tmp_path):
    r = runner.invoke(app, ["secrets", "--dry-run"], env={"CTXKEEP_HOME": str(tmp_path)})
    one_error_line(r, 2, "--scrub")


@pytest.mark.slow
def test_tables_say_how_many_kinds_they_left_out(planted):
    # a row lists its first kinds, then "+N more": the kinds it shows and N add up to
    # what --json has (a row of 5 values listed 4 kinds and said nothing: newuser17 F5)
    e = planted[0]
    d = json.loads(_run(e, "secrets", "--json").stdout)
    text = runner.invoke(app, ["secrets"], env={**e, "COLUMNS": "400"}).stdout
    for agent, a in d["agents"].items():
        row = next(ln for ln in text.splitlines() if ln.strip().startswith(agent))
        assert len(a["kinds"]) > 4
        assert f"+{len(a['kinds']) - 4} more" in row, row
