"""A bounded scan of the home directory for project-local session files (Aider's
``.aider.chat.history.md``, SpecStory's ``.specstory/history/``).

Bounded so that discovery stays well under a second on a normal home: at most
``MAX_DEPTH`` levels below home, at most ``MAX_DIRS`` directories, and a time budget of
``TIME_BUDGET`` seconds; hidden directories (``.git``, ``.venv``, ``.cache``, …),
``node_modules``, virtual environments (a dir with ``pyvenv.cfg``), build and cache
dirs and the big OS folders (``Library``, ``AppData``, ``snap``) are not entered.
One scan per (home, process) serves every source for ``CACHE_SECONDS``.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 5
MAX_DIRS = 20_000
TIME_BUDGET = 0.8
CACHE_SECONDS = 30.0

SKIP_NAMES = frozenset(
    {
        "node_modules",
        "__pycache__",
        "site-packages",
        "venv",
        "env",
        "virtualenv",
        "Library",
        "AppData",
        "Applications",
        "snap",
        "target",
        "dist",
        "build",
        "vendor",
        "Pods",
        "DerivedData",
        "bower_components",
        "go",
        "miniconda3",
        "anaconda3",
        "Downloads",
        "Music",
        "Pictures",
        "Movies",
        "Videos",
    }
)


@dataclass
class ScanResult:
    """Files found per marker (absolute paths), dirs visited, whether a bound was hit."""

    aider: list[Path] = field(default_factory=list)
    specstory: list[Path] = field(default_factory=list)
    dirs: int = 0
    truncated: str | None = None
    seconds: float = 0.0


_cache: dict[str, tuple[float, ScanResult]] = {}

AIDER_FILES = (".aider.chat.history.md", ".aider.input.history")


def scan_home(home: Path, *, use_cache: bool = True) -> ScanResult:
    """Walk ``home`` breadth-first within the bounds above and collect Aider history
    files and SpecStory ``.specstory/history/*.md`` exports. Never raises for an
    unreadable directory (it is skipped)."""
    key = str(home)
    now = time.monotonic()
    if use_cache and key in _cache and now - _cache[key][0] < CACHE_SECONDS:
        return _cache[key][1]
    t0 = time.perf_counter()
    res = ScanResult()
    queue: list[tuple[str, int]] = [(str(home), 0)]
    qi = 0
    while qi < len(queue):
        path, depth = queue[qi]
        qi += 1
        res.dirs += 1
        if res.dirs > MAX_DIRS:
            res.truncated = f"stopped after {MAX_DIRS} directories"
            break
        if time.perf_counter() - t0 > TIME_BUDGET:
            res.truncated = f"stopped after {TIME_BUDGET} s"
            break
        try:
            with os.scandir(path) as it:
                entries = list(it)
        except OSError:
            continue
        names = {e.name for e in entries}
        if "pyvenv.cfg" in names:
            continue
        for f in AIDER_FILES:
            if f in names:
                p = Path(path) / f
                if p.is_file():
                    res.aider.append(p)
        if ".specstory" in names:
            hist = Path(path) / ".specstory" / "history"
            if hist.is_dir():
                res.specstory.extend(sorted(p for p in hist.glob("*.md") if p.is_file()))
        if depth >= MAX_DEPTH:
            continue
        for e in sorted(entries, key=lambda e: e.name):
            if e.name.startswith(".") or e.name in SKIP_NAMES:
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    queue.append((e.path, depth + 1))
            except OSError:
                continue
    res.seconds = round(time.perf_counter() - t0, 4)
    _cache[key] = (now, res)
    return res
