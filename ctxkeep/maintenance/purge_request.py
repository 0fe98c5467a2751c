"""The purge request: what a caller may ask ``maintenance.purge`` to remove, checked.

The contract shared by ``ctxkeep purge``, the purge flow and MCP ``ctx_purge`` (from
the ctx_purge seed of context-mode, restated in DESIGN.md):

- exactly one scope: ``session`` (with a session id) or ``project`` (``project_dir``,
  else the caller's working directory); ``all`` (wipe the store) is built by the CLI only;
- ``confirm`` is required (``True``/``False`` or the strings ``"true"``/``"false"``);
  ``confirm`` false raises ``PurgeCancelled`` (``Purge cancelled. Pass confirm: true to
  proceed.``);
- a session id together with ``scope="project"`` is an ``Ambiguous purge``; ``scope=
  "session"`` without an id is an error; a bare ``{confirm: true}`` is refused (no silent
  whole-project wipe);
- a project dir that holds every project (the filesystem root, the home directory or
  above it) is refused: its tombstone would block every future ingest.

``parse_purge_request`` touches no store. Resolving what the user named against the
store is the second step (``resolve_session_request``: a session id prefix as hits show
it; ``project_spellings``: the project's other spellings through symlinks), and
``require_match`` turns a purge that would remove nothing into "no such session" (no
tombstone). ``maintenance.purge_named.purge_named`` runs the three for the CLI and MCP.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ctxkeep.errors import PurgeCancelled, SessionNotFound, UsageError
from ctxkeep.paths import every_project_reason, holds_every_project, is_under, normalize_dir
from ctxkeep.sinks.sqlite import lookup

SCOPES = ("session", "project")


@dataclass(frozen=True)
class PurgeRequest:
    """A validated purge scope.

    ``scope``: ``"session"`` (``session_id`` set), ``"project"`` (``project_dir`` set: an
    absolute, normalized path without trailing separator) or ``"all"`` (CLI only).
    """

    scope: str
    session_id: str | None = None
    project_dir: str | None = None

    @property
    def value(self) -> str:
        """The scope's key: the session id, the project dir, or ``"*"`` for all."""
        return {"session": self.session_id, "project": self.project_dir}.get(self.scope) or "*"

    def describe(self) -> str:
        """One line naming the resolved scope, e.g. ``session 0d3a…`` or ``project /x``."""
        if self.scope == "all":
            return "the whole store"
        return f"{self.scope} {self.value}"


def _as_bool(value, name: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1", "yes"):
            return True
        if v in ("false", "0", "no"):
            return False
    raise UsageError(f"{name} must be true or false, got {value!r}", where=name)


def check_confirm(confirm) -> None:
    """Apply the contract's confirm rules: returns when ``confirm`` is true (``True``,
    ``"true"``, ``"1"``, ``"yes"``); raises PurgeCancelled when it is false, UsageError
    when it is missing or not a boolean."""
    ok = _as_bool(confirm, "confirm")
    if ok is None:
        raise UsageError(
            "purge needs a confirmation (none was given)",
            where="confirm",
            hint="preview first (a dry run), then confirm",
        )
    if ok is False:
        raise PurgeCancelled()


def parse_purge_request(
    *, session_id=None, scope=None, project_dir=None, confirm=None, cwd: str
) -> PurgeRequest:
    """Validate a purge call against the ctx_purge contract and resolve its scope.

    Args:
        session_id: the agent's session id (scope session); blank strings count as none.
        scope: ``"session"`` or ``"project"`` (or None: ``session`` when a session id is
            given, ``project`` when only ``project_dir`` is).
        project_dir: the project's directory (scope project); default ``cwd``. Relative
            paths are resolved against ``cwd``; ``~`` is expanded.
        confirm: required; ``True``/``False`` or ``"true"``/``"false"`` (also ``"1"``,
            ``"0"``, ``"yes"``, ``"no"``).
        cwd: the caller's working directory (the MCP server's, or the shell's).

    Returns a PurgeRequest. Raises PurgeCancelled when ``confirm`` is false (checked
    first: a cancelled call changes nothing whatever else it says); UsageError when
    ``confirm`` is missing or not a boolean, the scope is unknown, a session id comes
    with scope project (``Ambiguous purge …``), scope session lacks an id, neither
    a session id nor a scope nor a project dir is given, or the project dir is the
    filesystem root, the home directory or above it (``_too_broad``: a project
    tombstone there would block every future ingest; ``purge --all`` wipes instead).
    """
    check_confirm(confirm)
    sid = str(session_id).strip() if session_id is not None else ""
    sc = str(scope).strip().lower() if scope is not None and str(scope).strip() else None
    pdir = str(project_dir).strip() if project_dir is not None and str(project_dir).strip() else None
    if sc is not None and sc not in SCOPES:
        raise UsageError(
            f"unknown purge scope {scope!r}",
            where="scope",
            hint="purge a session (give its id) or a project (give its directory, default the working directory)",
        )
    if sc == "project" and sid:
        raise UsageError(
            f"Ambiguous purge: a session id ({sid}) was given together with the project scope",
            where="session",
            hint="purge either the session or the project, not both",
        )
    if sc == "session" and not sid:
        raise UsageError(
            "purge of a session needs a session id",
            where="session",
            hint="give the session's id, or purge the project instead",
        )
    if sid and pdir:
        raise UsageError(
            f"Ambiguous purge: a session id ({sid}) was given together with a project dir ({pdir})",
            where="project",
            hint="give only one of them",
        )
    if sc is None:
        if sid:
            sc = "session"
        elif pdir:
            sc = "project"
        else:
            raise UsageError(
                "Purge needs a scope: a session (its id) or a project (its directory, default "
                "the working directory)",
                hint="nothing was purged",
            )
    if sc == "session":
        return PurgeRequest("session", session_id=sid)
    d = normalize_dir(pdir or cwd, cwd)
    if _too_broad(d):
        raise UsageError(
            f"refusing to purge project {d}: it is {every_project_reason(d)}, which holds every project"
            + ("" if pdir else " (it is the working directory: no project directory was given)"),
            where="project",
            hint="name one project's directory, or wipe the whole store with `ctxkeep purge --all`",
        )
    return PurgeRequest("project", project_dir=d)


def _too_broad(d: str) -> bool:
    """True for a project dir that would purge (and tombstone, so never ingest again)
    every project: ``/``, a drive root, the user's home directory or an ancestor of it."""
    return holds_every_project(d)


# ---------------------------------------------------------------- what the user named, in the store


def resolve_session_request(conn, req: PurgeRequest) -> PurgeRequest:
    """``req`` with its session named as hits show it (a unique prefix, or
    ``<parent's short id>/<rest>`` for a sidechain) replaced by the full stored id
    (``sinks.sqlite.lookup.resolve_session``, the resolver of every ``--session``).

    A text that no stored entry's session starts with is kept as given: a full id may
    still name usage rows or Parquet-archived entries of a session retention moved out
    of ``entries`` (the purge preview decides, ``require_match``). Raises
    ``AmbiguousSession`` (listing the candidates) when the prefix names several
    sessions."""
    from ctxkeep.sinks.sqlite.lookup import resolve_session

    if req.scope != "session" or req.session_id is None:
        return req
    try:
        return PurgeRequest("session", session_id=resolve_session(conn, req.session_id, where="sessionId"))
    except SessionNotFound:
        return req


def project_spellings(conn, req: PurgeRequest) -> list[PurgeRequest]:
    """The project requests that purge ``req``'s directory as the store spells it.

    A project is also matched through symlinks, resolving both sides: the stored
    ``project_dir`` values (``SELECT DISTINCT``) whose real path (``os.path.realpath``,
    POSIX absolute paths only) is the real path of ``req.project_dir`` or below it are
    purged too, each under its nearest ancestor whose real path is that directory (so
    ``/home/u/link/app`` for ``/data/app`` when ``link`` → ``/data``; that ancestor's
    tombstone keeps later sessions there out too). Returns ``[req]`` first, then one
    request per other spelling, none under another. Refuses a spelling that is too
    broad (``_too_broad``) with UsageError, as ``parse_purge_request`` does."""
    root = req.project_dir
    if req.scope != "project" or root is None:
        return [req]
    if not root.startswith("/"):
        return [req]
    real = os.path.realpath(root)
    roots: list[str] = []
    for d in lookup.absolute_project_dirs(conn):
        if is_under(d, root):
            continue  # the engine's own match
        if not is_under(os.path.realpath(d), real):
            continue
        roots.append(_spelling_root(d, real))
    if real != root and not is_under(real, root):
        roots.append(real)  # the real path itself: its tombstone keeps either spelling out
    out = [req]
    for r in sorted(set(roots), key=len):
        if any(x.project_dir and is_under(r, x.project_dir) for x in out):
            continue
        if _too_broad(r):
            raise UsageError(
                f"refusing to purge project {r}: {root} resolves to it through a symlink, and "
                f"it holds every project",
                where="projectDir",
                hint="name one project's directory",
            )
        out.append(PurgeRequest("project", project_dir=r))
    return out


def _spelling_root(d: str, real: str) -> str:
    """The nearest ancestor of stored dir ``d`` (``d`` itself included) whose real path
    is ``real``; ``d`` when none is (a symlink below the project dir)."""
    p = d
    while True:
        if os.path.realpath(p) == real:
            return p
        up = os.path.dirname(p)
        if up == p:
            return d
        p = up


def matched(preview: dict) -> bool:
    """True when a purge preview (``purge.run_purge(dry_run=True)``) would remove
    anything: entries, usage rows, quarantined lines or archived rows."""
    r = preview.get("removed") or {}
    return any(r.get(k) for k in ("entries", "usage", "quarantine", "archived"))


def require_match(req: PurgeRequest, previews: list[dict]) -> None:
    """Raise ``SessionNotFound`` (``no such session X``) or ``NotFound`` (``nothing
    stored under project X``), both exit 1, when none of ``previews`` (one per
    spelling of ``req``) would remove anything: a purge that matches nothing changes
    nothing and adds no tombstone."""
    from ctxkeep.errors import NotFound, SessionNotFound

    if any(matched(p) for p in previews):
        return
    if req.scope == "session":
        raise SessionNotFound(
            f"no such session {req.session_id}",
            where="sessionId",
            hint="nothing was purged and no tombstone added; see `ctxkeep sessions` for the ids",
        )
    raise NotFound(
        f"nothing stored under project {req.project_dir} (symlinks resolved)",
        where="projectDir",
        hint="nothing was purged and no tombstone added; to keep a project out of the store "
        "for good, list it under [purge] projects in config.toml",
    )
