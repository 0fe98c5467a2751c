"""MCP robustness: ``confirm`` is true only for true/"true"; ``ctx_index`` refuses
pseudo-files, special files, credential files and files outside the project and home
dirs (unless ``[mcp] index_roots`` allows them)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ctxkeep.errors import UsageError
from ctxkeep.mcp.server import Handlers
from ctxkeep.service.index import check_index_path, index_roots
from ctxkeep.service.purge import strict_confirm


@pytest.mark.parametrize(
    "v,want", [(True, True), ("true", True), (" TRUE ", True), (None, None), (False, False), ("false", False)]
)
def test_confirm_is_a_boolean(v, want):
    assert strict_confirm(v) is want


@pytest.mark.parametrize("v", ["yes", "1", 1, "y", "ok", {}, []])
def test_confirm_anything_else_is_not_a_boolean(v):
    with pytest.raises(UsageError, match="confirm must be a boolean"):
        strict_confirm(v)


def test_purge_with_confirm_yes_is_refused_not_cancelled(tmp_path):
    with pytest.raises(UsageError) as e:
        Handlers(tmp_path / "home", tmp_path).ctx_purge({"sessionId": "abc", "confirm": "yes"})
    assert str(e.value) == (
        "confirm must be a boolean, got 'yes' (confirm) - pass confirm: true to purge "
        "(preview first with dryRun: true)"
    )


@pytest.mark.parametrize("path,msg", [("/proc/self/environ", "pseudo-file"), ("/etc/shadow", "credential")])
def test_system_files_refused(tmp_path, path, msg):
    if not os.path.exists(path):
        pytest.skip(f"{path} absent")
    with pytest.raises(UsageError, match=msg):
        check_index_path(path, tmp_path, [])


def test_fifo_and_socket_refused(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="socket, FIFO or device"):
        check_index_path(str(fifo), tmp_path, [])


@pytest.mark.parametrize(
    "name",
    [
        ".env",
        ".env.local",
        "server.pem",
        "tls.key",
        "id_ed25519",
        ".netrc",
        "credentials",
        ".npmrc",
        ".pypirc",
        "kubeconfig",
    ],
)
def test_credential_names_refused(tmp_path, name):
    f = tmp_path / name
    f.write_text("x=1\n")
    with pytest.raises(UsageError, match="credential file"):
        check_index_path(name, tmp_path, [])


def test_symlink_to_credential_refused(tmp_path):
    (tmp_path / ".env").write_text("A=1\n")
    (tmp_path / "notes.txt").symlink_to(tmp_path / ".env")
    with pytest.raises(UsageError, match="credential file"):
        check_index_path("notes.txt", tmp_path, [])


def test_outside_project_and_home_refused_unless_configured(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    (tmp_path / "h").mkdir()
    project, other = tmp_path / "p", tmp_path / "elsewhere"
    project.mkdir()
    other.mkdir()
    doc = other / "design.md"
    doc.write_text("# design\n")
    with pytest.raises(UsageError, match="outside the project and home"):
        check_index_path(str(doc), project, [])
    home = tmp_path / "ctxhome"
    home.mkdir()
    (home / "config.toml").write_text(f'[mcp]\nindex_roots = ["{other}"]\n')
    assert check_index_path(str(doc), project, index_roots(home)) == doc.resolve()
    inside = project / "README.md"
    inside.write_text("hi\n")
    assert check_index_path("README.md", project, []) == inside.resolve()


def test_ctx_index_refuses_through_the_handler(tmp_path):
    h = Handlers(tmp_path / "home", tmp_path)
    with pytest.raises(UsageError, match="pseudo-file"):
        h.ctx_index({"label": "x", "path": "/proc/self/environ"})
    with pytest.raises(UsageError, match="path must be a string"):
        h.ctx_index({"label": "x", "path": 5})


def test_index_roots_without_config(tmp_path):
    assert index_roots(Path(tmp_path)) == []
