"""Issue 12: the strategies compress applies before it cuts old turns (inline, duplicates,
progress), on the corpus's 1.2 MB Claude Code file (one 1 MB base64 image line) with the
default configuration, and on synthetic variants of real corpus lines."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import time
from pathlib import Path

import orjson
import pytest

from compress_helpers import blocks, claude_code_log_problems, dangling_parents, orphan_tool_results, records
from conftest import CORPUS_HOME
from ctxkeep.config import CompressConfig
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import run as ops
from ctxkeep.maintenance.compress import shrink
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.query.fetch import fetch
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sources.contract import DiscoveryContext, SourceFile

IMG = (
    ".claude/projects/-Users-dain-workspace-claude-code-log-sample/0d3a8e6f-290f-4105-a327-a2496e5e2a83.jsonl"
)
EF958 = ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"


def _copy(tmp_path: Path, rel: str, data: bytes | None = None) -> tuple[Path, Path, DiscoveryContext]:
    home = tmp_path / "home"
    dst = home / ".claude/projects/p" / Path(rel).name
    dst.parent.mkdir(parents=True)
    if data is None:
        shutil.copyfile(CORPUS_HOME / rel, dst)
    else:
        dst.write_bytes(data)
    old = time.time() - 3600
    os.utime(dst, (old, old))
    store = tmp_path / "store"
    store.mkdir()
    ctx = DiscoveryContext(home=home, env={})
    run_ingest(store, ctx=ctx)
    return dst, store, ctx


@pytest.fixture(scope="module")
def image_run(tmp_path_factory):
    if not (CORPUS_HOME / IMG).is_file():
        pytest.skip("shared/corpus not present")
    tmp = tmp_path_factory.mktemp("img")
    path, store, ctx = _copy(tmp, IMG)
    check = ops.check_files(store, ctx=ctx)
    dry = ops.run_compress(store, ctx=ctx, dry_run=True)
    real = ops.run_compress(store, ctx=ctx)
    return {"path": path, "store": store, "check": check, "dry": dry, "real": real}


def _original_image() -> tuple[str, bytes]:
    """The one image of the corpus file, read independently of ctxkeep."""
    for line in (CORPUS_HOME / IMG).read_bytes().splitlines():
        r = json.loads(line)
        for b in blocks(r):
            if b.get("type") == "image":
                return r["uuid"], base64.b64decode(b["source"]["data"])
    raise AssertionError("no image")


def test_default_compress_brings_the_image_file_under_max_size(image_run):
    cc = CompressConfig()
    orig = (CORPUS_HOME / IMG).read_bytes()
    assert len(orig) > cc.max_size_kb * 1024  # over the default 500 KiB
    (f,) = image_run["real"]["files"]
    assert f["status"] == "compressed"
    new = image_run["path"].read_bytes()
    assert len(new) == f["bytes_after"] < cc.max_size_kb * 1024
    recs = records(new)  # parses
    assert len(recs) == len(records(orig)) == f["lines_after"]  # only the image moved out
    uses = {b["id"] for r in recs for b in blocks(r) if b.get("type") == "tool_use"}
    results = {b["tool_use_id"] for r in recs for b in blocks(r) if b.get("type") == "tool_result"}
    assert uses and uses <= results and orphan_tool_results(recs) == []
    assert dangling_parents(recs) == []
    assert sum(1 for r in recs if r.get("uuid") and not r.get("parentUuid")) == 1  # one root
    assert b'"type":"image"' not in new and b"ctxkeep show" in new


def test_claude_code_log_reads_the_result_cleanly(image_run):
    pytest.importorskip("claude_code_log", reason="claude-code-log (dev dependency) is not installed")
    assert claude_code_log_problems(CORPUS_HOME / IMG) == []  # the validator accepts the original
    assert claude_code_log_problems(image_run["path"]) == []


def test_the_image_is_still_returned_by_show(image_run):
    uuid, data = _original_image()
    new = records(image_run["path"].read_bytes())
    line = next(r for r in new if r.get("uuid") == uuid)
    text = next(b["text"] for b in blocks(line) if "ctxkeep show" in (b.get("text") or ""))
    call = re.search(r"`(ctxkeep show [^`]*)`", text).group(1).split()
    assert call[2:4] == ["--home", str(image_run["store"])]  # the store is not the default one
    eid = call[-1]
    conn = sqlite_store.connect(image_run["store"], readonly=True)
    try:
        (row,), problems = fetch(conn, [eid], media=True)
    finally:
        conn.close()
    assert problems == [] and row.role == "user"
    (m,) = row.media
    assert m["media_type"] == "image/png" and base64.b64decode(m["data_base64"]) == data


def test_check_and_dry_run_agree_with_the_run(image_run):
    (c,) = [x for x in image_run["check"]["files"] if x["status"] == "EXCEEDS"]
    (d,) = image_run["dry"]["files"]
    (r,) = image_run["real"]["files"]
    assert c["savings"] == d["savings"] == r["savings"]
    assert c["would"]["bytes_after"] == d["bytes_after"] == r["bytes_after"]
    sv = r["savings"]
    assert sum(v["bytes"] for v in sv.values()) == r["bytes_before"] - r["bytes_after"]
    # the image line's base64 is what inline saves (the placeholder is a few hundred bytes)
    _, data = _original_image()
    b64 = len(base64.b64encode(data))
    assert sv["inline"]["bytes"] > b64 - 400
    # the image, and every toolUseResult string over the default 4 KiB (read independently)
    big_tur = 0

    def walk(v):
        nonlocal big_tur
        if isinstance(v, dict):
            for x in v.values():
                if isinstance(x, str) and len(x.encode()) > 4096:
                    big_tur += 1
                else:
                    walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for line in (CORPUS_HOME / IMG).read_bytes().splitlines():
        walk(json.loads(line).get("toolUseResult"))
    assert big_tur > 0
    assert sv["inline"]["image_tokens"] > 0 and sv["inline"]["media"] == 1 + big_tur
    assert sv["duplicates"]["lines"] == sv["progress"]["lines"] == sv["cut"]["lines"] == 0


def _ef958_variant() -> bytes:
    """ef958aa1 with a progress record (whose child is the next message) after line 20
    and a byte-identical repeat of line 30 at line 60 (both shapes of Claude Code 2.x)."""
    src = (CORPUS_HOME / EF958).read_bytes().splitlines()
    recs = [json.loads(x) for x in src]
    i = next(
        k
        for k in range(20, len(recs))
        if recs[k].get("uuid") and recs[k + 1].get("parentUuid") == recs[k]["uuid"]
    )
    parent = recs[i]
    prog = {
        "parentUuid": parent["uuid"],
        "isSidechain": parent.get("isSidechain", False),
        "type": "progress",
        "data": {"type": "hook_progress", "hookEvent": "PostToolUse", "hookName": "PostToolUse:Bash"},
        "uuid": "0000aaaa-1111-2222-3333-444455556666",
        "sessionId": parent.get("sessionId"),
        "timestamp": parent.get("timestamp"),
    }
    child = dict(recs[i + 1], parentUuid=prog["uuid"])
    out = src[: i + 1] + [orjson.dumps(prog), orjson.dumps(child)] + src[i + 2 :]
    out = out[:60] + [out[30]] + out[60:]
    return b"".join(x + b"\n" for x in out)


def test_duplicates_and_progress_are_dropped_and_relinked(tmp_path):
    if not (CORPUS_HOME / EF958).is_file():
        pytest.skip("shared/corpus not present")
    data = _ef958_variant()
    path, store, ctx = _copy(tmp_path, EF958, data)
    cc = CompressConfig(active_minutes=0, keep_messages=1000)  # no cut: only the strategies
    conn = sqlite_store.connect(store)
    try:
        r = ops.compress_file(conn, store, SourceFile("claude-code", path), cc)
    finally:
        conn.close()
    assert r.status == "compressed", r.reason
    body = [x for x in data.splitlines() if x.strip()]
    repeats = len(body) - len(set(body))  # ef958aa1 itself repeats permission-mode/last-prompt lines
    assert repeats > 1
    assert r.savings["duplicates"]["lines"] == repeats and r.savings["progress"]["lines"] == 1
    assert r.savings["cut"]["lines"] == 0
    new = records(path.read_bytes())
    orig = records(data)
    assert len(new) == len(orig) - repeats - 1
    assert len({orjson.dumps(x) for x in new}) == len(new)
    # of repeated state records the latest copy stays, in its place
    for t in ("permission-mode", "last-prompt"):
        assert [x for x in orig if x["type"] == t][-1] == [x for x in new if x["type"] == t][-1]
    assert not any(x["type"] == "progress" for x in new)
    assert dangling_parents(new) == [] and orphan_tool_results(new) == []
    prog = next(x for x in orig if x["type"] == "progress")
    child = next(
        x
        for x in new
        if x.get("uuid") == next(o for o in orig if o.get("parentUuid") == prog["uuid"])["uuid"]
    )
    assert child["parentUuid"] == prog["parentUuid"]  # re-linked over the dropped record
    assert sum(v["bytes"] for v in r.savings.values()) == len(data) - len(path.read_bytes())


def test_shrink_leaves_small_values_and_other_lines_alone():
    data = (CORPUS_HOME / EF958).read_bytes() if (CORPUS_HOME / EF958).is_file() else None
    if data is None:
        pytest.skip("shared/corpus not present")
    lines, _ = cp.split_lines(data)
    f = SourceFile("claude-code", CORPUS_HOME / EF958)
    ids = cp.line_entry_ids("claude-code", cp.line_entries(f, lines))
    res = shrink.shrink_claude(lines, ids, 10**9, lambda e, w: "x")
    body = [ln.raw for ln in lines]
    assert res.replaced == [] and res.media == [] and res.removed["progress"] == []
    assert len(res.removed["duplicates"]) == len(body) - len(set(body))
    assert [ln.raw for ln in res.lines] == [body[i] for i in res.origin]


def _with_a_secret_in_a_big_tool_use_result() -> tuple[bytes, str]:
    """The image file (IMG) with a GitHub token written into its first toolUseResult
    string over 4 KiB (the default tool_use_result_max_kb), and that token."""
    secret = "ghp_" + "a1B2" * 9
    out, done = [], False
    for line in (CORPUS_HOME / IMG).read_bytes().splitlines():
        rec = json.loads(line) if line.strip() else None
        tur = rec.get("toolUseResult") if isinstance(rec, dict) else None
        if not done and isinstance(tur, dict):
            for k, v in tur.items():
                if isinstance(v, str) and len(v.encode()) > 4096:
                    tur[k] = f"token {secret} in the output\n" + v
                    line, done = orjson.dumps(rec), True
                    break
        out.append(line)
    assert done
    return b"".join(x + b"\n" for x in out), secret


def test_moved_tool_use_result_text_is_stored_redacted_and_a_dry_run_never_redacts(tmp_path, monkeypatch):
    """``inline`` moves a big toolUseResult string to the media table redacted (no
    secret reaches the store); a dry run, which stores nothing, does not redact it
    (``MediaRow.data`` redacts on first use) and reports the same savings."""
    if not (CORPUS_HOME / IMG).is_file():
        pytest.skip("shared/corpus not present")
    data, secret = _with_a_secret_in_a_big_tool_use_result()
    path, store, ctx = _copy(tmp_path, IMG, data)
    from ctxkeep.transforms import redact

    calls = []
    real_redact = redact.redact
    monkeypatch.setattr(redact, "redact", lambda t: calls.append(t) or real_redact(t))
    dry = ops.run_compress(store, ctx=ctx, dry_run=True)
    assert calls == [] and dry["files"][0]["status"] == "would-compress"
    real = ops.run_compress(store, ctx=ctx)
    assert real["files"][0]["status"] == "compressed"
    assert real["files"][0]["savings"] == dry["files"][0]["savings"]
    assert any(secret in c for c in calls)
    assert secret.encode() not in path.read_bytes()  # moved out of the file
    conn = sqlite_store.connect(store, readonly=True)
    try:
        texts = [
            bytes(d) for (d,) in conn.execute("SELECT data FROM media WHERE media_type LIKE 'text/plain%'")
        ]
    finally:
        conn.close()
    held = [t for t in texts if b"in the output" in t]
    assert len(held) == 1 and b"[REDACTED:github-token]" in held[0] and secret.encode() not in held[0]
    for p in store.rglob("*"):  # no byte of any store file holds it
        if p.is_file():
            assert secret.encode() not in p.read_bytes(), p


def test_check_counts_only_the_texts_the_store_does_not_hold(corpus_store, monkeypatch):
    """``compress --check`` takes the tokens of the texts the store holds from it (the
    counts ingest made) and runs the BPE only over the others (markers, placeholders,
    texts redaction changed); its figures are those of counting every text again."""
    import hashlib

    from ctxkeep.transforms import tokens

    store, _ = corpus_store
    ctx = DiscoveryContext(home=CORPUS_HOME, env={})
    counted: list[str] = []
    calls = []

    def recording(texts):
        counted.extend(texts)
        calls.append(len(texts))
        return tokens.estimate_tokens(texts)

    monkeypatch.setattr(ops, "estimate_tokens", recording)
    fast = ops.check_files(store, ctx=ctx)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        stored = {h for (h,) in conn.execute("SELECT content_hash FROM contents")}
        n_texts = sum(1 for _ in conn.execute("SELECT 1 FROM contents"))
    finally:
        conn.close()
    would = [f for f in fast["files"] if f.get("would", {}).get("status") == "would-compress"]
    assert len(would) >= 2  # the corpus has files over the default thresholds
    assert counted, "the rewritten texts (markers, placeholders) are counted"
    assert len(calls) == 1  # all files' texts at once, at the end (no wait per file)
    assert not {hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in counted} & stored
    assert len(counted) < n_texts / 10
    # the same figures as counting every text with the encoder
    monkeypatch.setattr(ops, "_stored_counts", lambda conn, texts, memo: None)
    slow = ops.check_files(store, ctx=ctx)
    assert [(f.get("would"), f.get("savings")) for f in fast["files"]] == [
        (f.get("would"), f.get("savings")) for f in slow["files"]
    ]


def test_pending_token_figures_add_and_subtract_as_ints():
    a = ops._Pending(5, {"x": 1}) + 3 + ops._Pending(0, {"y": 2})
    b = 10 - a - ops._Pending(1, {"x": 1})
    counts = {"x": 7, "y": 11}
    assert a.resolve(counts) == 5 + 7 + 3 + 22
    assert b.resolve(counts) == 10 - (5 + 7 + 3 + 22) - (1 + 7)
    assert sum([ops._Pending(0, {"x": 1}), 2, ops._Pending(0, {"x": 1})]).resolve(counts) == 16


def test_shrunk_texts_are_those_of_a_full_parse():
    """``_savings`` takes the texts of the shrunk lines from the original parse (only
    rewritten lines parsed again): the same texts as parsing every shrunk line, on the
    corpus's Claude Code files (the image file, a variant with progress records and
    repeats) with a limit low enough that inline rewrites many lines."""
    if not (CORPUS_HOME / IMG).is_file():
        pytest.skip("shared/corpus not present")
    tried = 0
    for rel, data in ((IMG, None), (EF958, _ef958_variant())):
        path = CORPUS_HOME / rel
        data = data if data is not None else path.read_bytes()
        file = SourceFile("claude-code", path)
        lines, _ = cp.split_lines(data)
        per_line = cp.line_entries(file, lines)
        ids = cp.line_entry_ids("claude-code", per_line)
        shr = shrink.shrink_claude(lines, ids, 2048, lambda e, w: f"[moved {e}: {w}]", 2048)
        assert shr.replaced and (shr.relinked or shr.removed["duplicates"] or rel == IMG)
        assert ops._shrunk_texts(file, per_line, shr) == cp.entry_texts(cp.line_entries(file, shr.lines))
        tried += 1
    assert tried == 2
