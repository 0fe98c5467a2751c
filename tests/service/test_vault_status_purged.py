"""``vault status`` after a purge (new-user trial): a purged session's file is at risk
by the user's choice, and `ctxkeep ingest` (what the warning advised) skips it. The
warning names the purge and what helps: `purge … --reingest`, then `ingest`."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.service.vault import VaultStatusRequest, vault_status
from tests.conftest import ingest, q


def test_a_purged_file_at_risk_names_its_purge_and_the_way_back(home_copy, tmp_path, monkeypatch):
    (home_copy / ".claude" / "settings.json").write_text(json.dumps({"cleanupPeriodDays": 7}))
    store = tmp_path / "store"
    ingest(home_copy, store, agents="claude-code")
    req = VaultStatusRequest.parse(home=store, user_home=home_copy)
    assert vault_status(req).at_risk == 0
    sid, path = q(
        store,
        "SELECT session_id, source_path FROM entries WHERE parent_session_id IS NULL "
        "AND source_path IS NOT NULL ORDER BY session_id LIMIT 1",
    )[0]
    runner = CliRunner()
    r = runner.invoke(app, ["purge", "--home", str(store), "--session", sid, "--yes"])
    assert r.exit_code == 0, r.output
    res = vault_status(req)
    risky = {x.path: x for a in res.agents for x in a.at_risk}
    assert risky[path].purged == f"session {sid}" and risky[path].vaulted_bytes == 0
    monkeypatch.setenv("HOME", str(home_copy))
    r = runner.invoke(app, ["vault", "status", "--home", str(store)])
    line = " ".join(r.stderr.split())
    assert f"(you purged session {sid})" in line
    assert f"`ctxkeep purge --session {sid} --reingest`, then `ctxkeep ingest`" in line
    assert "run `ctxkeep ingest` before then" not in line  # no other file is at risk
    # the advice works: ingest alone leaves it out, the advised pair vaults it again
    ingest(home_copy, store, agents="claude-code")
    assert path in {x.path for a in vault_status(req).agents for x in a.at_risk}
    r = runner.invoke(app, ["purge", "--home", str(store), "--session", sid, "--reingest", "--yes"])
    assert r.exit_code == 0, r.output
    ingest(home_copy, store, agents="claude-code")
    assert vault_status(req).at_risk == 0
