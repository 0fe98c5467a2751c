"""Fixtures of the query tests."""

from __future__ import annotations

import pytest

from ctxkeep.sinks import sqlite as sqlite_store


@pytest.fixture(scope="module")
def corpus_conn(corpus_store):
    """A read-only connection to the corpus store (``corpus_store``), one per module."""
    home, _ = corpus_store
    conn = sqlite_store.connect(home, readonly=True)
    yield conn
    conn.close()
