"""The coverage ledger (issue 25, item 3): per agent and agent version, the records
read, parsed, quarantined and the record types not understood, filled by ingest,
shown by ``sources --coverage``, and the drift it reports (ingest summary, doctor).

The session files are written here: Claude Code lines in the v2 shape (``version``
on every record, as the corpus' real files v1.0.17-v2.1.114 carry it), one record
type (``hologram``) that no Claude Code version writes, so it stands for a type a
future version adds."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from conftest import ingest
from ctxkeep.cli import app

SECRET = "sk-ant-api03-" + "A1b2C3d4E5" * 8


def _line(version: str, n: int, rtype: str = "user", **extra) -> str:
    rec = {
        "type": rtype,
        "uuid": f"{version.replace('.', '')}-{rtype}-{n:04d}-0000-0000-000000000000",
        "parentUuid": None,
        "sessionId": "5e55i0n0-0000-4000-8000-000000000001",
        "cwd": "/work/demo",
        "version": version,
        "timestamp": f"2026-03-01T10:{n:02d}:00.000Z",
    }
    if rtype in ("user", "assistant"):
        rec["message"] = {"role": rtype, "content": f"message {n} of {version}"}
    rec.update(extra)
    return json.dumps(rec) + "\n"


def _home(tmp_path: Path, files: dict[str, str]) -> Path:
    home = tmp_path / "home"
    proj = home / ".claude" / "projects" / "-work-demo"
    proj.mkdir(parents=True)
    for name, text in files.items():
        (proj / name).write_text(text)
    return home


def _ledger(store: Path) -> dict[str, dict]:
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(store, readonly=True)
    try:
        return {r["agent_version"]: r for r in sqlite_store.coverage_ledger(conn, ["claude-code"])}
    finally:
        conn.close()


def test_ledger_counts_per_version_unknown_types_and_quarantine(tmp_path, store_home):
    a = "".join(_line("2.1.0", i) for i in range(6))
    b = (
        "".join(_line("2.2.0", i) for i in range(3))
        + _line("2.2.0", 3, "hologram", payload={"key": SECRET})
        + _line("2.2.0", 4, "hologram")
        + '{"type":"user","version":"2.2.0", torn\n'
    )
    home = _home(tmp_path, {"a.jsonl": a, "b.jsonl": b})
    s = ingest(home, store_home, "claude-code")
    led = _ledger(store_home)
    assert set(led) == {"2.1.0", "2.2.0"}
    old, new = led["2.1.0"], led["2.2.0"]
    assert (old["files"], old["records"], old["parsed"], old["quarantined"], old["unknown"]) == (
        1,
        6,
        6,
        0,
        {},
    )
    assert old["parse_rate"] == 1.0 and old["parser_version"] == 4 and old["entries"] == 6
    # 3 messages + 2 hologram records; the torn line is a bad line: quarantined (under
    # the version the records before it named), no record the parser saw
    assert (new["records"], new["parsed"], new["quarantined"]) == (5, 3, 1)
    assert new["parse_rate"] == 0.6
    assert list(new["unknown"]) == ["hologram"] and new["unknown"]["hologram"]["count"] == 2
    sample = new["unknown"]["hologram"]["sample"]
    assert '"type": "hologram"' in sample and SECRET not in sample and "REDACTED" in sample
    # the store's first read of claude-code: no drift (nothing read before to differ
    # from), the types not understood counted per version (newuser24 F8)
    assert s.coverage_alerts == []
    assert s.not_understood == [
        {"agent": "claude-code", "agent_version": "2.2.0", "unknown": {"hologram": 2}}
    ]
    # nothing new: the ledger is unchanged, no alert
    s2 = ingest(home, store_home, "claude-code")
    assert s2.coverage_alerts == [] and _ledger(store_home) == led


def test_ledger_appends_count_once_and_a_parser_change_recounts(tmp_path, store_home, monkeypatch):
    home = _home(tmp_path, {"a.jsonl": "".join(_line("2.1.0", i) for i in range(4))})
    ingest(home, store_home, "claude-code")
    f = home / ".claude/projects/-work-demo/a.jsonl"
    with f.open("a") as fh:
        fh.write("".join(_line("2.1.0", i) for i in range(4, 7)))
    ingest(home, store_home, "claude-code")
    assert _ledger(store_home)["2.1.0"]["records"] == 7  # 4 + 3 appended, none twice
    from ctxkeep.sources import claude_code

    monkeypatch.setattr(claude_code, "PARSER_VERSION", claude_code.PARSER_VERSION + 1)
    monkeypatch.setattr(
        claude_code,
        "read",
        claude_code.record_reader(
            claude_code.PARSER_VERSION, claude_code.parse_record, claude_code.init_state
        ),
    )
    ingest(home, store_home, "claude-code")
    row = _ledger(store_home)["2.1.0"]
    # the file read again from its first byte by the new parser: its rows replaced
    assert (row["records"], row["parser_version"]) == (7, claude_code.PARSER_VERSION)


def test_a_parse_rate_drop_and_new_types_of_a_known_version_are_reported(tmp_path, store_home):
    first = "".join(_line("2.1.0", i) for i in range(19)) + _line("2.1.0", 19, "hologram")
    home = _home(tmp_path, {"a.jsonl": first})
    s = ingest(home, store_home, "claude-code")
    assert s.coverage_alerts == [] and s.not_understood[0]["unknown"] == {"hologram": 1}
    proj = home / ".claude/projects/-work-demo"
    # the same version's later file: half its records are of a type the parser does not
    # understand (met before, so no new type: the rate dropped from 95% to 50%)
    (proj / "b.jsonl").write_text(
        "".join(_line("2.1.0", i) for i in range(20, 25))
        + "".join(_line("2.1.0", i, "hologram") for i in range(25, 30))
    )
    s = ingest(home, store_home, "claude-code")
    assert [(x["kind"], x["parse_rate"], x["previous_rate"]) for x in s.coverage_alerts] == [
        ("parse_rate_dropped", 0.5, 0.95)
    ]
    (proj / "c.jsonl").write_text(_line("2.1.0", 30, "hologram2"))
    s = ingest(home, store_home, "claude-code")
    assert [(x["kind"], x["unknown"]) for x in s.coverage_alerts] == [("new_unknown_types", ["hologram2"])]
    assert "record types not met before: hologram2 (1)" in s.coverage_alerts[0]["message"]


def test_sources_coverage_json_and_doctor_report_the_drift(tmp_path, store_home, monkeypatch):
    b = "".join(_line("2.2.0", i) for i in range(3)) + _line("2.2.0", 3, "hologram")
    home = _home(tmp_path, {"a.jsonl": "".join(_line("2.1.0", i) for i in range(6)), "b.jsonl": b})
    ingest(home, store_home, "claude-code")
    monkeypatch.setenv("HOME", str(home))
    r = CliRunner().invoke(app, ["sources", "--coverage", "--json", "--home", str(store_home)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == 1 and doc["store"] is True
    rows = {(x["agent"], x["agent_version"]): x for x in doc["rows"]}
    assert rows[("claude-code", "2.2.0")]["unknown"]["hologram"]["count"] == 1
    assert rows[("claude-code", "2.2.0")]["parse_rate"] == 0.75
    assert rows[("claude-code", "2.1.0")]["parse_rate"] == 1.0
    assert [a["kind"] for a in doc["alerts"]] == ["new_unknown_types"]
    text = CliRunner().invoke(
        app, ["sources", "--coverage", "--home", str(store_home)], env={"COLUMNS": "160"}
    )
    assert text.exit_code == 0 and "hologram (1)" in text.stdout and "75.0%" in text.stdout
    assert (
        "claude-code 2.2.0: record types ctxkeep does not understand, not met in its earlier versions: "
        in (" ".join(text.stdout.split()))
    )
    d = CliRunner().invoke(app, ["doctor", "--json", "--home", str(store_home)])
    found = [f for f in json.loads(d.stdout)["findings"] if f["check"] == "coverage"]
    # the ledger alone cannot tell a first read from a change: a neutral count (newuser24 F8)
    assert [(f["file"], f["status"], f["detail"]) for f in found] == [
        (
            "store.db",
            "ok",
            "2 agent versions, no drift; 1 record of 1 type not understood, kept as meta: "
            "`ctxkeep sources --coverage`",
        )
    ]


def test_a_new_version_of_a_known_agent_is_drift_only_for_types_not_met_before(tmp_path, store_home):
    """newuser24 F8: drift is a change against what the store read before. A known
    agent's new version with a type no earlier version held is drift; with only types
    met before it is not; an agent's first read says one neutral count."""
    home = _home(
        tmp_path, {"a.jsonl": "".join(_line("2.1.0", i) for i in range(5)) + _line("2.1.0", 5, "hologram")}
    )
    s = ingest(home, store_home, "claude-code")
    assert s.coverage_alerts == [] and s.not_understood[0]["unknown"] == {"hologram": 1}
    proj = home / ".claude/projects/-work-demo"
    (proj / "b.jsonl").write_text(_line("2.2.0", 10) + _line("2.2.0", 11, "hologram"))
    s = ingest(home, store_home, "claude-code")
    assert s.coverage_alerts == [] and s.not_understood == []  # hologram met in 2.1.0
    (proj / "c.jsonl").write_text(
        _line("2.3.0", 20) + _line("2.3.0", 21, "hologram") + _line("2.3.0", 22, "mirage")
    )
    s = ingest(home, store_home, "claude-code")
    assert [(x["agent_version"], x["kind"], x["unknown"]) for x in s.coverage_alerts] == [
        ("2.3.0", "new_version_unknown_types", ["mirage"])
    ]
    assert s.coverage_alerts[0]["message"] == (
        "claude-code 2.3.0: a version not read before, with record types ctxkeep does not understand: mirage (1)"
    )
    from ctxkeep.sinks.sqlite import checks
    from ctxkeep.transforms import drift

    rows = checks.coverage_rows(store_home / "store.db")
    assert [(a["agent_version"], a["unknown"]) for a in drift.ledger_alerts(rows)] == [("2.3.0", ["mirage"])]
    assert drift.kept_as_meta(1, 1).startswith("1 record of 1 type not understood")


def test_a_first_ingest_says_one_neutral_line_and_doctor_no_warning(tmp_path, store_home, monkeypatch):
    """newuser24 F8: a fresh store's first ingest met two versions with types not
    understood: one neutral line, no "format drift"; doctor calls the ledger ok."""
    b = (
        "".join(_line("2.2.0", i) for i in range(3))
        + _line("2.2.0", 3, "hologram")
        + _line("2.2.0", 4, "mirage")
    )
    a = "".join(_line("2.1.0", i) for i in range(3)) + _line("2.1.0", 5, "hologram")
    home = _home(tmp_path, {"a.jsonl": a, "b.jsonl": b})
    monkeypatch.setenv("HOME", str(home))
    r = CliRunner().invoke(
        app, ["ingest", "--no-progress", "--home", str(store_home)], env={"COLUMNS": "200"}
    )
    assert r.exit_code == 0, r.output
    assert "format drift" not in r.output
    assert "  3 records of 2 types not understood, kept as meta: `ctxkeep sources --coverage`" in r.output
    d = CliRunner().invoke(app, ["doctor", "--json", "--home", str(store_home)])
    found = [f for f in json.loads(d.stdout)["findings"] if f["check"] == "coverage"]
    assert [(f["status"], f["detail"]) for f in found] == [
        (
            "ok",
            "2 agent versions, no drift; 3 records of 2 types not understood, kept as meta: "
            "`ctxkeep sources --coverage`",
        )
    ]


def test_ledger_table_in_a_migrated_store(store_home):
    """A v11 store gains the (empty) ledger table by migration 12."""
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.sqlite import migrations

    conn = sqlite_store.connect(store_home)
    conn.execute("DROP TABLE coverage")
    (m,) = [m for m in migrations.MIGRATIONS if m.version == 12]
    m.step(conn)
    cols = [r[1] for r in conn.execute("PRAGMA table_info(coverage)")]
    conn.close()
    assert cols[:4] == ["agent", "path", "agent_version", "parser_version"] and "unknown" in cols


def test_torn_and_over_cap_lines_are_bad_lines_not_format_drift(tmp_path, store_home, monkeypatch):
    """newuser23 F4: a torn line and an over-cap line among a known version's records
    are quarantined and counted as such, but are no record the parser failed on: the
    version's parse rate stays 100% and the ingest reports no format drift."""
    monkeypatch.setenv("CTXKEEP_MAX_LINE_MB", str(4096 / 1024 / 1024))
    monkeypatch.setattr("ctxkeep.pipeline.plan._LINE_CAP_FROM_ENV", True)  # (read at import)
    good = "".join(_line("1.0.43", i) for i in range(4))
    home = _home(tmp_path, {"a.jsonl": good})
    s1 = ingest(home, store_home, "claude-code")
    assert s1.coverage_alerts == [] and s1.quarantined == 0
    more = (
        _line("1.0.43", 4)
        + '{"type":"user","version":"1.0.43", torn\n'
        + _line("1.0.43", 5, note="x" * 5000)  # over the 4,096-byte cap
        + "".join(_line("1.0.43", i) for i in range(6, 8))
    )
    with open(home / ".claude" / "projects" / "-work-demo" / "a.jsonl", "a") as f:
        f.write(more)
    s2 = ingest(home, store_home, "claude-code")
    assert s2.quarantined == 2
    assert s2.coverage_alerts == []
    row = _ledger(store_home)["1.0.43"]
    assert (row["records"], row["parsed"], row["quarantined"], row["parse_rate"]) == (7, 7, 2, 1.0)
