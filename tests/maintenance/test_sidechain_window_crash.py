"""SIGKILL trials of an ingest of one big Claude Code session of inline sidechains
(session 22, issue 26 target 2): the file's sidechain window (``claude_code._window_root``,
``SIDECHAIN_WINDOW``) lives in its watermark state, committed with the group's rows.
A kill after a group's commit leaves a watermark inside the file whose window is the
one at its offset (its most recent uuid is the last record's before the offset), and
the next ingest reads on from there to the store of a run never killed (each trial's
next ingest must end with the reference's store, wherever the kill landed). The kills land
in the read, where the writer commits the file's two groups (the other phases of an
ingest are the vault trials', ``test_vault_crash``).

The file: 24 MB (two 16 MiB batches), 9,000 chains written round robin, so each
record's parent is 9,000 sidechain records back: inside the 10,000-uuid window, which
is full and letting go of uuids all along (a window stored from later in the file, or
out of order, loses parents and changes sessions)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from ctxkeep.sources import claude_code
from tests import phase_kill
from tests.maintenance import test_vault_crash as vc
from tests.store_digest import store_digest

CHAINS = 9_000
SID = "5e55104e-0000-4000-8000-000000000022"


def _uuid(chain: int, i: int) -> str:
    return f"{chain:05x}{i:03x}-0000-4000-8000-000000000000"


def _home(home: Path, mb: int = 24) -> Path:
    proj = home / ".claude" / "projects" / "-work-sidechains"
    proj.mkdir(parents=True)
    path = proj / f"{SID}.jsonl"
    n = 0
    with path.open("w") as f:
        while f.tell() < mb * 1_000_000:
            chain, i = n % CHAINS, n // CHAINS
            rec = {
                "type": "user",
                "isSidechain": True,
                "uuid": _uuid(chain, i),
                "parentUuid": _uuid(chain, i - 1) if i else None,
                "sessionId": SID,
                "timestamp": f"2025-06-01T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
                "message": {
                    "role": "user",
                    "content": f"step {i} of sub-agent {chain}: record {n} " + "x" * 60,
                },
            }
            f.write(json.dumps(rec) + "\n")
            n += 1
    return path


#: where in the read (from the ingest's ``read`` mark to its ``written``: the writer
#: commits the file's groups then) the trials kill, as fractions of the reference's
FRACTIONS = (0.2, 0.35, 0.5, 0.65, 0.8)


@pytest.mark.slow
def test_sigkilled_ingests_of_a_sidechain_window_read_on_to_the_same_store(tmp_path):
    home = tmp_path / "home"
    path = _home(home)
    data = path.read_bytes()
    ref = tmp_path / "ref"
    traced = vc._reference("ingest", home, ref)
    want = store_digest(ref)
    conn = sqlite3.connect(f"file:{ref / 'store.db'}?mode=ro", uri=True)
    try:
        sessions = conn.execute(
            "SELECT count(DISTINCT session_id) FROM entries WHERE session_id LIKE ?", (f"{SID}/sidechain-%",)
        ).fetchone()[0]
    finally:
        conn.close()
    assert sessions == CHAINS  # every parent found in the window: one session per chain
    read = dict(phase_kill.phases(phase_kill.traced_marks(traced)))["read#1"]
    inside: list[int] = []
    for k, frac in enumerate(FRACTIONS):
        store = tmp_path / f"s{k}"
        if vc._killed("ingest", home, store, "read#1", read * frac) and vc._has_schema(store):
            vc._agrees(store)
            conn = sqlite3.connect(f"file:{store / 'store.db'}?mode=ro", uri=True)
            try:
                row = conn.execute(
                    "SELECT offset, state FROM watermarks WHERE path = ?", (str(path),)
                ).fetchone()
            finally:
                conn.close()
            if row is not None and 0 < row[0] < len(data):
                offset, state = row[0], json.loads(row[1])
                inside.append(offset)
                window = state["sc"]
                assert state["scw"] == claude_code.SIDECHAIN_WINDOW == len(window)
                last = json.loads(data[: offset - 1].rsplit(b"\n", 1)[-1])
                assert list(window)[-1] == last["uuid"]  # the window as at the offset
        assert vc._ingest(home, store)
        assert store_digest(store) == want
        shutil.rmtree(store)
    # in the session-22 runs (load 20-50) the writer stored the file's two groups in one
    # commit: no kill left a watermark inside the file, so the window-at-its-offset check
    # above did not run there (test_claude_sidechain_window's resume test covers it)
    print(f"\nwatermarks inside the file after a kill: {inside}")
