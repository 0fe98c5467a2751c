"""Confinement of discovery to each agent's own folders: what a source found is kept
only when reading it cannot reach a file from outside those folders.

An agent's folder is a place its source searched (``Discovery.searched``, cut before
its first glob part; a file named there stands for its directory). The home directory
itself is no agent's folder: for a file found by a scan of the home (Aider's and
SpecStory's project files) the folder is the file's own directory.

Rules, applied once for every source by ``discover_all`` (``confine``), each refusal
counted per reason on the ``Discovery`` (``Discovery.skipped``, shown by
``ctxkeep sources``):

- a symlink (to a file, or on the way: a symlinked directory) is followed only when
  the real path of the file lies inside the real path of the agent's folder (an agent
  folder that is itself a symlink, e.g. ``~/.claude`` kept in a dotfiles repository,
  is fine: its real path is the folder) — ``REASON_OUTSIDE``;
- a symlink loop is skipped (``Discovery.add``: ``ELOOP``) — ``REASON_LOOP``;
- FIFOs, sockets and devices are skipped (``Discovery.add``; a FIFO would block the
  reader) — ``REASON_SPECIAL``;
- a regular file with more than one name (``st_nlink > 1``) is a hard link whose other
  names cannot be found cheaply (the kernel keeps no list of them). It is kept only
  when every one of its names is among the files the agent's own discovery found (so
  all of them are proven inside the folder); otherwise it is refused —
  ``REASON_HARDLINK``. No agent writes hard links of its session files (Claude Code,
  Codex, Gemini CLI, ... each write one file per session), so this refuses nothing
  real; a user who hard-links a session in on purpose can copy it instead. Two names
  of one file inside the folder are read once (the first in discovery order).

``ctxkeep sources`` also counts the directory symlinks of an agent's folders that lead
out of it or loop (``count_dir_links``), including those behind which no session file
lies: every refused symlink is counted once (a link whose files were refused is counted
by its files). Discovery for an ingest does not walk the folders for them (no file is
read through such a link either way).

Files given explicitly (``ingest --path``) are the user's choice and are not confined
(FIFOs and devices are still never opened: ``readers.jsonl.open_file``).

A check costs no more than the ``lstat`` discovery made: the real path of each file's
directory is computed once per directory.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ctxkeep.sources.contract import (
    REASON_HARDLINK,
    REASON_LOOP,
    REASON_OUTSIDE,
    REASON_SPECIAL,
    Discovery,
)

__all__ = [
    "REASON_HARDLINK",
    "REASON_LOOP",
    "REASON_OUTSIDE",
    "REASON_SPECIAL",
    "agent_folders",
    "confine",
    "count_dir_links",
]

_GLOB_CHARS = frozenset("*?[")


def _cut_glob(p: Path) -> Path:
    """``p`` up to (not including) its first part holding a glob character."""
    parts = []
    for part in p.parts:
        if _GLOB_CHARS & set(part):
            break
        parts.append(part)
    return Path(*parts) if parts else p


def agent_folders(d: Discovery, home: Path | None) -> list[tuple[str, str]]:
    """The agent's folders of ``d`` as ``(lexical absolute path, real path)`` pairs,
    longest lexical path first (so the deepest folder holding a file is met first).
    The home directory (``home``) itself is left out (see the module doc)."""
    home_real = os.path.realpath(home) if home is not None else None
    out: dict[str, str] = {}
    for s in d.searched:
        root = _cut_glob(Path(os.path.abspath(s)))
        if root.suffix and not root.is_dir():  # a database or document named by path
            root = root.parent
        real = os.path.realpath(root)
        if real == home_real:
            continue
        out[str(root)] = real
    return sorted(out.items(), key=lambda kv: -len(kv[0]))


def _inside(real: str, folder: str) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


def confine(d: Discovery, home: Path | None = None) -> Discovery:
    """Drop from ``d.files`` what the module doc's rules refuse, counting each refusal
    in ``d.skipped`` (``Discovery.skip``). ``home``: the user's home directory (not an
    agent's folder). Returns ``d`` (changed in place). Never raises for a file that
    vanished meanwhile (it is dropped silently, as discovery would have)."""
    if not d.files:
        return d
    # (lexical folder, it with a separator after, real path), longest first
    folders = [(lx, lx.rstrip(os.sep) + os.sep, r) for lx, r in agent_folders(d, home)]
    found = d.found()
    facts = []
    names: dict[tuple[int, int], int] = {}  # names proven inside, of files with several
    dir_real: dict[str, str] = {}
    prefix: dict[str, str] = {}  # an agent's folder's real path with a separator after
    for f in d.files:
        key = str(f.path)
        lex = os.path.abspath(key)
        got = found.get(key)
        if got is None:
            try:
                st = os.stat(lex)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    d.skip(f.path, REASON_LOOP)
                continue  # vanished meanwhile
            if not stat.S_ISREG(st.st_mode):
                if not stat.S_ISDIR(st.st_mode):
                    d.skip(f.path, REASON_SPECIAL)
                continue
            folder, name = os.path.split(lex)
            parent = dir_real.get(folder)
            if parent is None:
                parent = dir_real[folder] = os.path.realpath(folder)
            real = os.path.realpath(lex) if os.path.islink(lex) else os.path.join(parent, name)
        else:
            real, st = got
        own = None
        for lx, lx_sep, r in folders:  # ``_inside(lex, lx)``
            if lex.startswith(lx_sep) or lex == lx:
                own = r
                break
        if own is None:  # no searched folder holds it lexically (a home scan): its directory
            folder = os.path.dirname(lex)
            own = dir_real.get(folder)
            if own is None:
                own = dir_real[folder] = os.path.realpath(folder)
        own_sep = prefix.get(own)
        if own_sep is None:
            own_sep = prefix[own] = own.rstrip(os.sep) + os.sep
        if not (real.startswith(own_sep) or real == own):  # ``_inside(real, own)``
            d.skip(f.path, REASON_OUTSIDE)
            continue
        facts.append((f, st))
        if st.st_nlink > 1:
            key2 = (st.st_dev, st.st_ino)
            names[key2] = names.get(key2, 0) + 1
    kept = []
    taken: set[tuple[int, int]] = set()
    for f, st in facts:
        ident = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and names[ident] < st.st_nlink:
            d.skip(f.path, REASON_HARDLINK)
            continue
        if ident in taken:  # another name of a file already kept
            continue
        taken.add(ident)
        kept.append(f)
    d.files = kept
    return d


#: directory entries ``count_dir_links`` looks at per agent at most (a bound on the
#: walk of a huge folder; the corpus's largest agent folder holds ~40)
WALK_MAX_ENTRIES = 200_000


def count_dir_links(d: Discovery, home: Path | None = None) -> Discovery:
    """Count in ``d.skipped`` every directory symlink in the agent's folders
    (``agent_folders``; ``home``: the user's home, no agent's folder) that discovery
    refused without counting it: a link to a folder outside the agent's folder
    (``REASON_OUTSIDE``) or up into the tree holding it, or to itself (``REASON_LOOP``),
    unless the link or a file under it was counted already (``Discovery.refused``:
    files found through it refused by ``confine``, a recursive search's own count,
    ``Discovery._count_dir_links``). A link to a folder inside is not counted (its
    files are found at their own path). One ``os.walk`` per folder, following no link,
    bounded by ``WALK_MAX_ENTRIES``. Returns ``d`` (changed in place); never raises
    for a folder that is missing or unreadable (``os.walk`` passes over it)."""
    refused = d.refused()
    budget = WALK_MAX_ENTRIES
    seen: set[str] = set()
    for lex, root in agent_folders(d, home):
        for folder, dirs, files in os.walk(lex):
            budget -= len(dirs) + len(files)
            if budget < 0:
                return d
            here = None
            for name in dirs + files:
                link = os.path.join(folder, name)
                if link in seen or not os.path.islink(link):
                    continue
                seen.add(link)
                if link in refused or any(p.startswith(link + os.sep) for p in refused):
                    continue
                try:
                    if not stat.S_ISDIR(os.stat(link).st_mode):
                        continue  # a link to a file: ``confine`` judges it when a source names it
                except OSError as e:
                    if e.errno == errno.ELOOP:
                        d.skip(link, REASON_LOOP)
                    continue  # broken: no folder behind it
                real = os.path.realpath(link)
                here = here or os.path.realpath(folder)
                if _inside(here, real):
                    d.skip(link, REASON_LOOP)
                elif not _inside(real, root):
                    d.skip(link, REASON_OUTSIDE)
    return d
