"""A first ingest of the corpus groups agents' small parts together
(``engine.PART_GROUP_BYTES``): fewer groups (transforms, transactions, vault packs)
and the same store as a group per part, the layout before it: entries, contents,
chunks (titles, texts, facets), usage, watermarks, quarantine, the FTS5 rows, and the
vault's files, generations, segments and objects (by digest, whichever pack holds
them, each object's bytes read back)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine
from ctxkeep.sinks.vault.packs import read_object
from ctxkeep.sources.contract import DiscoveryContext
from store_digest import store_digest


def _vault(home: Path) -> tuple[list, dict]:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        manifest = c.execute(
            "SELECT f.path, f.agent, f.mode, g.gen, g.start, g.length, g.stored, g.redactions, "
            "s.seq, s.offset, s.length, s.sha, s.skip FROM vault_files f JOIN vault_generations g "
            "USING (vfile_id) LEFT JOIN vault_segments s USING (gen_id) ORDER BY f.path, g.gen, s.seq"
        ).fetchall()
        objects = c.execute(
            "SELECT o.sha, p.name, o.offset, o.stored, o.raw FROM vault_objects o JOIN vault_packs p USING (pack_id)"
        ).fetchall()
    return manifest, {sha: read_object(home, name, off, st, raw, sha) for sha, name, off, st, raw in objects}


def _count(home: Path, table: str) -> int:
    with sqlite3.connect(f"file:{home / 'store.db'}?mode=ro", uri=True) as c:
        return c.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_small_parts_share_a_group_and_the_store_is_the_same(tmp_path, monkeypatch):
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    ctx = DiscoveryContext(home=CORPUS_HOME, env={})
    monkeypatch.setenv("CTXKEEP_VAULT", "1")
    merged = engine.run_ingest(tmp_path / "merged", ctx=ctx)
    monkeypatch.setattr(engine, "PART_GROUP_BYTES", 0)  # a group per part (per agent here)
    apart = engine.run_ingest(tmp_path / "apart", ctx=ctx)
    assert merged.entries_new == apart.entries_new == 3890
    # one load stamp and one vault pack per group: 9 agents' parts, 2 groups
    assert _count(tmp_path / "apart", "ingests") == _count(tmp_path / "apart", "vault_packs") == 9
    assert _count(tmp_path / "merged", "ingests") == _count(tmp_path / "merged", "vault_packs") == 2
    assert store_digest(tmp_path / "merged") == store_digest(tmp_path / "apart")
    for t in ("fts_words", "fts_grams", "fts_symbols", "fts_vocab"):
        # (the vocabulary's rowids are term ids, numbered as groups meet the terms)
        q = (
            f"SELECT term FROM {t} ORDER BY 1"
            if t == "fts_vocab"
            else f"SELECT rowid, * FROM {t} ORDER BY rowid"
        )
        rows = []
        for h in ("merged", "apart"):
            with sqlite3.connect(f"file:{tmp_path / h / 'store.db'}?mode=ro", uri=True) as c:
                rows.append(c.execute(q).fetchall())
        assert rows[0] == rows[1] and rows[0], t
    vm, va = _vault(tmp_path / "merged"), _vault(tmp_path / "apart")
    assert len(vm[0]) == len(va[0]) > 27 and vm[0] == va[0]
    assert vm[1] == va[1] and len(vm[1]) > 100
