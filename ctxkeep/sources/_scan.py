"""A bounded scan of the home directory for project-local agent files
(``<project>/.opencode/opencode.db``, ``<project>/.crush/crush.db``).

Bounded in depth and in the number of directories visited; skips dependency trees,
virtual environments, caches, VCS internals and OS folders, so a run over a large
home stays fast. Configured session dirs are scanned the same way.
"""
from __future__ import annotations

import os
from pathlib import Path

MAX_DEPTH = 4
MAX_DIRS = 20000
SKIP = {"node_modules", ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "env",
        "__pycache__", ".cache", ".npm", ".pnpm-store", ".yarn", ".cargo", ".rustup",
        ".gradle", ".m2", "Library", "AppData", "Applications", ".local", ".config",
        "snap", "target", "dist", "build", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        ".Trash", "site-packages", ".docker", ".vscode-server", ".prefect"}


def find_project_files(roots: list[Path], rel: str, max_depth: int = MAX_DEPTH,
                       max_dirs: int = MAX_DIRS) -> list[Path]:
    """Files ``<dir>/<rel>`` (e.g. ``.crush/crush.db``) under ``roots``.

    A root that itself holds ``rel`` counts (depth 0). Hidden directories are not
    descended into (the agent's own folder is reached through ``rel``). Returns
    sorted, de-duplicated paths; unreadable directories are skipped.
    """
    found: set[Path] = set()
    seen = 0
    for root in roots:
        root = Path(root).expanduser()
        if not root.is_dir():
            continue
        stack = [(root, 0)]
        while stack and seen < max_dirs:
            d, depth = stack.pop()
            seen += 1
            cand = d / rel
            if cand.is_file():
                found.add(cand)
            if depth >= max_depth:
                continue
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if (e.is_dir(follow_symlinks=False) and not e.name.startswith(".")
                                and e.name not in SKIP):
                            stack.append((Path(e.path), depth + 1))
            except OSError:
                continue
    return sorted(found)
