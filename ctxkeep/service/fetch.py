"""Fetch entries in full (tier 2): ``fetch(home, FetchRequest) -> FetchResult``.

``ctxkeep show ID…`` and MCP ``ctx_fetch`` (``AgentFetchRequest``: a default token
budget, ``id`` read as ``ids``). Cutting to a budget, elision markers, offsets:
``query.fetch``. Never imports Prefect, Polars or DuckDB.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path

from pydantic import Field

from ctxkeep.errors import NotFound, UsageError
from ctxkeep.service.model import Budget, EntryHead, Item, Request, Result, Texts, UserPath
from ctxkeep.service.store import reading

#: ``ctx_fetch``'s token budget for all texts when none is given (an agent's context)
AGENT_FETCH_BUDGET = 8000


class FetchRequest(Request):
    """Which entries, and how much of their texts."""

    ids: Texts = Field(description="entry ids (or unique prefixes of 6+ characters)")
    budget: Budget | None = Field(
        None, description="token budget for all texts together (cut texts keep head and tail)"
    )
    max_bytes: int | None = Field(None, ge=1, description="cap on each text, in bytes")
    offset: int = Field(0, ge=0, description="continue one entry from this byte offset (from a marker)")

    @classmethod
    def prepare(cls, values: dict) -> list[str]:
        if "ids" not in values and "id" in values:
            values["ids"] = values.pop("id")
        if not values.get("ids"):
            raise UsageError(
                "ids is required: entry ids from a search", where="ids", hint="give the ids search hits show"
            )
        return []


class ShowRequest(FetchRequest):
    """``ctxkeep show``: ``FetchRequest`` and the media compress moved to the store."""

    media: bool = Field(False, description="also return the images and outputs compress moved to the store")
    media_dir: UserPath | None = Field(None, description="write those media to files in this directory")


class AgentFetchRequest(FetchRequest):
    """``ctx_fetch``: ``FetchRequest`` with a token budget by default."""

    budget: Budget = Field(AGENT_FETCH_BUDGET, description="token budget for all texts together")


class Media(Item):
    """A value compress moved out of an entry's line."""

    seq: int = Field(description="its position in the entry")
    media_type: str = Field(description="MIME type")
    bytes: int = Field(description="size in bytes")
    sha256: str = Field(description="SHA-256 of the data")
    data_base64: str | None = Field(description="the data, base64 (null when written to a file)")
    path: str | None = Field(None, description="the file it was written to (media_dir)")


class FetchedEntry(EntryHead):
    """One entry found, its text whole or cut within the budget (an array from before
    versioning: kept for existing scripts)."""

    source_path: str | None = Field(description="the session file (null: a note)")
    source_offset: int | None = Field(description="byte offset of the record in it")
    status: str = Field(description="active, archived, consumed, rewound")
    bytes: int = Field(description="UTF-8 bytes of the whole text")
    token_estimate: int = Field(description="estimated tokens of the whole text")
    offset: int = Field(description="the offset asked for")
    text: str = Field(description="the text (cut: head, elision marker, tail)")
    tokens: int = Field(description="estimated tokens of `text`")
    truncated: bool = Field(description="true when `text` was cut")
    elided_bytes: int = Field(description="bytes left out")
    elided_from: int | None = Field(description="byte offset where the left-out bytes start")
    next_offset: int | None = Field(description="the offset to continue from (null: nothing left)")
    media: list[Media] = Field(description="with media: what compress moved to the store")

    def header(self) -> str:
        """The entry's one-line header, as every front end shows it."""
        return (
            f"{self.entry_id} {self.agent} {self.session_short_id} {self.ts} {self.role}/{self.kind}"
            + (f" {self.tool_name}" if self.tool_name else "")
            + f" {self.bytes:,} bytes ~{self.token_estimate:,} tok"
            + (" CUT" if self.truncated else "")
        )

    def origin(self) -> str:
        """Where the entry comes from, one line: the file and the record's byte offset,
        or for an agent's database only the file (a row has no byte offset)."""
        if self.source_path:
            from ctxkeep.sources import file_mode

            if file_mode(self.agent, self.source_path) == "sqlite":
                return f"from {self.source_path} (a database row)"
            return f"from {self.source_path} @ byte {self.source_offset:,}"
        return f"a note indexed as {self.session_id!r} (ctx_index)"


class FetchResult(Result):
    """The entries in the order asked, and notes (ids not found, budget cuts)."""

    entries: list[FetchedEntry] = Field(description="the entries, in the order asked")
    notes: list[str] = Field(description="ids not found, budget cuts, clamped arguments")


def fetch(home: Path, req: FetchRequest) -> FetchResult:
    """The entries of ``req.ids``. Raises ``NotFound`` when none of them is stored
    (naming each), ``UsageError`` for an offset with several ids or past the end or a
    media directory that cannot be made, ``StoreError`` for a missing or damaged
    store."""
    from ctxkeep.query.fetch import fetch as run
    from ctxkeep.sinks.sqlite.lookup import short_session_ids

    with reading(home, mmap=True) as conn:
        rows, problems = run(
            conn,
            req.ids,
            budget_tokens=req.budget,
            max_bytes=req.max_bytes,
            offset=req.offset,
            media=isinstance(req, ShowRequest) and (req.media or req.media_dir is not None),
        )
        short = short_session_ids(conn, [r.session_id for r in rows])
    if not rows:
        raise NotFound(
            "; ".join(problems) or "nothing to show", where="ids", hint="search hits give entry ids"
        )
    entries = [
        FetchedEntry(**{**r.as_dict(), "session_short_id": short.get(r.session_id, r.session_id)})
        for r in rows
    ]
    if isinstance(req, ShowRequest) and req.media_dir is not None:
        _write_media(entries, req.media_dir)
    return FetchResult(entries=entries, notes=problems + list(req.notes))


def _write_media(entries: list[FetchedEntry], media_dir: Path) -> None:
    """Write each entry's media to ``<media_dir>/<entry_id>-<seq>.<ext>`` (its ``path``
    set; the result keeps the data too). Raises UsageError when the directory cannot
    be made."""
    try:
        media_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {media_dir}: {e.strerror or e}", where="media_dir") from e
    for d in entries:
        for m in d.media:
            ext = mimetypes.guess_extension(m.media_type.split(";")[0].strip()) or ".bin"
            p = media_dir / f"{d.entry_id}-{m.seq}{ext}"
            p.write_bytes(base64.b64decode(m.data_base64 or ""))
            m.path = str(p)
