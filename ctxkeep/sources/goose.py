"""Goose (block/goose): the SQLite ``sessions.db`` (goose ≥ 1.10, 2025) and the legacy
per-session ``*.jsonl`` files it replaced.

Where: ``$GOOSE_PATH_ROOT/data/sessions`` when set, else the goose data dir's
``sessions``: ``~/.local/share/goose/sessions`` on Linux and macOS,
``%APPDATA%\\Block\\goose\\data\\sessions`` on Windows; plus configured dirs.

Format facts (block/goose ``crates/goose/src/session/session_manager.rs``, schema
version 5, and ``legacy.rs``; ``conversation/message.rs`` for the content):

- ``sessions(id, name, description, user_set_name, session_type, working_dir,
  created_at, updated_at, extension_data, total_tokens, input_tokens,
  output_tokens, accumulated_total_tokens, accumulated_input_tokens,
  accumulated_output_tokens, schedule_id, recipe_json, user_recipe_values_json)``;
  ``messages(id INTEGER PRIMARY KEY AUTOINCREMENT, session_id, role, content_json,
  created_timestamp (Unix seconds), timestamp, tokens, metadata_json)``;
- ``content_json`` is a JSON array of ``{"type": …}`` blocks: ``text`` {text},
  ``image`` {data, mimeType}, ``toolRequest`` {id, toolCall {status, value {name,
  arguments}} }, ``toolResponse`` {id, toolResult {status, value [content…] |
  error}}, ``thinking`` {thinking}, ``redactedThinking``, ``toolConfirmationRequest``,
  ``frontendToolRequest``, ``summarizationRequested``/``conversationCompacted``,
  ``systemNotification`` (unknown types become meta entries);
- legacy ``<name>.jsonl``: a first line of session metadata (``working_dir``,
  ``description``, token totals) and one Message per line (``role``, ``created``,
  ``content``).

Change detection: ``sessions.db`` and its ``-wal`` (``unchanged``), then a per-row
high-water mark on ``messages.id`` (AUTOINCREMENT: never reused). Goose rewrites a
conversation on compaction (deletes and re-inserts rows with new ids): message
record ids are content-based (session, role, created, SHA-256 of content_json), so
re-inserted rows dedup. Legacy files are append-only JSONL (byte offsets).

Usage: per session (``accumulated_*_tokens``, else ``*_tokens``), on a meta entry per
session, ``usage_key`` ``goose:<session id>``. No real goose file was found on
GitHub: ``tests/fixtures/goose`` is generated from the schema above.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at, media_placeholder
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    quarantine_row,
)
from ctxkeep.sources.readers.jsonl import read_jsonl, stat_of
from ctxkeep.sources.readers.sqlite import DbRead, by_mode, database_reader, parse_row, read_pages
from ctxkeep.timeutil import format_epoch

AGENT = "goose"
PARSER_VERSION = 1
MODE: Mode = "sqlite"  # sessions.db; legacy .jsonl files are append-only (see mode_for)


def mode_for(path: Path) -> str:
    """``sqlite`` for ``sessions.db``, ``append`` for a legacy JSONL file."""
    return "sqlite" if path.name == "sessions.db" else "append"


def sessions_dir(ctx: DiscoveryContext) -> Path:
    """Goose's session dir for this environment (see the module doc)."""
    if ctx.env.get("GOOSE_PATH_ROOT"):
        return Path(ctx.env["GOOSE_PATH_ROOT"]).expanduser() / "data" / "sessions"
    if ctx.env.get("APPDATA") and not (ctx.home / ".local" / "share" / "goose").exists():
        win = Path(ctx.env["APPDATA"]) / "Block" / "goose" / "data" / "sessions"
        if win.exists():
            return win
    return ctx.home / ".local" / "share" / "goose" / "sessions"


def discover(ctx: DiscoveryContext) -> Discovery:
    """``sessions.db`` and legacy ``*.jsonl`` in the session dir and configured dirs."""
    d = Discovery(AGENT)
    for base in [sessions_dir(ctx)] + list(ctx.extra_dirs):
        d.searched.append(base)
        if not base.is_dir():
            continue
        if (base / "sessions.db").is_file():
            d.files.append(SourceFile(AGENT, base / "sessions.db", "sqlite"))
        for p in sorted(base.glob("*.jsonl")):
            d.files.append(SourceFile(AGENT, p, "append"))
    root = sessions_dir(ctx)
    d.explain_empty(root, f"no sessions.db or *.jsonl in {root}")
    return d


def matches(path: Path) -> bool:
    """True for a goose ``sessions.db``, or a ``.jsonl`` in a ``goose/…/sessions`` dir."""
    if path.name == "sessions.db":
        return True
    return path.suffix == ".jsonl" and path.parent.name == "sessions" and "goose" in path.parts


def sec_iso(v) -> str | None:
    """Unix seconds (int/float) or an SQLite ``YYYY-MM-DD HH:MM:SS`` text → ISO UTC."""
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return format_epoch(v)
    s = str(v).replace(" ", "T")
    return s if s.endswith("Z") or "+" in s[10:] else s + "Z"


def content_entries(content: list, base: dict) -> list[dict]:
    """Entry dicts of a goose message's content blocks (see the module doc)."""
    out = []
    role = base["role"]
    for i, c in enumerate(content):
        if not isinstance(c, dict):
            continue
        t = c.get("type")
        e = dict(base, part=i)
        if t == "text":
            e.update(kind="message", text=str(c.get("text") or ""))
        elif t == "thinking":
            e.update(kind="thinking", text=str(c.get("thinking") or ""))
        elif t == "redactedThinking":
            e.update(kind="thinking", text="[redacted thinking]")
        elif t == "image":
            e.update(
                kind="message", text=media_placeholder("image", c.get("mimeType"), len(c.get("data") or ""))
            )
        elif t in ("toolRequest", "frontendToolRequest"):
            call = dict_at(c, "toolCall")
            val_v = call.get("value")
            tc = val_v if isinstance(val_v, dict) else call
            args = tc.get("arguments")
            e.update(
                role="assistant",
                kind="tool_call",
                native_id=c.get("id"),
                tool_name=tc.get("name"),
                text=compact_json(args) if args is not None else str(call.get("error") or ""),
            )
        elif t == "toolResponse":
            res = dict_at(c, "toolResult")
            val = res.get("value")
            if isinstance(val, dict) and isinstance(val.get("content"), list):
                val = val["content"]  # newer rmcp CallToolResult
            if isinstance(val, list):
                texts = []
                for b in val:
                    if isinstance(b, dict) and isinstance(b.get("text"), str):
                        texts.append(b["text"])
                    elif isinstance(b, dict) and b.get("type") == "image":
                        texts.append(media_placeholder("image", b.get("mimeType"), len(b.get("data") or "")))
                    elif isinstance(b, dict) and isinstance(b.get("resource"), dict):
                        texts.append(str(b["resource"].get("text") or b["resource"].get("uri") or ""))
                text = "\n".join(texts)
            else:
                text = str(res.get("error") or (val if val is not None else ""))
            e.update(role="tool", kind="tool_result", native_id=c.get("id"), text=text)
        else:
            rest = {k: v for k, v in c.items() if k != "type"}
            e.update(role="system", kind="meta", tool_name=str(t), text=compact_json(rest, 2000))
        e.setdefault("role", role)
        out.append(e)
    return out


def _record_id(sid: str, role: str, created, content_raw: bytes) -> str:
    return f"{sid}:{role}:{created}:{hashlib.sha256(content_raw).hexdigest()[:24]}"


# ------------------------------------------------------------------ sessions.db


def _session_entry(s: dict, src: str) -> dict:
    sid = s["id"]
    inp = as_int(s.get("accumulated_input_tokens")) or as_int(s.get("input_tokens")) or 0
    out = as_int(s.get("accumulated_output_tokens")) or as_int(s.get("output_tokens")) or 0
    e = {
        "agent": AGENT,
        "session_id": sid,
        "native_id": sid,
        "record_id": f"{sid}:session",
        "project_dir": s.get("working_dir"),
        "ts": sec_iso(s.get("created_at")),
        "role": "system",
        "kind": "meta",
        "tool_name": "session",
        "source_path": src,
        "source_offset": 0,
        "is_sidechain": s.get("session_type") == "sub_agent",
        "text": str(s.get("name") or s.get("description") or ""),
    }
    if inp or out:
        e.update(
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=0,
            cache_creation_tokens=0,
            usage_key=f"goose:{sid}",
        )
    return e


def _probe(conn) -> tuple[dict, int]:
    """Every ``sessions`` row by id, and the largest message id."""
    cur = conn.execute("SELECT * FROM sessions")
    names = [c[0] for c in cur.description]
    sessions = {r[0]: dict(zip(names, r, strict=False)) for r in cur.fetchall()}
    top = conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
    return sessions, top


def _read_rows(rd: DbRead, probed: tuple) -> Iterator[Batch]:
    path, state = rd.path, rd.state
    src = str(path)
    sessions, top = probed
    hw = state.get("hw", 0)
    if top < hw:
        hw = 0  # the table was emptied or the database replaced: read it all again
    entries = [_session_entry(s, src) for s in sessions.values()]
    quarantine: list[dict] = []
    sql = (
        "SELECT id, session_id, role, content_json, created_timestamp FROM messages "
        "WHERE id > ? ORDER BY id LIMIT ?"
    )
    nrows = nbytes = 0
    for rows, key, _ in read_pages(path, sql, lambda k: (k,), lambda r: r[0], hw):
        for mid, sid, role, cj, created in rows:
            nrows += 1
            raw = cj.encode("utf-8", "replace") if isinstance(cj, str) else bytes(cj or b"")
            nbytes += len(raw)
            try:
                content = orjson.loads(raw)
                if not isinstance(content, list):
                    raise ValueError("content_json is not a JSON array")
            except (orjson.JSONDecodeError, ValueError) as e:
                quarantine.append(quarantine_row(path, mid, raw, f"messages row {mid}: {e}"))
                continue
            s = sessions.get(sid, {})
            role = role if role in ("user", "assistant") else "system"
            base = {
                "agent": AGENT,
                "session_id": sid,
                "project_dir": s.get("working_dir"),
                "ts": sec_iso(created),
                "role": role,
                "source_path": src,
                "source_offset": mid,
                "is_sidechain": s.get("session_type") == "sub_agent",
                "record_id": _record_id(sid, role, created, raw),
            }
            entries += parse_row(
                quarantine, path, mid, raw, f"messages row {mid}", content_entries, content, base
            )
        hw = key
    yield Batch(
        entries, quarantine, rd.watermark(dict(state, hw=hw), rd.settled()), lines=nrows, bytes_read=nbytes
    )


# ------------------------------------------------------------------ legacy JSONL


def _read_legacy(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    src = str(file.path)
    sid = file.path.stem

    def parse(rec: dict, offset: int, line_hash: str, state: dict) -> list[dict]:
        if "role" not in rec and ("working_dir" in rec or "description" in rec):
            state["cwd"] = rec.get("working_dir")
            # the metadata line has no time: the file's mtime (its last update) stands in
            e = {
                "agent": AGENT,
                "session_id": sid,
                "record_id": f"{sid}:session",
                "role": "system",
                "kind": "meta",
                "tool_name": "session",
                "project_dir": rec.get("working_dir"),
                "ts": sec_iso(stat_of(file.path).st_mtime),
                "text": str(rec.get("description") or ""),
                "source_path": src,
                "source_offset": offset,
            }
            inp = as_int(rec.get("accumulated_input_tokens")) or as_int(rec.get("input_tokens")) or 0
            out = as_int(rec.get("accumulated_output_tokens")) or as_int(rec.get("output_tokens")) or 0
            if inp or out:
                e.update(
                    input_tokens=inp,
                    output_tokens=out,
                    cache_read_tokens=0,
                    cache_creation_tokens=0,
                    usage_key=f"goose:{sid}",
                )
            return [e]
        role_v = rec.get("role")
        role = role_v if role_v in ("user", "assistant") else "system"
        content_v = rec.get("content")
        content = content_v if isinstance(content_v, list) else []
        base = {
            "agent": AGENT,
            "session_id": sid,
            "project_dir": state.get("cwd"),
            "ts": sec_iso(rec.get("created")),
            "role": role,
            "native_id": rec.get("id"),
            "source_path": src,
            "source_offset": offset,
            "is_sidechain": False,
            "record_id": _record_id(sid, role, rec.get("created"), orjson.dumps(content)),
        }
        return content_entries(content, base)

    return read_jsonl(file, wm, PARSER_VERSION, parse, batch_bytes)


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("sessions", "id"), ("messages", "session_id"))

#: new rows of ``sessions.db`` or new lines of a legacy JSONL file
read = by_mode(
    mode_for, database_reader(AGENT, PARSER_VERSION, _probe, _read_rows, vault=VAULT_TABLES), _read_legacy
)
