"""``secrets --scrub`` per file (newuser18 F6, F7): a copy of a session file whose
entries the store files under the original (the same records: deduplicated) still holds
its own bytes, secrets included; the vault captured those bytes and counted their values,
so the copy is scrubbed too, with no FILE named or named alone. A FILE that does not
exist is an error; one that is no agent's session file is a skipped line, never a
silent "0 files"."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from ctxkeep.errors import NotFound
from ctxkeep.maintenance.scrub import run_scrub
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext
from tests.maintenance.test_scrub_vault import SID, _line

KEY = "sk_live_51HxYzAbCdEfGhIjKlMnOpQrStUvWx"


def _home(tmp_path, monkeypatch):
    user = tmp_path / "user"
    orig = user / ".claude" / "projects" / "-tmp-p" / f"{SID}.jsonl"
    orig.parent.mkdir(parents=True)
    orig.write_bytes(
        _line(1, "user", "hello") + _line(2, "assistant", "hi") + _line(3, "user", f"use {KEY} for the test")
    )
    copy = user / ".claude" / "projects" / "-tmp-q" / f"{SID}.jsonl"  # the project moved: a copy
    copy.parent.mkdir(parents=True)
    shutil.copyfile(orig, copy)
    for p in (orig, copy):
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    monkeypatch.setenv("HOME", str(user))
    store = tmp_path / "store"
    run_ingest(store, ctx=DiscoveryContext(home=user, env={}))
    return store, orig, copy


def test_a_copy_whose_entries_are_filed_under_the_original_is_scrubbed_too(tmp_path, monkeypatch):
    store, orig, copy = _home(tmp_path, monkeypatch)
    named = run_scrub(store, dry_run=True, paths=[copy])
    assert [(f["path"], f["status"]) for f in named["files"]] == [(str(copy), "would-scrub")]
    assert named["values"] == {"stripe-key": 1}
    whole = run_scrub(store, dry_run=True)
    assert sorted(f["path"] for f in whole["files"] if f["status"] == "would-scrub") == sorted(
        [str(orig), str(copy)]
    )
    done = run_scrub(store)
    assert done["scrubbed"] == 2, done["files"]
    for p in (orig, copy):
        assert KEY.encode() not in p.read_bytes()
        assert b"[REDACTED:stripe-key]" in p.read_bytes()
    for p in (orig, copy):
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    again = run_scrub(store, dry_run=True)
    assert again["would_scrub"] == 0 and again["values"] == {}, again["files"]


def test_a_named_file_that_does_not_exist_is_an_error(tmp_path, monkeypatch):
    store, _, _ = _home(tmp_path, monkeypatch)
    missing = tmp_path / "nope" / "file.jsonl"
    with pytest.raises(NotFound) as e:
        run_scrub(store, dry_run=True, paths=[missing])
    assert str(missing) in str(e.value.where) + str(e.value)


def test_a_named_file_of_no_agent_is_a_skipped_line(tmp_path, monkeypatch):
    store, _, _ = _home(tmp_path, monkeypatch)
    notes = tmp_path / "README.md"
    notes.write_text(f"my key {KEY}\n")
    r = run_scrub(store, dry_run=True, paths=[notes])
    assert [(f["path"], f["status"]) for f in r["files"]] == [(str(notes), "skipped")]
    assert r["files"][0]["reason"]
    assert r["skipped"] == 1
