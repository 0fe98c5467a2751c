"""``files.fsync_dir``: the one directory fsync of the durable renames (compaction,
the vault's packs, compress's rewrites, the hooks' settings writes)."""

from __future__ import annotations

import os

import pytest

from ctxkeep.sinks import files


def test_a_directory_is_synced(tmp_path, monkeypatch):
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    files.fsync_dir(tmp_path)
    files.fsync_dir(tmp_path, strict=True)
    assert len(synced) == 2


def test_a_failure_is_raised_only_when_strict(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    files.fsync_dir(gone)  # (nothing to open: left as it is)
    with pytest.raises(FileNotFoundError):
        files.fsync_dir(gone, strict=True)

    def refuse(fd):
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(files.os, "fsync", refuse)
    files.fsync_dir(tmp_path)
    with pytest.raises(OSError):
        files.fsync_dir(tmp_path, strict=True)
