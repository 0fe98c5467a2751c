"""Backfill's date range (issue 15): one rule for --since and --until, on the record
times inside each file (not its mtime), both ends inclusive. The expected files are
computed here by parsing every corpus file whole with json (not the byte scan under
test)."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import CORPUS_HOME
from ctxkeep.maintenance.backfill import record_span, select_backfill

AGENTS = ["claude-code", "codex", "gemini-cli"]


def _times(obj, out: list) -> None:
    """Every record time in a parsed JSON value (the keys the three agents write)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in ("timestamp", "startTime", "lastUpdated") and isinstance(v, str) and len(v) >= 19:
                out.append(dt.datetime.fromisoformat(v.replace("Z", "+00:00")))
            elif isinstance(v, (dict, list)):
                _times(v, out)
    elif isinstance(obj, list):
        for v in obj:
            _times(v, out)


def _span(path) -> tuple[dt.datetime, dt.datetime] | None:
    """(first, last) record time of a whole file, parsed with json; None when it has none."""
    out: list = []
    text = path.read_text(encoding="utf-8")
    try:
        _times(json.loads(text), out)  # a Gemini CLI document
    except ValueError:
        for line in text.splitlines():
            try:
                _times(json.loads(line), out)
            except ValueError:
                continue
    return (min(out), max(out)) if out else None


def _expected(files, since: dt.datetime | None, until_end: dt.datetime | None) -> set[str]:
    keep = set()
    sides = [f for f in files if f.meta.get("sidecar_of")]  # go with their transcript
    for f in files:
        if f in sides:
            continue
        s = _span(f.path)
        if s and since and s[1] < since:
            continue
        if s and until_end and s[0] >= until_end:
            continue
        keep.add(f.path.name)
    keep |= {f.path.name for f in sides if Path(f.meta["sidecar_of"]).name in keep}
    return keep


@pytest.fixture
def copied_ctx(tmp_path):
    """The corpus home copied, every file's mtime set to now (as a copy or a restore
    does): the selection must not depend on mtimes."""
    from ctxkeep.sources.contract import DiscoveryContext

    dst = tmp_path / "home"
    shutil.copytree(CORPUS_HOME, dst)
    for root, _, names in os.walk(dst):
        for n in names:
            os.utime(os.path.join(root, n))
    return DiscoveryContext(home=dst, env={})


def D(s: str) -> dt.datetime:
    return dt.datetime.fromisoformat(s).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    "since,until,lo,hi",
    [
        (None, "2025-06-30", None, D("2025-07-01")),
        ("2025-12-01", None, D("2025-12-01"), None),
        ("2025-11-01", "2025-11-01", D("2025-11-01"), D("2025-11-02")),
        ("2025-09-26T12:00", "2025-10-31", D("2025-09-26T12:00"), D("2025-11-01")),
    ],
)
def test_date_range_selects_by_record_times(tmp_path, copied_ctx, since, until, lo, hi):
    every, _ = select_backfill(tmp_path / "store", ctx=copied_ctx, agents=AGENTS)
    # 16 Claude Code + Codex files (test_maintenance), 4 Gemini CLI, 1 sidecar (the
    # sub-agent's .meta.json: no record time, it goes with its transcript)
    assert len(every) == 21
    files, _ = select_backfill(tmp_path / "store", ctx=copied_ctx, agents=AGENTS, since=since, until=until)
    want = _expected(every, lo, hi)
    assert {f.path.name for f in files} == want
    assert 0 < len(want) < len(every)


def test_until_june_lists_no_december_file(tmp_path, copied_ctx):
    """The finding: `--until 2025-06-30` listed December (Gemini) files."""
    files, _ = select_backfill(tmp_path / "store", ctx=copied_ctx, agents=AGENTS, until="2025-06-30")
    names = sorted(f.path.name for f in files)
    assert names == sorted(
        [
            "d3ad4cdc-5657-435d-98fa-0035d53e383d.jsonl",  # 2025-06-08
            "ff71dbed-a4f2-4284-a4fc-fe2fb90de929.jsonl",  # a summary line only: no time, kept
            "2c5941bd-b9de-41d6-9414-221d175776f7.jsonl",  # 0 bytes: kept
        ]
    )


def test_record_span_reads_both_ends_of_big_files():
    f = (
        CORPUS_HOME
        / ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
    )
    assert f.stat().st_size > 4 * 65536
    assert record_span(f) == _span(f)
    g = next((CORPUS_HOME / ".gemini/tmp").glob("*/chats/session-2025-12-24T06-27-36e8d28f.json"))
    first, last = record_span(g)
    assert (first, last) == _span(g) and last == D("2025-12-24T06:40:49.587")  # its lastUpdated
