"""Memory of a long ingest stays bounded (issue 26, target 2: peak RSS <= 1 GB at 10 GB):
the reader process forgets the contents it sent past ``KNOWN_MAX`` without the ingest
process holding a content twice, and DuckDB's writer connection has a memory limit."""

import hashlib

import polars as pl

from ctxkeep.pipeline import reader_process
from ctxkeep.pipeline.transform import Precomputed
from ctxkeep.sinks import duckdb as duckdb_store


def _h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _rows(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"content_hash": [_h(t) for t in texts], "text": texts})


def _keys(texts: list[str]) -> set[int]:
    return {int(_h(t)[: reader_process.KNOWN_DIGITS], 16) for t in texts}


def test_reader_forgets_what_it_sent_past_the_cap(monkeypatch):
    monkeypatch.setattr(reader_process, "KNOWN_MAX", 3)
    known: set[int] = set()
    assert reader_process._precompute(_rows(["a", "b", "c"]), known) is not None
    # remembered as ints of the hashes' first digits, not as 64-character strings
    assert known == _keys(["a", "b", "c"]) and all(k < 16**15 for k in known)
    # a content sent before is not sent again while remembered
    assert reader_process._precompute(_rows(["a"]), known) is None
    # at the cap the set is emptied before the new ones go in: it never grows past it
    assert reader_process._precompute(_rows(["d"]), known) is not None
    assert known == _keys(["d"])
    # forgotten, "a" is sent again (counted twice, never missed)
    assert reader_process._precompute(_rows(["a"]), known) is not None


def test_contents_sharing_the_remembered_digits_cost_cpu_only():
    """Two hashes alike in their first ``KNOWN_DIGITS`` digits: the second is taken for
    sent and not computed ahead; the ingest process's ``take`` of a group holding it
    then gets None (it counts the group itself) rather than a wrong count."""
    a, b = "0" * 15 + "a" * 49, "0" * 15 + "b" * 49
    rows = pl.DataFrame({"content_hash": [a, b], "text": ["one text", "another text"]})
    known: set[int] = set()
    got = reader_process._precompute(rows.head(1), known)
    assert got is not None and reader_process._precompute(rows.tail(1), known) is None
    pre = Precomputed()
    pre.add(pl.read_ipc(got[0]), pl.read_ipc(got[1]))
    assert pre.take([a, b]) is None and pre.take([a]) is not None


def test_a_content_sent_twice_is_held_once():
    pre = Precomputed()
    known: set[int] = set()
    for texts in (["alpha beta", "gamma"], ["gamma", "delta"]):
        known.clear()  # as after KNOWN_MAX: the reader sends "gamma" again
        contents_ipc, chunks_ipc = reader_process._precompute(_rows(texts), known)
        pre.add(pl.read_ipc(contents_ipc), pl.read_ipc(chunks_ipc))
    counts, methods, chunks = pre.take([_h("alpha beta"), _h("gamma"), _h("delta")])
    assert len(counts) == len(methods) == 3
    # one chunk row per short content, none doubled
    assert chunks.group_by("content_hash").len().sort("content_hash")["len"].to_list() == [1, 1, 1]
    assert pre.tokens == {}


def test_writer_connection_has_a_memory_limit(tmp_path):
    con = duckdb_store.connect(tmp_path)
    try:
        limit = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    finally:
        con.close()
    assert limit == "244.1 MiB"  # DuckDB prints 256 MB (10^6) in MiB
