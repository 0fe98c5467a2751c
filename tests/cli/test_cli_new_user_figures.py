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
    args = ["compress", "--dry-run", "-v", str(path), "--keep-messages", "100"]
    rep = json.loads(_ok([*args, "--json"], e).stdout)
    (f,) = rep["files"]
    assert f["status"] == "would-compress"
    # the defaults (compress.max_size_kb 500, max_lines 300) against the planned file
    assert f["bytes_after"] > 500 * 1024 and f["lines_after"] > 300, f
    assert f["still_exceeds"] == ["size", "lines"]
    assert rep["still_exceeding"] == 1
    text = _ok(args, e).output
    # the warning, folded at the terminal's width: read as one line
    line = next(x for x in " ".join(text.split()).split("warning: ") if "still over" in x)
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
    text = _ok(["compress", "--dry-run", "-v", str(path)], e).output
    figures = f"{f['tokens_before']:,} → {f['tokens_after']:,} text tokens"
    assert figures in text and f"images of {img:,} tokens moved" in text
    inline = sv["inline"]
    assert f"inline {inline['bytes']:,} B / {inline['tokens']:,} text tok + {img:,} image tok" in text
    # no token figure without saying what it counts
    assert {m.group(1) for m in re.finditer(r"\d (\w+ )?tok\b", text)} == {"text ", "image "}


def test_a_run_that_moves_an_image_out_saves_its_tokens_in_the_compression_view(home_copy, tmp_path):
    """left24 (newuser23's store page): a compress run whose ``inline`` moved the pasted
    image out saved 1.1 MB and showed "tokens saved" -39: the image is no text, and its
    placeholder is. The view counts the image's tokens as saved (``image_tokens``)."""
    import duckdb

    _age(home_copy)
    store = tmp_path / "store"
    e = _env(home_copy, store)
    rep = json.loads(_ok(["compress", str(home_copy / IMAGE_FILE), "--json"], e).stdout)
    (f,) = rep["files"]
    img = f["savings"]["inline"]["image_tokens"]
    assert f["status"] == "compressed" and img > 1000 and f["tokens_after"] > f["tokens_before"]
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    try:
        got = con.execute(
            "SELECT bytes_saved, tokens_before, tokens_after, image_tokens, tokens_saved FROM compression"
        ).fetchall()
    finally:
        con.close()
    saved = f["tokens_before"] - f["tokens_after"] + img
    assert got == [(f["bytes_before"] - f["bytes_after"], f["tokens_before"], f["tokens_after"], img, saved)]
    assert 0 < saved < img


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
    # JSON records of a type the parser does not know are no garbage: that is drift
    odd = junk.with_name("odd.jsonl")
    odd.write_text("".join(json.dumps({"type": "hologram", "n": i}) + "\n" for i in range(6)))
    s = json.loads(_ok(["ingest", "--json"], e).stdout)
    assert s["files_unreadable"] == 0 and s["quarantined"] == 0
    assert [(a["kind"], a["unknown"]) for a in s["coverage_alerts"]] == [("new_unknown_types", ["hologram"])]


# ---------------------------------------------------------------- (4) an unended last line


def test_vault_status_says_an_unended_last_line_is_held_back_not_to_ingest(home_copy, tmp_path):
    (home_copy / ".claude" / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 7}))
    proj = home_copy / ".claude" / "projects" / "-experiments-worktrees"
    src = (proj / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl").read_bytes().splitlines(keepends=True)
    torn = proj / "0b0b0b0b-0000-4000-8000-000000000001.jsonl"
    tail = src[12].rstrip(b"\n")[:-40]  # the agent stopped mid-line and never went on
    torn.write_bytes(b"".join(src[:12]) + tail)
    gap = (
        home_copy
        / ".claude"
        / "projects"
        / "-experiments-ideas"
        / "a95fea4a-b88a-4e49-ac07-4cc323d8700c.jsonl"
    )
    _age(home_copy, 10 * 86_400)  # older than the 7 days: Claude Code deletes them
    e = _env(home_copy, tmp_path / "store")
    _ok(["ingest"], e)
    with gap.open("ab") as fh:  # a whole line the store has not read yet: an ingest helps here
        fh.write(src[12])
    _age(home_copy, 10 * 86_400)
    rep = json.loads(_ok(["vault", "status", "--json"], e).stdout)
    risk = {x["path"]: x for a in rep["agents"] for x in a["at_risk"]}
    assert set(risk) == {str(torn), str(gap)}
    assert risk[str(torn)]["unfinished_bytes"] == len(tail)
    assert risk[str(torn)]["vaulted_bytes"] + len(tail) == torn.stat().st_size
    assert risk[str(gap)]["unfinished_bytes"] == 0
    r = runner.invoke(app, ["vault", "status"], env=e)
    assert r.exit_code == 0, r.output
    lines = " ".join(r.output.split()).split("warning: ")
    (t,) = [x for x in lines if torn.name in x]
    assert f"the missing {len(tail):,} bytes are a last line claude-code has not ended" in t
    assert "holds it back until the line ends" in t and "run `ctxkeep ingest`" not in t
    (g,) = [x for x in lines if gap.name in x]
    assert "run `ctxkeep ingest` before then" in g


# ---------------------------------------------------------------- (2) redacted-value counts

GEMINI = ".gemini/tmp/3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/session-2025-12-24T06-27-36e8d28f.json"


def test_redacted_counts_of_secrets_vault_status_and_restore_say_what_they_count(store, tmp_path):
    e = {"CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0", "COLUMNS": "200"}
    sec = json.loads(_ok(["secrets", "--json"], e).stdout)
    status = json.loads(_ok(["vault", "status", "--json"], e).stdout)
    raw = {a["agent"]: sum(a["redactions"].values()) for a in status["agents"] if a["redactions"]}
    # the corpus: Crush keeps each tool result's text in its metadata too, so its rows
    # hold every value twice where its entries hold it once
    assert sec["total"] == 7 and raw == {"codex": 2, "crush": 10}
    assert sec["vault"] == {"values": 12, "agents": raw}
    restored = 0
    for s in sec["sessions"]:
        r = json.loads(
            _ok(["vault", "restore", s["session_id"], "--to", str(tmp_path / "to"), "--json"], e).stdout
        )
        restored += sum(sum(f["redactions"].values()) for f in r["files"])
    assert restored == sec["vault"]["values"]  # a restore's counts add up to the status's
    text = " ".join(_ok(["secrets"], e).output.split())
    assert "7 redacted values, counted per entry, in the texts of 6 entries of 4 sessions;" in text
    assert (
        "counted per occurrence in the raw bytes the vault keeps (`vault status`, `vault restore`): 12"
        in text
    )
    text = " ".join(_ok(["vault", "status"], e).output.split())
    assert "redacted: values counted per occurrence in the raw bytes `vault restore` writes" in text
    crush = next(s for s in sec["sessions"] if s["agent"] == "crush" and s["values"] == 4)
    out = _ok(["vault", "restore", crush["session_id"], "--to", str(tmp_path / "again")], e).output
    assert "(1.2 MB, 8 values redacted in its bytes)" in " ".join(out.split())


def test_stats_secrets_and_vault_name_their_unit_in_the_same_words(store):
    """newuser16 F6: `stats` said 67, `secrets` 128 and the vault 133 for one store, and
    nothing said that stats counts each distinct text once, secrets each entry and the
    vault each occurrence in the raw bytes. Each now names its unit in the same words,
    and `secrets` gives stats' figure too (the same values counted per distinct text)."""
    e = {"CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0", "COLUMNS": "200"}
    st = json.loads(_ok(["stats", "--json"], e).stdout)["redactions"]
    sec = json.loads(_ok(["secrets", "--json"], e).stdout)
    in_texts = sum(st["texts"].values())
    assert (sec["text_values"], sec["texts"]) == (in_texts, st["texts_with_redactions"])
    assert sec["total"] >= sec["text_values"]  # a text several entries share counts for each
    stats_text = " ".join(_ok(["stats"], e).output.split())
    assert f"redacted values, counted per distinct text: {st['total']:,} (" in stats_text
    assert "`ctxkeep secrets` counts them per entry, the vault per occurrence in the raw bytes" in stats_text
    text = " ".join(_ok(["secrets"], e).output.split())
    assert f"{sec['total']:,} redacted values, counted per entry," in text
    assert "counted per distinct text (as `ctxkeep stats` does" in text
    assert f"{in_texts:,} in {st['texts_with_redactions']:,} distinct texts" in text
    assert "counted per occurrence in the raw bytes the vault keeps" in text
    vault = " ".join(_ok(["vault", "status"], e).output.split())
    assert "counts them per entry, `ctxkeep stats` per distinct text" in vault


def test_vault_status_counts_a_rewritten_documents_values_once(home_copy, tmp_path):
    e = _env(home_copy, tmp_path / "store")
    doc = home_copy / GEMINI
    d = json.loads(doc.read_text())
    for turn in range(2):  # the agent rewrites its document after each turn
        d["messages"].append(
            {
                "id": f"0000000{turn}-aaaa-4bbb-8ccc-dddddddddddd",
                "timestamp": f"2025-12-24T07:0{turn}:00.000Z",
                "type": "user",
                "content": f"turn {turn}: export PGPASSWORD: Xk9v2mQp7rTzLw4q and go on",
            }
        )
        doc.write_text(json.dumps(d, indent=2))
        _ok(["ingest"], e)
    status = json.loads(_ok(["vault", "status", "--json"], e).stdout)
    gem = next(a for a in status["agents"] if a["agent"] == "gemini-cli")
    sid = d["sessionId"]
    r = json.loads(_ok(["vault", "restore", sid, "--to", str(tmp_path / "to"), "--json"], e).stdout)
    (f,) = r["files"]
    assert f["redactions"] == {"password": 2}  # the newest document holds both turns
    assert gem["generations"] == 5 and gem["redactions"] == {"password": 2}  # not 1 + 2
