"""``ctxkeep serve`` hands Prefect the API URL of the server it started, so Prefect
starts no second, temporary server beside it (newuser17 F16: ``prefect - Starting
temporary server on http://127.0.0.1:8655`` and ~0.2 GB RSS next to the announced
:4200). Prefect reads its settings once, when it is imported (its global settings
context): ``PREFECT_API_URL`` set in ``os.environ`` afterwards went unseen. No real
server here: ``start_server`` and ``prefect.serve`` are stand-ins that record what
Prefect would use (the real one: tests/flows/test_serve.py, CTXKEEP_RUN_SERVE=1)."""

from __future__ import annotations

import prefect
import pytest
from prefect.settings import get_current_settings

from ctxkeep.flows import serve as serve_mod

API = "http://127.0.0.1:4299/api"


class _Proc:
    def poll(self):
        return 0


@pytest.fixture
def stand_ins(monkeypatch):
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    prefect.context.refresh_global_settings_context()  # as a fresh process: no API URL
    seen: dict = {}
    monkeypatch.setattr(serve_mod, "start_server", lambda home, host, port: (_Proc(), API))
    monkeypatch.setattr(serve_mod, "build_deployments", lambda home, scheds: [])
    monkeypatch.setattr(serve_mod, "policy_schedules", lambda home: [])

    def fake_serve(*deps, **kw):
        seen["api_url"] = get_current_settings().api.url

    monkeypatch.setattr(prefect, "serve", fake_serve)
    yield seen
    prefect.context.refresh_global_settings_context()


def test_prefect_is_given_the_started_servers_url(stand_ins, tmp_path):
    assert get_current_settings().api.url is None  # prefect imported before serve starts
    serve_mod.serve(tmp_path, port=4299)
    assert stand_ins["api_url"] == API  # before: None, Prefect's temporary server


def test_a_team_run_is_given_it_too(stand_ins, tmp_path):
    serve_mod.serve(tmp_path, port=4299, run=lambda api: stand_ins.update(run=get_current_settings().api.url))
    assert stand_ins["run"] == API
