"""The retention flow (``flows.maintenance.retention_flow``, daily under ``serve``)
honours the vault's generation policy of ``config.toml`` (issue 27): with ``[vault]
keep_generations = 1`` a run keeps each file's newest generation, byte-identical."""

from __future__ import annotations

import pytest

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest
from tests.maintenance.test_vault_retention import _gemini_store, _policy


@pytest.mark.slow
def test_the_retention_flow_prunes_by_the_configured_policy(tmp_path, monkeypatch):
    from prefect.testing.utilities import prefect_test_harness

    from ctxkeep.flows.maintenance import retention_flow

    (tmp_path / "user").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    _home, store, doc, vs = _gemini_store(tmp_path, 3)
    _policy(store, keep_generations=1)
    with prefect_test_harness(server_startup_timeout=180):
        dry = retention_flow(str(store), dry_run=True)
        rep = retention_flow(str(store))
    assert [g["gen"] for g in dry["vault"]["generations"]] == [1, 2]
    assert rep["vault"]["pruned"]["generations"] == 2 and rep["vault"]["bytes_freed"] > 0
    conn = sqlite_store.connect(store, readonly=True)
    try:
        (g,) = manifest.generations_of(conn, str(doc))
        assert g.gen == 3 and manifest.gen_bytes(conn, store, g) == vs[-1]
    finally:
        conn.close()
