"""Notes: texts or files indexed on request (MCP ``ctx_index``) as entries of the
pseudo-agent ``note``, under a source label that is their ``session_id``.

Indexing a label again replaces what it held (the old entries, and the contents,
chunks and FTS rows no other entry uses, are deleted in the same transaction).
The file given is only read, never modified.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

from ctxkeep.errors import NotFound, UsageError
from ctxkeep.pipeline.transform import transform_entries
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.transforms.normalize import entries_frame, usage_frame

NOTE_AGENT = "note"
MAX_NOTE_BYTES = 64 * 1024 * 1024
MAX_LABEL_CHARS = 200


def read_note_file(path: str | os.PathLike) -> str:
    """The text of a file to index (UTF-8; undecodable bytes become U+FFFD).
    Raises UsageError when it is missing, not a regular file, or over
    ``MAX_NOTE_BYTES``."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise NotFound("no such file", where=str(p), hint="give the path of a readable text file")
    size = p.stat().st_size
    if size > MAX_NOTE_BYTES:
        raise UsageError(
            f"file is {size:,} bytes, over the {MAX_NOTE_BYTES:,}-byte limit for notes",
            where=str(p),
            hint="index a smaller file or a part of it",
        )
    try:
        return p.read_bytes().decode("utf-8", "replace")
    except OSError as e:
        raise NotFound(f"cannot read the file: {e.strerror}", where=str(p)) from None


def delete_label(
    conn: sqlite3.Connection, label: str, agent: str = NOTE_AGENT, keep: str | None = None
) -> int:
    """Delete the entries of ``agent``/``label`` (but ``keep``, an entry id) and the
    contents, chunks and FTS rows that only they used, with the purge core's
    deletion (``sinks.sqlite.delete.select_where`` + ``delete_selected``). Call inside a write
    transaction. Returns the number of entries removed."""
    from ctxkeep.sinks.sqlite.delete import delete_selected, drop_selection, select_where

    select_where(conn, "agent = ? AND session_id = ? AND entry_id != ?", (agent, label, keep or ""))
    try:
        return delete_selected(conn)["entries"]
    finally:
        drop_selection(conn)


def index_note(
    conn: sqlite3.Connection,
    label: str,
    *,
    text: str | None = None,
    path: str | os.PathLike | None = None,
    project_dir: str | None = None,
) -> dict:
    """Index ``text`` (or the file at ``path``) as one ``note`` entry under ``label``,
    replacing what the label held (the new entry is loaded first, then the
    old ones are deleted, so a search never sees the label empty).

    Args: ``label`` (1–200 characters; the entry's session_id), exactly one of
    ``text``/``path``, ``project_dir`` (default: the file's folder, else None).
    Returns ``{"label", "entry_id", "bytes", "token_estimate", "chunks", "replaced"}``
    (bytes: UTF-8 bytes; token_estimate: tokens). Raises UsageError for a bad label,
    both/neither of text and path, an empty text, or an unreadable file.
    """
    label = (label or "").strip()
    if not label or len(label) > MAX_LABEL_CHARS:
        raise UsageError(
            f"a label of 1 to {MAX_LABEL_CHARS} characters is required",
            where="label",
            hint="name the note, e.g. 'design-notes'",
        )
    if (text is None) == (path is None):
        raise UsageError(
            "give exactly one of text and path",
            where="text",
            hint="pass the text itself, or the path of a file to index",
        )
    source = None
    if path is not None:
        source = str(Path(path).expanduser().resolve())
        text = read_note_file(source)
        project_dir = project_dir or str(Path(source).parent)
    if not text or not text.strip():
        raise UsageError("the note is empty", where=source or "text", hint="give some text to index")
    now = sqlite_store.now_iso()
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    frame = entries_frame(
        [
            {
                "agent": NOTE_AGENT,
                "session_id": label,
                "native_id": label,
                "part": 0,
                "project_dir": project_dir,
                "ts": now,
                "role": "user",
                "kind": "message",
                "text": text,
                "source_path": source,
                "source_offset": 0,
                "record_id": f"{label}:{digest}",
            }
        ]
    )
    # the ingest's transform, but for the dedup: a note indexed again is loaded again
    # (INSERT OR IGNORE), also when retention archived it or its label was purged
    frames = transform_entries(conn, frame, frame)
    frame, fresh = frames["entries"], frames["contents"]
    tok = int(frame["token_estimate"][0])
    sqlite_store.load_batch(
        conn, entries=frame, contents=fresh, chunks=frames["chunks"], usage=usage_frame(frame), quarantine=[]
    )
    # the new entry is in; now drop what the label held before (same text: same id, kept)
    with sqlite_store.write(conn):
        replaced = delete_label(conn, label, keep=frame["entry_id"][0])
    n_chunks = conn.execute(
        "SELECT count(*) FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ?",
        (frame["content_hash"][0],),
    ).fetchone()[0]
    return {
        "label": label,
        "entry_id": frame["entry_id"][0],
        "bytes": int(frame["text_bytes"][0]),
        "token_estimate": tok,
        "chunks": n_chunks,
        "replaced": replaced,
        "source_path": source,
    }
