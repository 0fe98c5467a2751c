"""Crush (charmbracelet/crush, the successor of the Go opencode): a per-project SQLite
database ``<project>/.crush/crush.db``.

Where: the project roots configured for ``crush`` (``session_dirs``), the projects
Crush itself lists in ``$XDG_DATA_HOME/crush/projects.json`` (``{"projects":
[{"path", "data_dir"}]}``, newer versions; ``%LOCALAPPDATA%\\crush`` on Windows) and a
bounded scan of the home directory for ``*/.crush/crush.db``.

Format and mapping: ``charm_db`` (real database in ``shared/corpus``,
``code/dbos-transact-golang/.crush/crush.db``, 2025-08: INTEGER Unix **seconds**
although the schema comments say milliseconds; a ``provider`` column). Change
detection: the file and its ``-wal``, then a per-row high-water mark on
``messages.updated_at``.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from ctxkeep.sources import charm_db
from ctxkeep.sources._scan import find_project_files
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile

AGENT = "crush"
PARSER_VERSION = 3  # 2: the logged cost (a re-read fills it); 3: tokens unknown (last response's)
MODE: Mode = "sqlite"
REL = ".crush/crush.db"


def _data_home(ctx: DiscoveryContext) -> Path:
    if ctx.env.get("XDG_DATA_HOME"):
        return Path(ctx.env["XDG_DATA_HOME"]).expanduser() / "crush"
    if ctx.env.get("LOCALAPPDATA") and os.name == "nt":
        return Path(ctx.env["LOCALAPPDATA"]) / "crush"
    return ctx.home / ".local" / "share" / "crush"


def _listed_projects(ctx: DiscoveryContext) -> list[Path]:
    """Databases named in Crush's ``projects.json`` (missing or bad file: none)."""
    p = _data_home(ctx) / "projects.json"
    try:
        data = orjson.loads(p.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return []
    out = []
    for proj in (data.get("projects") or []) if isinstance(data, dict) else []:
        if isinstance(proj, dict) and isinstance(proj.get("path"), str):
            dd = proj.get("data_dir") or ".crush"
            db = Path(proj["path"]) / dd / "crush.db" if not os.path.isabs(dd) else Path(dd) / "crush.db"
            if db.is_file():
                out.append(db)
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find Crush databases: configured dirs, ``projects.json``, then home (depth ≤ 4)."""
    d = Discovery(AGENT)
    roots = list(ctx.extra_dirs) + [ctx.home]
    d.searched = [_data_home(ctx) / "projects.json"] + [r / "**" / REL for r in roots]
    paths = set(_listed_projects(ctx)) | set(find_project_files(roots, REL))
    d.files = [SourceFile(AGENT, p, "sqlite") for p in sorted(paths)]
    if not d.files:
        d.reason = f"no */{REL} under {', '.join(map(str, roots))} (depth ≤ 4) and no projects.json"
    return d


def matches(path: Path) -> bool:
    """True for ``…/crush.db`` given with ``--path``."""
    return path.name == "crush.db"


#: new and changed rows (``charm_db.reader``)
read = charm_db.reader(AGENT, PARSER_VERSION)
