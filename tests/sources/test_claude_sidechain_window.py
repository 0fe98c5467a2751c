"""Claude Code's inline-sidechain window (session 22, issue 26 target 2): a file read
now keeps the last ``SIDECHAIN_WINDOW`` sidechain uuids in its watermark state, not the
whole map; a file a store read before keeps the whole map, also from byte 0."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import corpus
from ctxkeep.sources import claude_code
from ctxkeep.sources.contract import SourceFile

P = ".claude/projects/"
#: the corpus's Claude Code files with inline sidechains: the real v1.0.98 one (405
#: sidechain records, 5 chains) and the synthetic schema fixture (a branching chain)
INLINE = [
    P + "sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl",
    P + "-fixtures-agent-sessions/small.jsonl",
]
WHOLE = {claude_code.SIDECHAIN_META: "map"}


def _read(file: SourceFile, wm=None, batch_bytes: int = 1 << 20) -> tuple[list[dict], list]:
    entries, wms = [], []
    for b in claude_code.read(file, wm, batch_bytes):
        entries += b.entries
        wms.append(b.watermark)
    return entries, wms


def _ids(entries: list[dict]) -> list[tuple]:
    return [(e["record_id"], e["session_id"], e["parent_session_id"], e["part"]) for e in entries]


def _rec(u: str, parent: str | None, text: str = "x") -> dict:
    return {
        "type": "user",
        "isSidechain": True,
        "uuid": u,
        "parentUuid": parent,
        "sessionId": "s1",
        "timestamp": "2025-06-01T00:00:00Z",
        "message": {"role": "user", "content": text},
    }


def _uuid(chain: int, i: int) -> str:
    """Record ``i`` of chain ``chain``: its first 8 characters (a session id's part)
    differ for every record, so a record taken for a root shows in its session."""
    return f"{chain:04x}{i:04x}-0000-4000-8000-000000000000"


def _session(chain: int, i: int = 0) -> str:
    return "s1/sidechain-" + _uuid(chain, i)[:8]


def _write(path: Path, recs: list[dict]) -> SourceFile:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return SourceFile("claude-code", path, "append", {})


@pytest.mark.parametrize("rel", INLINE)
def test_corpus_window_gives_the_whole_maps_ids(rel):
    f = SourceFile("claude-code", corpus(rel), "append", {})
    got, wms = _read(f)
    whole, wwms = _read(dataclasses.replace(f, meta=WHOLE))
    assert _ids(got) == _ids(whole)
    assert len({e["session_id"] for e in got if e["is_sidechain"]}) >= 1
    state = wms[-1].state
    assert state["scw"] == claude_code.SIDECHAIN_WINDOW
    assert "scw" not in wwms[-1].state and claude_code.whole_sidechain_map(wwms[-1].state)
    # the window holds roots' first 8 characters, the whole map full uuids
    assert all(len(v) <= 8 for v in state["sc"].values())
    assert len(json.dumps(state["sc"])) <= len(json.dumps(wwms[-1].state["sc"]))


def test_window_is_bounded_and_a_parent_past_it_starts_a_chain(tmp_path, monkeypatch):
    monkeypatch.setattr(claude_code, "SIDECHAIN_WINDOW", 50)
    # chain 1: 3 records; chain 2: 60 records; then a child of chain 1's tip
    recs = [_rec(_uuid(1, 0), None), _rec(_uuid(1, 1), _uuid(1, 0)), _rec(_uuid(1, 2), _uuid(1, 1))]
    recs += [_rec(_uuid(2, i), _uuid(2, i - 1) if i else None) for i in range(60)]
    recs.append(_rec(_uuid(1, 3), _uuid(1, 2)))
    f = _write(tmp_path / "s1.jsonl", recs)
    got, wms = _read(f)
    sessions = [e["session_id"] for e in got]
    assert sessions[:3] == [_session(1)] * 3
    assert sessions[3:63] == [_session(2)] * 60
    # 61 uuids back: out of the window, so the record roots a chain of its own
    assert sessions[63] == _session(1, 3)
    state = wms[-1].state
    assert len(state["sc"]) == 50 and list(state["sc"])[-1] == _uuid(1, 3)
    # the whole map (a file a store read before) still finds it
    whole, _ = _read(dataclasses.replace(f, meta=WHOLE))
    assert [e["session_id"] for e in whole][63] == _session(1)


def test_a_parent_window_records_back_is_found_one_more_is_not(tmp_path, monkeypatch):
    monkeypatch.setattr(claude_code, "SIDECHAIN_WINDOW", 50)
    # a root, 49 records of another chain, a child of the root (50 back: found), then a
    # second child of the root (51 back, the first child's uuid pushed it out)
    recs = [_rec(_uuid(1, 0), None)]
    recs += [_rec(_uuid(2, i), _uuid(2, i - 1) if i else None) for i in range(49)]
    recs += [_rec(_uuid(1, 1), _uuid(1, 0)), _rec(_uuid(1, 2), _uuid(1, 0))]
    f = _write(tmp_path / "s1.jsonl", recs)
    got, _ = _read(f)
    assert [e["session_id"] for e in got[-2:]] == [_session(1), _session(1, 2)]
    whole, _ = _read(dataclasses.replace(f, meta=WHOLE))
    assert [e["session_id"] for e in whole[-2:]] == [_session(1), _session(1)]


def test_window_resumed_from_each_watermark_gives_one_reads_ids(tmp_path, monkeypatch):
    """The window's order survives the watermark's JSON (the store's row): reading on
    from any batch's watermark gives the ids of one read, evictions included."""
    monkeypatch.setattr(claude_code, "SIDECHAIN_WINDOW", 20)
    recs = []
    for i in range(120):  # 4 chains interleaved, a branch every 7th record
        c = i % 4
        k = i // 4
        parent = None if k == 0 else _uuid(c, k - 2 if i % 7 == 0 and k > 1 else k - 1)
        recs.append(_rec(_uuid(c, k), parent, f"t{i}"))
    f = _write(tmp_path / "s1.jsonl", recs)
    one, wms = _read(f, batch_bytes=2048)
    assert len(wms) > 5
    for wm in wms[:-1]:
        stored = dataclasses.replace(wm, state=json.loads(json.dumps(wm.state)))
        before = [e for e in one if e["source_offset"] < wm.offset]
        after, _ = _read(f, stored, batch_bytes=2048)
        assert _ids(before + after) == _ids(one)


def test_a_store_read_before_keeps_the_whole_map(tmp_path, monkeypatch):
    """A watermark written before the window (``sc`` without ``scw``): reading on and a
    read from byte 0 (``ids_meta``, as a re-read, compress's and scrub's checks and a
    reparse do) keep the whole map, so a parent past the window finds its chain."""
    monkeypatch.setattr(claude_code, "SIDECHAIN_WINDOW", 10)
    recs = [_rec(_uuid(1, 0), None)]
    recs += [_rec(_uuid(2, i), _uuid(2, i - 1) if i else None) for i in range(30)]
    recs.append(_rec(_uuid(1, 1), _uuid(1, 0)))
    f = _write(tmp_path / "s1.jsonl", recs)
    whole, wwms = _read(dataclasses.replace(f, meta=WHOLE), batch_bytes=1024)
    assert whole[-1]["session_id"] == _session(1)
    mid = wwms[1]
    legacy = json.loads(json.dumps(mid.state))
    assert "scw" not in legacy and "sc" in legacy
    after, _ = _read(f, dataclasses.replace(mid, state=legacy), batch_bytes=1024)
    assert after[-1]["session_id"] == _session(1)
    again = claude_code.ids_meta(f, legacy)
    assert again.meta[claude_code.SIDECHAIN_META] == "map"
    assert _ids(_read(again)[0]) == _ids(whole)
    # a window state (or none: a new file) reads with the window
    windowed = _read(f)[1][-1].state
    assert claude_code.SIDECHAIN_META not in claude_code.ids_meta(again, windowed).meta
    assert claude_code.ids_meta(f, None) is f
