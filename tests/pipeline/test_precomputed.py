"""What a reader process counts ahead (``transform.Precomputed``: token estimates and
chunk rows of the contents it met first in a chunk) is kept only until the group that
holds those contents is transformed: contents the store already held were never taken
and stayed for the whole run (issue 26: a big ingest's process grew with its input)."""

from __future__ import annotations

import shutil

import pytest

from conftest import CORPUS_HOME
from ctxkeep.pipeline import engine, transform
from ctxkeep.sources.contract import DiscoveryContext


def test_nothing_counted_ahead_outlives_its_group(tmp_path, monkeypatch):
    files = sorted((CORPUS_HOME / ".claude" / "projects").rglob("*.jsonl")) if CORPUS_HOME.is_dir() else []
    if not files:
        pytest.skip("shared/corpus not present")
    src = max(files, key=lambda p: p.stat().st_size)
    home = tmp_path / "home"
    first = home / ".claude" / "projects" / "-a" / src.name
    first.parent.mkdir(parents=True)
    shutil.copyfile(src, first)
    ctx = DiscoveryContext(home=home, env={})
    monkeypatch.setattr(engine, "PROCESS_READ_BYTES", 0)  # read in a reader process
    held: list[transform.Precomputed] = []
    real = transform.Precomputed.__init__

    def init(self):
        real(self)
        held.append(self)

    monkeypatch.setattr(transform.Precomputed, "__init__", init)
    one = engine.run_ingest(tmp_path / "store", ctx=ctx)
    # the same session again under another project: every content is in the store
    again = home / ".claude" / "projects" / "-b" / src.name
    again.parent.mkdir(parents=True)
    shutil.copyfile(src, again)
    two = engine.run_ingest(tmp_path / "store", ctx=ctx)
    assert one.entries_new > 50 and two.files_read == 1
    assert len(held) == 2
    assert [len(p.tokens) for p in held] == [0, 0]
    assert [sum(c.height for c in p.chunks) for p in held] == [0, 0]
