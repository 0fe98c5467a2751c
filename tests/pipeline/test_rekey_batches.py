"""``readahead.read_files`` redacts the raw bytes of consecutive batches in one call
(``stable_ids.rekey``) up to ``rekey_every`` (bytes, batches): a reader process takes
``PROCESS_REKEY`` (16 MiB) at a time, fewer calls for the same bytes, and the items,
their entry ids and the redacted bytes do not depend on how they were grouped."""

from __future__ import annotations

import pytest

from ctxkeep.pipeline import readahead
from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import DiscoveryContext
from fixtures.secrets import planted_session, positives


@pytest.fixture
def todo(home_copy):
    planted = home_copy / ".claude" / "projects" / "-tmp-rekey" / "5e551011-0000-4000-8000-0000000000aa.jsonl"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(planted_session(positives(7)))
    ctx = DiscoveryContext(home=home_copy, env={})
    return [(f, None) for a in ("claude-code", "codex") for f in SOURCES[a].discover(ctx).files]


def _read(todo, every, monkeypatch) -> tuple[int, list]:
    calls = []
    real = readahead.rekey
    monkeypatch.setattr(readahead, "rekey", lambda batches: (calls.append(len(batches)), real(batches)))
    out = []
    for it in readahead.read_files(todo, rekey_every=every):
        if it.batch is None:
            out.append((str(it.file.path), it.read))
            continue
        raw = it.batch.raw
        ids = [e.get("record_id") for e in it.batch.entries]
        out.append((str(it.file.path), ids, raw.redacted if raw is not None else None))
    return len(calls), out


def test_rekey_in_bigger_batches_gives_the_same_items(todo, monkeypatch):
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    assert readahead.PROCESS_REKEY[0] >= 4 * readahead.REKEY_BYTES
    small_calls, small = _read(todo, (256 * 1024, 4), monkeypatch)
    big_calls, big = _read(todo, readahead.PROCESS_REKEY, monkeypatch)
    assert big == small
    assert big_calls < small_calls / 3, (big_calls, small_calls)
    red = [x[2] for x in big if len(x) == 3 and x[2] is not None and x[2][1]]
    assert red  # the planted secrets were redacted (counts per kind)


def _flushes(todo, monkeypatch, **kw) -> tuple[list[list[int]], list]:
    """The raw bytes of each batch of each redaction call, and the items (as ``_read``)."""
    sizes: list[list[int]] = []
    real = getattr(readahead.rekey, "real", readahead.rekey)  # not a spy set before

    def spy(batches):
        sizes.append([len(b.raw.data) for b in batches if b.raw is not None])
        return real(batches)

    spy.real = real  # type: ignore[attr-defined]
    monkeypatch.setattr(readahead, "rekey", spy)
    out = []
    for it in readahead.read_files(todo, rekey_every=(1 << 40, 1 << 20), **kw):
        if it.batch is None:
            out.append((str(it.file.path), it.read))
        else:
            raw = it.batch.raw
            out.append(
                (
                    str(it.file.path),
                    [e.get("record_id") for e in it.batch.entries],
                    raw.redacted if raw is not None else None,
                )
            )
    return sizes, out


def test_a_readers_last_flushes_are_small_and_give_the_same_items(todo, monkeypatch):
    """``read_files(tail=(window, flush))``: once the files left hold fewer new bytes
    than the window, each flush ends at ``flush`` bytes (a reader's last items reach
    the ingest as they are read); before the window, and without ``tail``, one flush
    holds everything here. The items, entry ids and redacted bytes are the same."""
    monkeypatch.setenv("CTXKEEP_IDLE_SECONDS", "0")
    total = sum(readahead._new_bytes(f, wm) for f, wm in todo)
    assert total > 64 * 1024 and len(todo) > 8
    whole, items = _flushes(todo, monkeypatch)
    assert len(whole) == 1 and sum(whole[0]) > 0
    window, flush = total // 2, 16 * 1024
    tail, tail_items = _flushes(todo, monkeypatch, tail=(window, flush))
    assert tail_items == items
    assert _flushes(todo, monkeypatch, tail=(total, flush))[0] == whole  # no more than the window
    assert sorted(n for call in tail for n in call) == sorted(whole[0])
    assert len(tail) > 3
    # the first flush holds what was read before the window (at least half the bytes);
    # after it, each ends at the first batch that brings it to ``flush`` bytes
    assert sum(tail[0]) >= total - window, (tail[0], total)
    assert all(sum(call[:-1]) < flush for call in tail[1:]), tail
