"""The atomic JSONL rewrite with verified backups (maintenance.compress.rewrite). Files are
small handmade JSONL written in tmp_path."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from ctxkeep.maintenance.compress import rewrite as jr

ORIG = b'{"type":"user","n":1}\n{"type":"assistant","n":2}\n{"type":"user","n":3}\n'
NEW = b'{"type":"user","n":3}\n'


@pytest.fixture
def session(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(ORIG)
    os.chmod(p, 0o640)
    return p


def test_backup_then_replace_keeps_mode_and_inode_changes(session):
    data, st = jr.read_state(session)
    old_ino = os.stat(session).st_ino
    b = jr.make_backup(session, data, st)
    assert b.name == "s.jsonl.backup" and b.read_bytes() == ORIG
    assert oct(os.stat(b).st_mode & 0o777) == "0o640"
    new_st = jr.replace_file(session, NEW, st, expected_lines=1)
    assert session.read_bytes() == NEW
    assert oct(new_st.st_mode & 0o777) == "0o640"
    assert new_st.st_ino != old_ino
    assert [p.name for p in session.parent.iterdir() if jr.TMP_MARK in p.name] == []


def test_refuses_when_the_file_changed(session):
    data, st = jr.read_state(session)
    with open(session, "ab") as f:
        f.write(b'{"type":"user","n":4}\n')
    with pytest.raises(jr.RewriteError, match="changed since it was read"):
        jr.replace_file(session, NEW, st, expected_lines=1)
    assert session.read_bytes().startswith(ORIG)


def test_invalid_result_leaves_original_and_no_temp(session):
    data, st = jr.read_state(session)
    with pytest.raises(jr.RewriteError, match="did not validate: .*2 lines, planned 1"):
        jr.replace_file(session, NEW + b'{"x":1}\n', st, expected_lines=1)
    with pytest.raises(jr.RewriteError, match="line 1 does not parse"):
        jr.replace_file(session, b'{"x":\n', st, expected_lines=1)
    with pytest.raises(jr.RewriteError, match="caller says no"):
        jr.replace_file(session, NEW, st, expected_lines=1, check=lambda p: ["caller says no"])
    assert session.read_bytes() == ORIG
    assert sorted(p.name for p in session.parent.iterdir()) == ["s.jsonl"]


def test_backup_must_match_the_bytes_read(session):
    data, st = jr.read_state(session)
    with pytest.raises(jr.RewriteError, match="not the bytes read"):
        jr.make_backup(session, data + b"x", st)
    assert not (session.parent / "s.jsonl.backup").exists()


def test_rotation_uses_timestamps_and_never_overwrites(session):
    names = []
    for i in range(4):
        data, st = jr.read_state(session)
        jr.make_backup(session, data, st)
        session.write_bytes(ORIG + b'{"n":%d}\n' % (10 + i))
        names.append(sorted(p.name for p in jr.backup_paths(session)))
        time.sleep(0.002)
    bps = jr.backup_paths(session)
    assert len(bps) == 4 and bps[0].name == "s.jsonl.backup"
    assert all(jr._STAMP_RE.fullmatch(p.name.split(".backup.")[1]) for p in bps[1:])
    # newest first: .backup holds the 4th version, the oldest stamped one the 1st
    assert bps[0].read_bytes() == ORIG + b'{"n":12}\n'
    assert bps[-1].read_bytes() == ORIG
    gone = jr.prune_backups(session, keep=3, max_age_days=30)
    assert gone == [bps[-1]] and len(jr.backup_paths(session)) == 3


def test_prune_by_age(session):
    data, st = jr.read_state(session)
    jr.make_backup(session, data, st)
    jr.make_backup(session, data, st)
    old = jr.backup_paths(session)[1]
    past = time.time() - 40 * 86400
    os.utime(old, (past, past))
    assert jr.prune_backups(session, keep=3, max_age_days=30, dry_run=True) == [old]
    assert old.exists()
    assert jr.prune_backups(session, keep=3, max_age_days=30) == [old]
    assert not old.exists() and (session.parent / "s.jsonl.backup").exists()


def test_restore_puts_the_backup_back(session):
    data, st = jr.read_state(session)
    jr.make_backup(session, data, st)
    jr.replace_file(session, NEW, st, expected_lines=1)
    used, rst = jr.restore_backup(session)
    assert used.name == "s.jsonl.backup" and session.read_bytes() == ORIG
    assert used.exists()  # the backup is kept
    assert oct(rst.st_mode & 0o777) == "0o640"


def test_restore_without_backup_or_with_a_broken_one(session):
    with pytest.raises(jr.RewriteError, match="no backup to restore"):
        jr.restore_backup(session)
    (session.parent / "s.jsonl.backup").write_bytes(b'{"a":1}\n{"b":\n')
    with pytest.raises(jr.RewriteError, match="not valid JSONL"):
        jr.restore_backup(session)
    assert session.read_bytes() == ORIG


def test_cleanup_removes_only_our_temps(session):
    stray = session.parent / f".s.jsonl{jr.TMP_MARK}new.99999"
    stray.write_bytes(b"partial")
    other = session.parent / ".other.jsonl.ctxkeep-tmp.new.1"
    other.write_bytes(b"x")
    assert jr.cleanup_temps(session) == [stray]
    assert other.exists() and session.read_bytes() == ORIG


def test_sha256_file(session):
    assert jr.sha256_file(session) == hashlib.sha256(ORIG).hexdigest()
