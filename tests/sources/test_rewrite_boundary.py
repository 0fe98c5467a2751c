"""F16's second half (LEAD19_note "left"): a session file rewritten in place (same
inode, same head) whose old watermark lands exactly on a line boundary of the other
content was read on from there, its lines before the offset never stored. The
watermark's state keeps a hash of the bytes before its offset (``state["_tail"]``);
a watermark written before it (no key) still needs the offset to end a line."""

from __future__ import annotations

import json
import os
import sqlite3

from ctxkeep.pipeline import engine as pipeline
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.sources.readers import jsonl


def _line(i: int, words: str) -> bytes:
    return (
        json.dumps(
            {
                "type": "user",
                "uuid": f"u{i}",
                "sessionId": "s1",
                "timestamp": f"2025-01-01T00:00:{i:02d}Z",
                "cwd": "/tmp/x",
                "message": {"role": "user", "content": f"{words} {i}"},
            }
        )  # fmt: skip
        + "\n"
    ).encode()


def _padded(i: int, length: int) -> bytes:
    """A line of exactly ``length`` bytes."""
    base = _line(i, "")
    return _line(i, "y" * (length - len(base)))


def _texts(store) -> set[str]:
    conn = sqlite3.connect(store / "store.db")
    try:
        return {t for (t,) in conn.execute("SELECT text FROM chunks")}
    finally:
        conn.close()


def _setup(tmp_path):
    proj = tmp_path / "home" / ".claude" / "projects" / "-tmp-x"
    proj.mkdir(parents=True)
    head = b"".join(_line(i, "head " + "x" * 200) for i in range(10, 40))  # past the 4 KiB head hash
    old = b"".join(_line(i, "first") for i in range(3))
    f = proj / "s.jsonl"
    f.write_bytes(head + old)
    store, ctx = tmp_path / "store", DiscoveryContext(home=tmp_path / "home", env={})
    pipeline.run_ingest(store, ctx=ctx)
    return f, store, ctx, head, old


def _rewrite(f, head: bytes, old: bytes) -> None:
    ino = f.stat().st_ino
    other = _padded(50, len(old))  # other content ending exactly where the old did
    with open(f, "r+b") as fh:
        fh.write(head + other + _line(51, "after"))
    assert f.stat().st_ino == ino and len(other) == len(old)


def test_a_rewrite_whose_old_offset_lands_on_a_line_boundary_is_read_whole(tmp_path):
    f, store, ctx, head, old = _setup(tmp_path)
    _rewrite(f, head, old)
    s = pipeline.run_ingest(store, ctx=ctx)
    assert s.quarantined == 0
    texts = _texts(store)
    assert any(t.startswith("yyyy") for t in texts)  # the line before the old offset
    assert any("after 51" in t for t in texts)


def test_an_append_is_still_read_on_from_the_watermark(tmp_path):
    f, store, ctx, head, old = _setup(tmp_path)
    conn = sqlite3.connect(store / "store.db")
    (state,) = conn.execute("SELECT state FROM watermarks WHERE path = ?", (str(f),)).fetchone()
    conn.close()
    assert json.loads(state)[jsonl.TAIL_KEY] == jsonl.tail_hash((head + old)[-jsonl.TAIL_BYTES :])
    with open(f, "ab") as fh:
        fh.write(_line(60, "appended"))
    st = os.stat(f)
    wm = pipeline.sqlite_store.load_watermarks(sqlite3.connect(store / "store.db"))[str(f)]
    assert jsonl.start_offset(f, st, wm, wm.parser_version)[2] == "append"
    s = pipeline.run_ingest(store, ctx=ctx)
    assert (s.entries_new, s.quarantined) == (1, 0)


def test_an_old_watermark_without_the_key_ends_a_line(tmp_path):
    f, store, ctx, head, old = _setup(tmp_path)
    wm = pipeline.sqlite_store.load_watermarks(sqlite3.connect(store / "store.db"))[str(f)]
    wm.state.pop(jsonl.TAIL_KEY)
    st = os.stat(f)
    assert jsonl.start_offset(f, st, wm, wm.parser_version)[2] == "append"
    with open(f, "r+b") as fh:  # other bytes before the offset, no line end there
        fh.seek(len(head + old) - 1)
        fh.write(b" ")
    assert jsonl.start_offset(f, os.stat(f), wm, wm.parser_version)[2] == "rewritten"


def test_each_batch_watermark_hashes_the_bytes_before_its_own_offset(tmp_path):
    """A batch's watermark keeps the tail hash of its own offset, not of a later batch's
    (rss22: every watermark shared the reader's live state dict, so a watermark the writer
    stored while the reader had read on carried a later ``_tail``, and after a kill the
    file was read again from byte 0)."""
    from ctxkeep.sources.contract import SourceFile

    f = tmp_path / "s.jsonl"
    data = b"".join(_line(i, "z" * 300) for i in range(40))
    f.write_bytes(data)
    batches = list(
        jsonl.read_jsonl(
            SourceFile("claude-code", f, "append"), None, 1, lambda rec, off, lh, st: [], batch_bytes=2048
        )
    )  # all read before any is looked at, as a writer behind the reader sees them
    offsets = [b.watermark.offset for b in batches]
    assert len(set(offsets)) >= 5, offsets
    for b in batches:
        off = b.watermark.offset
        want = jsonl.tail_hash(data[max(0, off - jsonl.TAIL_BYTES) : off])
        assert b.watermark.state[jsonl.TAIL_KEY] == want, off
