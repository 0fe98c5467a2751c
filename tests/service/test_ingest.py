"""``service.ingest``: what ``ctxkeep ingest`` decides, asked without the CLI.

The outcome's ``--json`` object validates against ``shapes.IngestResult`` (the model
docs/cli.md documents it from); the plan's problems reach the front end before the
run; a run with nothing new stores nothing and says what is held back; a dry run
creates no store; a bad task runner is a usage error.
"""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.service import ingest as svc
from ctxkeep.service.shapes import IngestResult
from session_lines import claude_lines


def _session(tmp_path, n: int = 6):
    sid = str(uuid.uuid4())
    path = tmp_path / "user" / ".claude" / "projects" / "-tmp-svc" / f"{sid}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(claude_lines(sid, n, dt.datetime(2026, 11, 30, tzinfo=dt.UTC))) + "\n")
    return path


def test_ingest_of_a_file_then_nothing_new(tmp_path):
    home, path = tmp_path / "home", _session(tmp_path)
    said: list[str] = []
    missing = tmp_path / "gone.jsonl"
    req = svc.IngestRequest(paths=(path, missing), prefect=False)
    out = svc.ingest(home, req, svc.IngestProgress(on_problem=said.append))
    data = out.as_json()
    IngestResult.model_validate(data)
    assert data["schema"] == 1 and data["entries_new"] == 6 and data["per_agent"] == {"claude-code": 6}
    assert said == data["problems"] and any(str(missing) in p for p in said)
    assert data["held_back"] == [] and out.held_note is None
    again = svc.ingest(home, svc.IngestRequest(paths=(path,), prefect=False)).as_json()
    IngestResult.model_validate(again)
    assert again["entries_new"] == 0 and again["files"] == 1 and again["files_read"] == 0


def test_dry_run_creates_no_store(tmp_path):
    home, path = tmp_path / "home", _session(tmp_path)
    rep = svc.dry_run(home, svc.IngestRequest(paths=(path,))).as_json()
    IngestResult.model_validate(rep)
    assert rep["dry_run"] is True and rep["files"] == 1 and rep["bytes"] == path.stat().st_size
    assert rep["store"] is None and not (home / "store.db").exists()


def test_a_bad_task_runner_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError):
        svc.ingest(tmp_path / "home", svc.IngestRequest(task_runner="spark"))
    assert not (tmp_path / "home" / "store.db").exists()
