"""A bounded scan of the home directory for project-local agent files
(``<project>/.opencode/opencode.db``, ``<project>/.crush/crush.db``).

Bounded in depth and in the number of directories visited; skips dependency trees,
virtual environments, caches, VCS internals and OS folders, so a run over a large
home stays fast. Configured session dirs are scanned the same way.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

MAX_DEPTH = 4
MAX_DIRS = 20000
SKIP = {
    "node_modules",
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    "env",
    "__pycache__",
    ".cache",
    ".npm",
    ".pnpm-store",
    ".yarn",
    ".cargo",
    ".rustup",
    ".gradle",
    ".m2",
    "Library",
    "AppData",
    "Applications",
    ".local",
    ".config",
    "snap",
    "target",
    "dist",
    "build",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".Trash",
    "site-packages",
    ".docker",
    ".vscode-server",
    ".prefect",
}


#: project-local data dirs looked for in one walk (sources may ask for others)
WATCHED = {".opencode", ".crush"}
_CACHE: dict = {}
CACHE_SECONDS = 30.0


def _walk(roots: tuple, names: frozenset, max_depth: int, max_dirs: int) -> dict[str, list[Path]]:
    """One bounded walk: ``{name: [dirs holding a child dir called name]}``."""
    found: dict[str, list[Path]] = {n: [] for n in names}
    seen = 0
    for root in roots:
        root = Path(root).expanduser()
        if not root.is_dir():
            continue
        stack = [(root, 0)]
        while stack and seen < max_dirs:
            d, depth = stack.pop()
            seen += 1
            try:
                with os.scandir(d) as it:
                    for e in it:
                        try:
                            if not e.is_dir(follow_symlinks=False):
                                continue
                        except OSError:
                            continue
                        if e.name in names:
                            found[e.name].append(d)
                        elif depth < max_depth and not e.name.startswith(".") and e.name not in SKIP:
                            stack.append((Path(e.path), depth + 1))
            except OSError:
                continue
    return found


def find_project_files(
    roots: list[Path], rel: str, max_depth: int = MAX_DEPTH, max_dirs: int = MAX_DIRS
) -> list[Path]:
    """Files ``<dir>/<rel>`` (e.g. ``.crush/crush.db``) under ``roots``.

    A root that itself holds ``rel`` counts (depth 0). Hidden directories are not
    descended into (the agent's own folder is reached through ``rel``). One walk
    serves every watched data dir name for ``CACHE_SECONDS`` (the Crush and Go
    opencode sources share it). Returns sorted, de-duplicated paths; unreadable
    directories are skipped.
    """
    first = rel.split("/", 1)[0]
    names = frozenset(WATCHED | {first})
    key = (tuple(str(r) for r in roots), names, max_depth, max_dirs)
    now = time.monotonic()
    hit = _CACHE.get(key)
    if hit is None or now - hit[0] > CACHE_SECONDS:
        hit = (now, _walk(tuple(roots), names, max_depth, max_dirs))
        _CACHE.clear()
        _CACHE[key] = hit
    out = set()
    for d in hit[1].get(first, []):
        cand = d / rel
        try:
            if cand.is_file():
                out.add(cand)
        except OSError:
            continue
    return sorted(out)
