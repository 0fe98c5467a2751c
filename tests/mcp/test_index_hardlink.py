"""``ctx_index`` refuses a hard link as it refuses a symlink out of the project (issue
24, item 3): a hard link's other names cannot be found, so one may be outside."""

from __future__ import annotations

import os

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.service.index import check_index_path


def test_hard_link_to_a_file_outside_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    (tmp_path / "h").mkdir()
    project, outside = tmp_path / "p", tmp_path / "secret-place"
    project.mkdir()
    outside.mkdir()
    (outside / "private.txt").write_text("private notes\n")
    os.link(outside / "private.txt", project / "notes.txt")
    with pytest.raises(UsageError, match="hard link"):
        check_index_path("notes.txt", project, [])
    (project / "plain.txt").write_text("plain notes\n")  # a file with one name is indexed
    assert check_index_path("plain.txt", project, []) == (project / "plain.txt").resolve()
