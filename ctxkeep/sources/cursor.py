"""Cursor: the editor's ``state.vscdb`` (Composer/Agent chats) and the Cursor agent's
``~/.cursor/projects/*/agent-transcripts/`` JSONL transcripts.

Where: the Cursor user dir's ``globalStorage/state.vscdb``: ``$XDG_CONFIG_HOME`` or
``~/.config/Cursor/User`` (Linux), ``~/Library/Application Support/Cursor/User``
(macOS), ``%APPDATA%\\Cursor\\User`` (Windows); ``~/.cursor/projects/<slug>/
agent-transcripts/<id>.jsonl`` and ``…/<id>/<id>.jsonl``; plus configured dirs.

Format facts (no real database or transcript was found on GitHub; these come from
public readers of the format — AgentOrchestrator/AgentBase ``docs/CURSOR.md``,
pppp606/cursor-efficiency ``docs/vscdbRelation.md`` (Cursor 0.50.5), and open
Cursor adapters; ``tests/fixtures/cursor`` is generated from them):

- ``cursorDiskKV(key TEXT UNIQUE ON CONFLICT REPLACE, value BLOB)``: values are JSON;
  ``composerData:<composerId>`` holds a chat (``composerId``, ``name``,
  ``createdAt``/``lastUpdatedAt`` in ms, ``status``, ``modelConfig.modelName``, the
  ordered ``fullConversationHeadersOnly[{bubbleId, type}]`` or, in older versions, the
  bubbles inline in ``conversation[]``); ``bubbleId:<composerId>:<bubbleId>`` holds a
  message: ``type`` 1 user / 2 assistant, ``text``, ``thinking.text``,
  ``toolFormerData{name, rawArgs, result, status, toolCallId}``,
  ``tokenCount{inputTokens, outputTokens}``, ``createdAt`` (often missing; then the
  chat's ``createdAt``);
- ``ON CONFLICT REPLACE`` deletes and re-inserts a key on every update, so the
  ``rowid`` of a changed key grows: ``rowid`` is the per-row high-water mark;
- agent transcripts: one ``{role, message: {content: [blocks]}}`` per line with
  Claude-style blocks (``text``, ``tool_use``, ``tool_result``), no ids and no
  timestamps: record ids are ``<file>:<byte offset>`` (append-only), and ``ts`` is
  the file's mtime when the line was first read (an approximation, said here).

- ``tool_call`` blocks and lines (Cursor's agent, in the shape of its ``stream-json``
  output, cursor.com/docs/cli/reference/output-format, and readers of it such as
  the neosian crate's Cursor tests): ``{"type": "tool_call", "subtype":
  "started"|"completed", "call_id", "tool_call": {"<kind>ToolCall": {"args",
  "result"}}}``, or flat ``{name, args|input|arguments, result}``; the call is keyed by
  its ``call_id`` (a started and a completed copy are one call) and a ``result``
  gives its tool result.

Neither store records the working directory: ``project_dir`` stays null.
Usage: a bubble's ``tokenCount`` (``usage_key`` ``cursor:<bubbleId>``) when non-zero.
Bubbles of a chat whose ``status`` is ``generating`` and that changed in the last
``STALE_SECONDS`` are left for the next run (they are still streaming).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at
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
from ctxkeep.sources.readers.sqlite import DbRead, by_mode, database_reader, open_ro, parse_row, read_pages
from ctxkeep.timeutil import format_epoch

AGENT = "cursor"
PARSER_VERSION = 2  # 2: tool_call blocks
MODE: Mode = "sqlite"  # state.vscdb; agent transcripts are append-only JSONL (see mode_for)
STALE_SECONDS = 3600


def user_dirs(ctx: DiscoveryContext) -> list[Path]:
    """Cursor's user dirs for Linux, macOS and Windows (existing or not)."""
    xdg = ctx.env.get("XDG_CONFIG_HOME")
    out = [
        (Path(xdg).expanduser() if xdg else ctx.home / ".config") / "Cursor" / "User",
        ctx.home / "Library" / "Application Support" / "Cursor" / "User",
    ]
    if ctx.env.get("APPDATA"):
        out.append(Path(ctx.env["APPDATA"]) / "Cursor" / "User")
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """``state.vscdb`` of each Cursor user dir, and agent transcripts."""
    d = Discovery(AGENT)
    for u in user_dirs(ctx):
        db = u / "globalStorage" / "state.vscdb"
        d.searched.append(db)
        if db.is_file():
            d.files.append(SourceFile(AGENT, db, "sqlite"))
    # configured dirs may be a Cursor user dir or a folder of agent transcripts
    for extra in ctx.extra_dirs:
        db = extra / "globalStorage" / "state.vscdb"
        d.searched.append(db)
        if db.is_file() and all(db != f.path for f in d.files):
            d.files.append(SourceFile(AGENT, db, "sqlite"))
    for root in [ctx.home / ".cursor" / "projects"] + list(ctx.extra_dirs):
        d.searched.append(root / "*" / "agent-transcripts")
        if not root.is_dir():
            continue
        for p in sorted(root.glob("**/agent-transcripts/**/*.jsonl")):
            d.files.append(SourceFile(AGENT, p, "append"))
    if not d.files:
        d.reason = (
            "no Cursor globalStorage/state.vscdb and no "
            f"{ctx.home / '.cursor' / 'projects'}/*/agent-transcripts/*.jsonl"
        )
    return d


def matches(path: Path) -> bool:
    """True for a ``state.vscdb`` or a JSONL file under ``agent-transcripts``."""
    return path.name == "state.vscdb" or (path.suffix == ".jsonl" and "agent-transcripts" in path.parts)


def mode_for(path: Path) -> str:
    """``sqlite`` for ``state.vscdb``, ``append`` for an agent transcript."""
    return "sqlite" if path.name == "state.vscdb" else "append"


def _iso(v) -> str | None:
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)):
        x = v / 1000 if v > 1e11 else v
        return format_epoch(x)
    return str(v)


def bubble_entries(b: dict, composer: dict, cid: str, src: str, offset: int) -> list[dict]:
    """Entry dicts of one bubble: its text (message), thinking, tool call and tool
    result (``part`` 0–3), ``record_id`` ``<composerId>:<bubbleId>``."""
    bid = b.get("bubbleId") or b.get("id") or f"{offset}"
    role = "user" if b.get("type") == 1 else "assistant"
    model = None
    if role == "assistant":
        mi = dict_at(b, "modelInfo")
        mc = dict_at(composer, "modelConfig")
        model = mi.get("modelName") or mc.get("modelName")
    base = {
        "agent": AGENT,
        "session_id": cid,
        "native_id": bid,
        "record_id": f"{cid}:{bid}",
        "ts": _iso(b.get("createdAt")) or _iso(composer.get("createdAt")),
        "role": role,
        "model": model,
        "source_path": src,
        "source_offset": offset,
        "is_sidechain": False,
        "message_id": bid,
    }
    out = []
    if isinstance(b.get("text"), str) and b["text"]:
        out.append(dict(base, part=0, kind="message", text=b["text"]))
    th = b.get("thinking")
    if isinstance(th, dict) and th.get("text"):
        out.append(dict(base, part=1, kind="thinking", text=str(th["text"])))
    tf = b.get("toolFormerData")
    if isinstance(tf, dict) and tf.get("name"):
        args = (
            tf.get("rawArgs")
            if isinstance(tf.get("rawArgs"), str)
            else compact_json(tf.get("params") or tf.get("rawArgs"))
        )
        cid_ = tf.get("toolCallId") or bid
        out.append(
            dict(base, part=2, kind="tool_call", tool_name=tf["name"], native_id=cid_, text=args or "")
        )
        if tf.get("result") is not None:
            res = tf["result"] if isinstance(tf["result"], str) else compact_json(tf["result"])
            out.append(
                dict(
                    base,
                    part=3,
                    role="tool",
                    kind="tool_result",
                    tool_name=tf["name"],
                    native_id=cid_,
                    text=res,
                )
            )
    tc = dict_at(b, "tokenCount")
    inp, outp = as_int(tc.get("inputTokens")) or 0, as_int(tc.get("outputTokens")) or 0
    if inp or outp:
        if not out:
            out.append(dict(base, part=0, kind="message", text=""))
        out[0].update(
            input_tokens=inp,
            output_tokens=outp,
            cache_read_tokens=0,
            cache_creation_tokens=0,
            usage_key=f"cursor:{bid}",
        )
    return out


def _generating(composer: dict, now: float) -> bool:
    if composer.get("status") != "generating":
        return False
    last = as_int(composer.get("lastUpdatedAt")) or as_int(composer.get("createdAt")) or 0
    return now - last / 1000 < STALE_SECONDS


def _probe(conn) -> int:
    """The largest rowid of ``cursorDiskKV``."""
    return conn.execute("SELECT coalesce(max(rowid), 0) FROM cursorDiskKV").fetchone()[0]


def _read_rows(rd: DbRead, top: int) -> Iterator[Batch]:
    path, state = rd.path, rd.state
    src = str(path)
    hw = start_hw = state.get("hw", 0)
    if top < hw:
        hw = start_hw = 0
    now = time.time()
    quarantine: list[dict] = []
    composers: dict[str, tuple[int, dict]] = {}
    bubbles: list[tuple[int, str, dict]] = []
    sql = (
        "SELECT rowid, key, value FROM cursorDiskKV WHERE rowid > ? AND "
        "(key LIKE 'composerData:%' OR key LIKE 'bubbleId:%') ORDER BY rowid LIMIT ?"
    )
    nrows = nbytes = 0
    for rows, key, _ in read_pages(path, sql, lambda k: (k,), lambda r: r[0], hw):
        for rowid, k, v in rows:
            nrows += 1
            raw = v if isinstance(v, bytes) else ("" if v is None else str(v)).encode("utf-8", "replace")
            nbytes += len(raw)
            try:
                obj = orjson.loads(raw) if raw else None
            except orjson.JSONDecodeError as e:
                quarantine.append(quarantine_row(path, rowid, raw, f"{k}: malformed JSON: {e}"))
                continue
            if not isinstance(obj, dict):
                continue  # Cursor writes null for emptied keys
            if k.startswith("composerData:"):
                composers[k.split(":", 1)[1]] = (rowid, obj)
            else:
                parts = k.split(":")
                if len(parts) >= 3:
                    bubbles.append((rowid, parts[1], obj))
        hw = key
    missing = {c for _, c, _ in bubbles if c not in composers}
    if missing:
        ro = open_ro(path)
        try:
            for k, v in ro.conn.execute(
                f"SELECT key, value FROM cursorDiskKV WHERE key IN ({','.join('?' * len(missing))})",
                [f"composerData:{c}" for c in missing],
            ):
                try:
                    obj = orjson.loads(v)
                except (orjson.JSONDecodeError, TypeError):
                    continue
                if isinstance(obj, dict):
                    composers.setdefault(k.split(":", 1)[1], (0, obj))
        finally:
            ro.conn.close()
    entries: list[dict] = []
    deferred = False
    for cid, (rowid, c) in composers.items():
        if _generating(c, now):
            deferred = True
            continue
        entries.append(
            {
                "agent": AGENT,
                "session_id": cid,
                "native_id": cid,
                "record_id": f"{cid}:composer",
                "ts": _iso(c.get("createdAt")),
                "role": "system",
                "kind": "meta",
                "tool_name": "composer",
                "text": str(c.get("name") or ""),
                "source_path": src,
                "source_offset": rowid,
            }
        )
        for b in c.get("conversation") or []:  # older versions: bubbles inline
            if isinstance(b, dict):
                entries += bubble_entries(b, c, cid, src, rowid)
    for rowid, cid, b in bubbles:
        c = composers.get(cid, (0, {}))[1]
        if _generating(c, now):
            deferred = True
            continue
        entries += parse_row(
            quarantine,
            path,
            rowid,
            orjson.dumps(b),
            f"bubble row {rowid}",
            bubble_entries,
            b,
            c,
            cid,
            src,
            rowid,
        )
    if deferred:  # a chat is still streaming: read these rows again next time
        hw = start_hw
    fp = rd.settled()
    if deferred:
        fp = dict(fp, wal="deferred")
    yield Batch(entries, quarantine, rd.watermark(dict(state, hw=hw), fp), lines=nrows, bytes_read=nbytes)


def _read_transcript(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    src = str(file.path)
    sid = file.path.stem
    try:
        seen_at = _iso(stat_of(file.path).st_mtime)
    except OSError:
        return iter(())

    def parse(rec: dict, offset: int, line_hash: str, state: dict) -> list[dict]:
        role = rec.get("role") if rec.get("role") in ("user", "assistant", "system") else "system"
        msg = dict_at(rec, "message")
        content = msg.get("content", rec.get("content"))
        base = {
            "agent": AGENT,
            "session_id": sid,
            "record_id": f"{sid}:{offset}",
            "ts": seen_at,
            "role": role,
            "source_path": src,
            "source_offset": offset,
            "is_sidechain": False,
        }
        if rec.get("type") == "tool_call":
            return tool_call_entries(rec, base, 0)
        if isinstance(content, str):
            return [dict(base, part=0, kind="message", text=content)]
        if not isinstance(content, list):
            return [
                dict(
                    base,
                    part=0,
                    role="system",
                    kind="meta",
                    tool_name=str(rec.get("type") or "record"),
                    text=compact_json(rec, 2000),
                )
            ]
        out = []
        for i, blk in enumerate(content):
            if not isinstance(blk, dict):
                continue
            t = blk.get("type")
            if t == "text":
                out.append(dict(base, part=i, kind="message", text=str(blk.get("text") or "")))
            elif t == "thinking":
                out.append(dict(base, part=i, kind="thinking", text=str(blk.get("thinking") or "")))
            elif t == "tool_use":
                out.append(
                    dict(
                        base,
                        part=i,
                        role="assistant",
                        kind="tool_call",
                        tool_name=blk.get("name"),
                        native_id=blk.get("id"),
                        text=compact_json(blk.get("input")),
                    )
                )
            elif t == "tool_call":
                out.extend(tool_call_entries(blk, base, i))
            elif t == "tool_result":
                c = blk.get("content")
                text = (
                    c
                    if isinstance(c, str)
                    else "\n".join(str(x.get("text", "")) for x in c if isinstance(x, dict))
                    if isinstance(c, list)
                    else compact_json(c)
                )
                out.append(
                    dict(
                        base,
                        part=i,
                        role="tool",
                        kind="tool_result",
                        native_id=blk.get("tool_use_id"),
                        text=text,
                    )
                )
            else:
                out.append(
                    dict(
                        base,
                        part=i,
                        role="system",
                        kind="meta",
                        tool_name=str(t),
                        text=compact_json(blk, 2000),
                    )
                )
        return out

    return read_jsonl(file, wm, PARSER_VERSION, parse, batch_bytes)


def tool_call_entries(obj: dict, base: dict, part: int) -> list[dict]:
    """The tool call (and, when it carries a ``result``, the tool result) of a Cursor
    ``tool_call`` block or line (see the module doc). With a ``call_id`` both are keyed
    ``<session>:call:<call id>`` (parts 0 and 1), so the started and completed copies
    of one call are stored once; without one, ``<line record id>:tool:<block index>``."""
    inner = obj.get("tool_call") if isinstance(obj.get("tool_call"), dict) else None
    name, args, result = obj.get("name") or obj.get("toolName"), None, obj.get("result")
    if inner and len(inner) == 1:
        kind, body = next(iter(inner.items()))
        name = kind[: -len("ToolCall")] if kind.endswith("ToolCall") else kind
        body = body if isinstance(body, dict) else {}
        args, result = body.get("args"), body.get("result")
    else:
        for k in ("args", "input", "arguments"):
            if k in obj:
                args = obj[k]
                break
    call_id = obj.get("call_id") or obj.get("toolCallId") or obj.get("id")
    b = dict(base, role="assistant", native_id=call_id)
    if call_id:
        b["record_id"], p0 = f"{base['session_id']}:call:{call_id}", 0
    else:
        b["record_id"], p0 = f"{base['record_id']}:tool:{part}", 0
    out = [dict(b, part=p0, kind="tool_call", tool_name=str(name) if name else None, text=compact_json(args))]
    if result is not None:
        text = result if isinstance(result, str) else compact_json(result)
        out.append(
            dict(b, part=p0 + 1, role="tool", kind="tool_result", tool_name=out[0]["tool_name"], text=text)
        )
    return out


#: the rows of a session, for the vault (``readers.rows``): a composer's
#: ``composerData:<id>`` and its ``bubbleId:<id>:<bubble>`` keys
VAULT_TABLES = (
    (
        "cursorDiskKV",
        "CASE WHEN key LIKE 'composerData:%' THEN substr(key, 14) WHEN key LIKE 'bubbleId:%:%' "
        "THEN substr(key, 10, instr(substr(key, 10), ':') - 1) END",
    ),
)

#: changed chats of ``state.vscdb`` or new lines of a transcript
read = by_mode(
    mode_for,
    database_reader(
        AGENT, PARSER_VERSION, _probe, _read_rows, "cannot read cursorDiskKV", vault=VAULT_TABLES
    ),
    _read_transcript,
)
