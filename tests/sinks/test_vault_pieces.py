"""An append capture is cut into pieces (``capture.pieces_of``: FastCDC over its redacted
bytes), one object and one segment each, so bytes two files share are stored once: a
Claude Code resume or fork writes the history before it into a new session file
(issue 27's new user: "identical bytes in two files are stored twice").

The session and its fork are built in tmp (Claude Code's JSONL shape; the fork: the
first 80 % of the session's lines byte for byte, then lines of its own)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ctxkeep.maintenance.vault import vault_restore, vault_verify
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import capture, manifest
from ctxkeep.sinks.vault.capture import Capturer, pieces_of, record, replay
from ctxkeep.sinks.vault.packs import pack_names
from ctxkeep.sources.contract import RawCapture
from tests.conftest import ingest

#: where the sessions live in the home (a Claude Code project folder)
PROJECT = ".claude/projects/-tmp-forked"
SESSION_ID = "5e551011-0000-4000-8000-00000000f0f0"
FORK_ID = "f0f0f0f0-1111-4222-8333-444455556666"


def _turns(sid: str, n: int, first: int = 0) -> list[bytes]:
    """``n`` Claude Code-shaped JSONL lines (user/assistant turns, ~1-6 KB each) of
    session ``sid``, their texts made of pseudo-random words (so zstd finds no repeats
    between turns, as in a real session's distinct turns)."""
    out = []
    for i in range(first, first + n):
        words = " ".join(f"w{(i * 7919 + k * 104729) % 1000003:07d}" for k in range(80 + (i * 37) % 600))
        rec = {
            "parentUuid": f"00000000-0000-4000-8000-{i - 1:012d}" if i else None,
            "sessionId": sid,
            "type": "user" if i % 2 == 0 else "assistant",
            "uuid": f"00000000-0000-4000-8000-{i:012d}",
            "timestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z",
            "message": {"role": "user" if i % 2 == 0 else "assistant", "content": words},
        }
        out.append(json.dumps(rec).encode() + b"\n")
    return out


def _home_with(tmp_path: Path, fork: bool) -> tuple[Path, Path, Path]:
    """A home holding a session of ~3 MB (and, with ``fork``, its fork: the first 80 %
    of its lines byte for byte, as a resume or ``--fork-session`` copies the history,
    then 40 turns of its own); returns (home, session, fork path)."""
    home = tmp_path / ("home-fork" if fork else "home")
    session = home / PROJECT / f"{SESSION_ID}.jsonl"
    session.parent.mkdir(parents=True)
    lines = _turns(SESSION_ID, 1000)
    session.write_bytes(b"".join(lines))
    forked = session.with_name(f"{FORK_ID}.jsonl")
    if fork:
        forked.write_bytes(b"".join(lines[:800] + _turns(FORK_ID, 40, first=5000)))
    return home, session, forked


def _packs(store: Path) -> int:
    return sum(p.stat().st_size for _, p in pack_names(store))


def test_a_forked_session_costs_about_its_own_lines_and_both_restore_byte_identical(tmp_path):
    alone_home, _, _ = _home_with(tmp_path, fork=False)
    home, session, forked = _home_with(tmp_path, fork=True)
    alone, store = tmp_path / "alone", tmp_path / "store"
    ingest(alone_home, alone, agents="claude-code")
    ingest(home, store, agents="claude-code")
    import zstandard

    fork = forked.read_bytes()
    shared = os.path.commonprefix([session.read_bytes(), fork])
    own_z = len(zstandard.ZstdCompressor(level=3).compress(fork[len(shared) :]))
    fork_z = len(zstandard.ZstdCompressor(level=3).compress(fork))
    extra = _packs(store) - _packs(alone)
    print(
        f"fork {len(fork):,} B ({len(shared):,} shared): vault +{extra:,} B; its own bytes zstd {own_z:,} B"
    )
    # the fork's shared history (~2.5 MB) costs at most the piece the fork point cuts
    # and the pack records: far below the fork stored whole again (before pieces: +fork_z)
    assert len(shared) > 2_000_000
    assert extra < own_z + capture.SEG_MAX // 2, (extra, own_z)
    assert extra < fork_z / 4, (extra, fork_z)
    assert vault_verify(store)["problems"] == []
    want = {p: p.read_bytes() for p in (session, forked)}
    for p in want:
        os.remove(p)
    conn = sqlite_store.connect(store, readonly=True)
    try:
        sids = [r[0] for r in conn.execute("SELECT DISTINCT session_id FROM entry_rows")]
        pieces = conn.execute("SELECT count(*), count(DISTINCT sha) FROM vault_segments").fetchone()
    finally:
        conn.close()
    assert pieces[0] > pieces[1] > 2  # pieces, some of them shared by the two files
    for sid in sids:
        vault_restore(store, sid, user_home=home, force=True)
    for p, data in want.items():
        assert p.read_bytes() == data, p


def _cap(path: str, data: bytes, offset: int = 0) -> RawCapture:
    return RawCapture(path, "codex", "append", offset, data, 1, 7, offset + len(data), 1_000 + len(data))


def _record(store: Path, *caps: RawCapture) -> None:
    conn = sqlite_store.connect(store)
    try:
        g = Capturer(store, conn).prepare(list(caps))
        conn.execute("BEGIN IMMEDIATE")
        record(conn, store, g)
        conn.execute("COMMIT")
    finally:
        conn.close()


def _lines(n: int, secret_at: set[int] = frozenset()) -> list[bytes]:
    """``n`` Codex-like JSONL lines of ~1-3 KB (different bytes each), a planted
    password in the lines ``secret_at``."""
    out = []
    for i in range(n):
        text = " ".join(f"w{(i * 7919 + k * 104729) % 100003:05d}" for k in range(100 + i % 300))
        if i in secret_at:
            text += ' config: password = "Zx9!qT4#mW2$vL8pK"'
        out.append(json.dumps({"n": i, "type": "response_item", "text": text}).encode() + b"\n")
    return out


@pytest.mark.parametrize("secrets", [False, True])
def test_pieces_map_back_onto_the_file_and_a_reread_adds_only_the_tail(store_home, secrets):
    lines = _lines(600, {3, 150, 151, 290, 299, 451} if secrets else set())
    data = b"".join(lines)
    red, counts = capture.redact_raw(data)
    assert bool(counts) == secrets
    cuts = pieces_of(data, red)
    assert len(cuts) > 4
    # every cut is where the original and the redacted bytes agree: the pieces cover both
    assert cuts[0][0] == cuts[0][2] == 0 and cuts[-1][1] == len(red) and cuts[-1][3] == len(data)
    for (a, b, da, db), nxt in zip(cuts, [*cuts[1:], None], strict=True):
        if nxt is not None:
            assert (b, db) == (nxt[0], nxt[2])
        if red[a:b] == data[da:db]:
            continue
        assert secrets and b"[REDACTED:" in red[a:b]
    p = "/s/rollout.jsonl"
    half = b"".join(lines[:300])
    _record(store_home, _cap(p, half))
    _record(store_home, _cap(p, data))  # a re-read from 0 (a parser change), grown
    conn = sqlite_store.connect(store_home, readonly=True)
    try:
        (g,) = manifest.generations(conn)
        assert (g.gen, g.start, g.length) == (1, 0, len(data))
        assert manifest.gen_bytes(conn, store_home, g) == red
        segs = conn.execute("SELECT offset, length, skip FROM vault_segments ORDER BY seq").fetchall()
        assert segs[0][0] == 0 and sum(s[1] for s in segs) == len(data)
        assert sum(1 for s in segs if s[0] >= len(half)) >= 2  # the tail: pieces of its own
        assert bool(g.redactions) == secrets
    finally:
        conn.close()
    # the manifest rebuilt from the packs alone: the same segments
    conn = sqlite_store.connect(store_home)
    try:
        before = conn.execute("SELECT gen_id, seq, offset, length, sha, skip FROM vault_segments").fetchall()
        conn.execute("BEGIN IMMEDIATE")
        for t in ("vault_segments", "vault_generations", "vault_files", "vault_objects", "vault_packs"):
            conn.execute(f"DELETE FROM {t}")
        replay(conn, store_home)
        conn.execute("COMMIT")
        after = conn.execute("SELECT gen_id, seq, offset, length, sha, skip FROM vault_segments").fetchall()
        assert sorted(after) == sorted(before)
    finally:
        conn.close()
