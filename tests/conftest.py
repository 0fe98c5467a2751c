"""Shared fixtures. Corpus files are referenced from ../shared/corpus, never copied."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = (ROOT.parent / "shared" / "corpus").resolve()
CORPUS_HOME = CORPUS / "home"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Files count as idle (complete) at once: CI lays out shared/corpus moments before the
# tests run, so the default 120 s rule would hold back the corpus files' last turns.
# Tests of the idle rule set CTXKEEP_IDLE_SECONDS themselves.
os.environ["CTXKEEP_IDLE_SECONDS"] = "0"


def corpus(rel: str) -> Path:
    """A corpus file by its path under ``shared/corpus/home``."""
    p = CORPUS_HOME / rel
    if not p.exists():
        pytest.skip(f"corpus file missing: {p}")
    return p


@pytest.fixture
def store_home(tmp_path) -> Path:
    """An empty ctxkeep home in a temp dir."""
    h = tmp_path / "ctxkeep-home"
    h.mkdir()
    return h


@pytest.fixture
def corpus_ctx():
    """A discovery context whose HOME is the corpus home (no environment overrides)."""
    from ctxkeep.sources.base import DiscoveryContext
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    return DiscoveryContext(home=CORPUS_HOME, env={})


@pytest.fixture(scope="session")
def corpus_store(tmp_path_factory):
    """A store ingested once from the whole corpus (read-only use in tests)."""
    from ctxkeep.flows.pipeline import run_ingest
    from ctxkeep.sources.base import DiscoveryContext
    if not CORPUS_HOME.is_dir():
        pytest.skip("shared/corpus not present")
    home = tmp_path_factory.mktemp("corpus-store")
    summary = run_ingest(home, ctx=DiscoveryContext(home=CORPUS_HOME, env={}))
    return home, summary


@pytest.fixture
def home_copy(tmp_path) -> Path:
    """A writable copy of the corpus home (for append/rewrite tests)."""
    dst = tmp_path / "home"
    shutil.copytree(CORPUS_HOME, dst)
    return dst
