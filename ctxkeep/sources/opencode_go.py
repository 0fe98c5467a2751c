"""The original Go ``opencode`` (opencode-ai/opencode, archived 2025; not sst/opencode):
a per-project SQLite database ``<project>/.opencode/opencode.db``.

Where: the project roots configured for ``opencode-go`` (``session_dirs``) and a
bounded scan of the home directory (``_scan``) for ``*/.opencode/opencode.db``; the
data dir name ``.opencode`` is the agent's default (``data.directory`` in
``.opencode.json``). Same paths on Linux, macOS and Windows (project-relative).

Format and mapping: ``charm_db`` (real database in ``shared/corpus``,
``code/noora/.opencode/opencode.db``, 2025-05, TEXT ISO timestamps). Change
detection: the file and its ``-wal`` (``unchanged``), then a per-row high-water mark
on ``messages.updated_at``.
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources import charm_db
from ctxkeep.sources._scan import find_project_files
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.readers.sqlite import open_ro

AGENT = "opencode-go"
PARSER_VERSION = 3  # 2: the logged cost (a re-read fills it); 3: tokens unknown (last response's)
MODE: Mode = "sqlite"
REL = ".opencode/opencode.db"


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<project>/.opencode/opencode.db`` under the configured dirs and home."""
    d = Discovery(AGENT)
    roots = list(ctx.extra_dirs) + [ctx.home]
    d.searched = [r / "**" / REL for r in roots]
    d.files = [SourceFile(AGENT, p, "sqlite") for p in find_project_files(roots, REL) if _is_go_opencode(p)]
    if not d.files:
        d.reason = f"no */{REL} of the Go opencode under {', '.join(map(str, roots))} (depth ≤ 4)"
    return d


def _is_go_opencode(path: Path) -> bool:
    """sst/opencode's own ``opencode.db`` lives in its data dir, not under a project's
    ``.opencode/``; still, check the table that only the Go schema has."""
    try:
        ro = open_ro(path)
    except Exception:
        return True  # let read() quarantine it with the reason
    try:
        return ro.conn.execute("SELECT 1 FROM sqlite_master WHERE name='messages'").fetchone() is not None
    finally:
        ro.conn.close()


def matches(path: Path) -> bool:
    """True for ``…/.opencode/opencode.db`` given with ``--path``."""
    return path.name == "opencode.db" and path.parent.name == ".opencode"


#: new and changed rows (``charm_db.reader``)
read = charm_db.reader(AGENT, PARSER_VERSION)
