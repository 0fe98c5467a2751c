"""``ctxkeep export markdown|html DEST``: transcripts written as a static site.

Without sessions named: every session of the store that ``ctxkeep sessions`` and the
app list (the empty ones, no time and no message, left out: ``is_empty``; the index
says how many), one page each, plus ``index.<ext>``; with sessions named: those sessions and the sub-agents they
started (their pages link each other), no index. Page names are
``<session id, characters outside [A-Za-z0-9._-] as _, at most 60>-<8 hex of the
agent and id>.<ext>`` (sidechain ids hold ``/``; two ids may differ only in such
characters). Each file is written to a temporary name beside it and renamed into
place (a reader, or a killed export, never leaves a half page). The data come from
the service layer (``service.transcripts``); the texts are the store's, redacted at
ingest.

DEST safety: an export writes ``.ctxkeep-export.json`` (``MARKER``: ``{"schema": 1,
"pages": [file names]}``, every page and index ctxkeep wrote there, both formats). A
non-empty DEST without it is refused (UsageError) unless ``force``: ctxkeep never
overwrites an ``index.html`` it did not write. A DEST marked by an export of the other
format (an html site, markdown files) is refused too unless ``force``. A whole export (no sessions named) into
a marked DEST removes the pages of its format the marker lists that this export did
not write (sessions purged since: stale pages); files the marker does not list are
left alone.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.render import transcript as r
from ctxkeep.schema import family_cost_notes
from ctxkeep.service.export import record_site
from ctxkeep.service.model import Result
from ctxkeep.service.transcripts import (
    SessionIndexRequest,
    TranscriptRequest,
    session_index,
    transcripts,
)
from ctxkeep.sinks.site_names import FORMATS, MARKER, page_name


class ExportRequest(BaseModel):
    """``home``, ``dest`` (a folder, created), ``fmt`` (``html`` or ``markdown``),
    ``sessions`` (ids or prefixes; None: all, with an index), ``tz`` (IANA zone of the
    times shown)."""

    home: Path
    dest: Path
    fmt: str
    sessions: list[str] | None = None
    tz: str = "UTC"
    force: bool = False


class ExportResult(Result):
    """What was written: ``pages`` (one per session, paths), ``index`` (path or None),
    ``messages`` (per page path, the messages it holds), ``bytes`` written."""

    format: str = Field(description="markdown or html")
    dest: str = Field(description="the folder written")
    pages: list[str] = Field(description="one file per session (paths)")
    index: str | None = Field(description="the index page (null: none)")
    messages: dict[str, int] = Field(description="page path → messages it holds")
    bytes: int = Field(description="bytes written")
    stale_removed: list[str] = Field(
        default_factory=list, description="pages of sessions no longer in the store, removed (paths)"
    )
    empty: int = Field(0, description="empty sessions (no time, no message) left out, as `sessions` does")


def is_empty(s) -> bool:
    """A session ``ctxkeep sessions`` and the app leave out unless asked: no start time and
    no message (a summary-only file; ``sinks.session_list``'s rule)."""
    return s.started is None and not s.messages


def empty_note(n: int) -> str:
    """``+3 empty sessions were left out (no time, no message)``: the ``sessions`` list's words."""
    were = "session was" if n == 1 else "sessions were"
    return f"+{n:,} empty {were} left out (no time, no message)"


def _marked(dest: Path) -> set[str] | None:
    """The file names the DEST's marker lists; None without a (readable) marker."""
    try:
        data = json.loads((dest / MARKER).read_text(encoding="utf-8"))
        return {n for n in data.get("pages", []) if isinstance(n, str) and "/" not in n and n != MARKER}
    except (OSError, ValueError, AttributeError):
        return None


def _check_dest(dest: Path, force: bool, fmt: str | None = None) -> set[str]:
    """The names a previous export wrote into ``dest`` (empty: none, or a new or empty
    folder). Raises CtxkeepError (exit 1) for a file; UsageError for a non-empty folder
    without the marker, or
    (``fmt`` given) a folder whose marked pages are of the other format: an html site
    and markdown files mixed in one folder, two ``index`` pages (unless ``force``)."""
    if dest.exists() and not dest.is_dir():
        # the file system's state, not the command's wording: exit 1, as `export parquet
        # FILE`, `--home FILE` and a missing --path (newuser15 F9: this one exited 2)
        raise CtxkeepError("DEST is a file", where=str(dest), hint="give a folder (it is created)")
    if not dest.is_dir():
        return set()
    marked = _marked(dest)
    if marked is None and not force and any(dest.iterdir()):
        raise UsageError(
            "DEST is not empty and holds no previous ctxkeep export",
            where=str(dest),
            hint="give a new or empty folder, or add --force to write into it anyway",
        )
    if fmt is not None and marked and not force:
        other = {f for f, ext in FORMATS.items() if f != fmt and any(n.endswith(ext) for n in marked)}
        if other:
            raise UsageError(
                f"DEST holds a ctxkeep {' and '.join(sorted(other))} export",
                where=str(dest),
                hint=f"give another folder for the {fmt} export, or add --force to put both in it",
            )
    return marked or set()


def _write(path: Path, text: str) -> int:
    data = text.encode("utf-8", "surrogatepass")
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(data)


def export(req: ExportRequest, progress: Callable[[int, int], None] | None = None) -> ExportResult:
    """Write the site (see the module docstring). ``progress(done, total)`` after each
    page. Raises UsageError for an unknown format, a DEST that is a file or holds the
    other format's export,
    StoreError without a store, SessionNotFound/AmbiguousSession for a bad session."""
    if req.fmt not in FORMATS:
        raise UsageError(f"unknown export format {req.fmt!r}", hint="use html or markdown")
    ext = FORMATS[req.fmt]
    dest = Path(req.dest)
    before = _check_dest(dest, req.force, req.fmt)
    index = session_index(SessionIndexRequest(home=req.home)).sessions
    n_empty = 0
    if req.sessions is None:  # the selection of `ctxkeep sessions` (newuser23 F5)
        kept = [s for s in index if not is_empty(s)]
        n_empty, index = len(index) - len(kept), kept
    selected: list[str] | None = None
    ts = transcripts(TranscriptRequest(home=req.home, sessions=req.sessions, index=index))
    # named sessions: read them first (a bad reference fails before anything is written)
    first = list(ts) if req.sessions is not None else None
    dest.mkdir(parents=True, exist_ok=True)
    if first is not None:  # the named sessions and the sub-agents they started
        chosen = {t.session.session_id for t in first}
        selected = [s.session_id for s in index if s.session_id in chosen or s.parent_session_id in chosen]
    names = {s.session_id: page_name(s.agent, s.session_id, ext) for s in index}
    exported = set(selected) if selected is not None else set(names)

    def link(sid: str) -> str | None:
        return names[sid] if sid in exported and sid in names else None

    pages, counts, total_bytes = [], {}, 0
    todo = len(exported)
    stream: Iterable
    if first is not None:
        assert selected is not None  # set with first
        extra = [s for s in selected if s not in {t.session.session_id for t in first}]
        stream = [
            *first,
            *(transcripts(TranscriptRequest(home=req.home, sessions=extra, index=index)) if extra else []),
        ]
    else:
        stream = ts
    index_href = f"index{ext}" if req.sessions is None else None
    # the marker first, listing the pages this export will write as well: an export
    # stopped part-way (Ctrl-C) leaves a DEST the same command goes on with, not one it
    # refuses as "not empty and holds no previous ctxkeep export" (newuser20 F10); the
    # end writes it again with what was written
    planned = {names[s] for s in exported if s in names} | ({index_href} if index_href else set())
    _write(dest / MARKER, json.dumps({"schema": 1, "pages": sorted(before | planned)}))
    for t in stream:
        name = names.get(t.session.session_id) or page_name(t.session.agent, t.session.session_id, ext)
        render = r.page_html if req.fmt == "html" else r.page_markdown
        text = render(t, tz=req.tz, link=link, index_href=index_href)
        path = dest / name
        total_bytes += _write(path, text)
        pages.append(str(path))
        counts[str(path)] = t.messages
        if progress:
            progress(len(pages), todo)
    index_path = None
    if req.sessions is None:
        note = f"{len(index):,} sessions; times in {req.tz}. Made by ctxkeep from its store (texts redacted)."
        if n_empty:
            note += " " + empty_note(n_empty) + "."
        # costs: each rounded once; a session whose rows miss its total says so (left24)
        note += "".join(f" Note: {x}." for x in family_cost_notes(index))
        render_index = r.index_html if req.fmt == "html" else r.index_markdown
        index_path = dest / f"index{ext}"
        total_bytes += _write(index_path, render_index(index, tz=req.tz, link=link, note=note))
    written = {Path(p).name for p in pages} | ({index_path.name} if index_path else set())
    stale = []
    if req.sessions is None:  # a whole export: the pages of sessions gone since the last one
        for n in sorted(before - written):
            if n.endswith(ext) and (dest / n).is_file():
                (dest / n).unlink()
                stale.append(str(dest / n))
    _write(
        dest / MARKER,
        json.dumps({"schema": 1, "pages": sorted((before - {Path(p).name for p in stale}) | written)}),
    )
    record_site(req.home, dest, req.fmt, len(pages))  # a purge names the pages it leaves here
    return ExportResult(
        format=req.fmt,
        dest=str(dest),
        pages=pages,
        index=str(index_path) if index_path else None,
        messages=counts,
        bytes=total_bytes,
        stale_removed=stale,
        empty=n_empty,
    )
