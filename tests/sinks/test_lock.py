"""The store lock (``sinks.lock.hold``): excludes other processes, reentrant within
one, says when it waits, and fails with StoreBusy past its timeout."""

from __future__ import annotations

import os
import stat

import pytest

from conftest import hold_lock_in_subprocess
from ctxkeep.errors import StoreBusy, StoreError
from ctxkeep.sinks.files import LOCK_FILE
from ctxkeep.sinks.lock import StoreLock, hold


def test_hold_is_reentrant_and_releases(store_home):
    with hold(store_home, 0) as lk:
        with hold(store_home, 0):
            assert lk.is_locked
        assert lk.is_locked
    assert not lk.is_locked
    assert lk.path == store_home / LOCK_FILE
    assert stat.S_IMODE(os.stat(lk.path).st_mode) & 0o077 == 0


def test_another_process_holding_it_is_reported(store_home):
    told = []
    holder = hold_lock_in_subprocess(store_home)
    try:
        with (
            pytest.raises(StoreBusy, match="holds the store; purge not started") as ei,
            hold(store_home, 0, what="purge", on_wait=told.append),
        ):
            pass
        assert ei.value.where == str(store_home / LOCK_FILE)
        assert told == []  # timeout 0 does not wait, so there is nothing to say
        with (
            pytest.raises(StoreBusy, match="ingest not started"),
            hold(store_home, 0.3, what="ingest", on_wait=told.append),
        ):
            pass
        assert told == [str(store_home / LOCK_FILE)]
    finally:
        holder.communicate(b"\n", timeout=30)
    with hold(store_home, 0, on_wait=told.append):  # released by the other process
        pass
    assert len(told) == 1


def test_a_read_only_parent_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(StoreError, match="read-only"):
            StoreLock(ro / "home")
        assert not (ro / "home").exists()
    finally:
        ro.chmod(0o700)
