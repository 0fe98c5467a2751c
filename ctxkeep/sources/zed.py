"""Zed (the editor's Agent Panel) threads.

Where: the Zed data dir's ``threads/threads.db``: ``$XDG_DATA_HOME/zed`` or
``~/.local/share/zed`` (Linux), ``~/Library/Application Support/Zed`` (macOS),
``%LOCALAPPDATA%\\Zed`` (Windows); plus configured dirs. Sources: Zed's
``crates/agent/src/db.rs`` and ``thread.rs`` as public readers of the format describe
them (a schema reference written against Zed commit 511be9a3; kch/zed-thread-viewer's
README: "v0.2.0 (role/segments) and v0.3.0 (User/Agent) formats"; Rust and Python
readers' docs quoted by the ``search`` tool), which agree on:

- table ``threads(id TEXT PRIMARY KEY, parent_id TEXT (later: a sub-agent's parent),
  folder_paths TEXT (later), summary TEXT, updated_at TEXT (RFC 3339), data_type TEXT
  ("json" | "zstd"), data BLOB)``; a thread is rewritten whole (a new row image) as it
  grows, so ``rowid`` + ``updated_at`` is the high-water mark
  (``readers.sqlite.changed_rows``) and a changed thread is parsed again whole, its
  entries dedup by stable ids;
- ``data`` (zstd-compressed JSON when ``data_type`` is ``zstd``), version ``0.3.0``:
  ``{version, title, messages: [{"User": {id, content: [{"Text": s} | {"Mention":
  {uri, content}} | {"Image": …}]}} | {"Agent": {content: [{"Text": s} | {"Thinking":
  {text, signature}} | {"RedactedThinking": …} | {"ToolUse": {id, name, raw_input,
  input, is_input_complete}}], tool_results: {<id>: {tool_use_id, tool_name, is_error,
  content: {"Text": s}, output}}}} | "Resume"], updated_at, cumulative_token_usage,
  request_token_usage: {<user message id>: {input_tokens, output_tokens,
  cache_creation_input_tokens, cache_read_input_tokens}}, model: {provider, model}}``;
  version ``0.2.0``: ``messages: [{id, role, segments: [{type: text|thinking, text}],
  tool_uses: [{id, name, input}], tool_results: [{tool_use_id, is_error, content}]}]``.

Messages carry no time: every entry of a thread takes the thread's ``updated_at``
(said here; the order within a thread is the ``part`` numbering). The project is the
first of ``folder_paths`` (newline-separated) when the row has it. Usage: one row per
``request_token_usage`` item (``usage_key`` ``zed:<thread>:<user message id>``), the
thread's ``model.model`` as its model. A thread's ``summary`` is its title (a
``session`` meta entry). The coverage ledger counts a thread's records each time the
thread is read: a thread rewritten after an ingest is counted again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at
from ctxkeep.sources.contract import Batch, Discovery, DiscoveryContext, Mode, quarantine_row
from ctxkeep.sources.coverage import Tally
from ctxkeep.sources.readers.sqlite import DbRead, advance_mark, changed_rows, database_reader

AGENT = "zed"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

#: the thread JSON versions whose shape is known
KNOWN_VERSIONS = ("0.2.0", "0.3.0")


def data_dirs(ctx: DiscoveryContext) -> list[Path]:
    """Zed's data dirs on Linux (``$XDG_DATA_HOME/zed``), macOS and Windows."""
    base = ctx.env.get("XDG_DATA_HOME")
    out = [(Path(base).expanduser() if base else ctx.home / ".local" / "share") / "zed"]
    out.append(ctx.home / "Library" / "Application Support" / "Zed")
    local = ctx.env.get("LOCALAPPDATA")
    out.append(Path(local) / "Zed" if local else ctx.home / "AppData" / "Local" / "Zed")
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``threads/threads.db`` in the Zed data dirs and configured dirs (a data
    dir or its ``threads`` dir)."""
    d = Discovery(AGENT)
    dirs = data_dirs(ctx)
    for root in dirs + list(ctx.extra_dirs):
        db = (root if root.name == "threads" else root / "threads") / "threads.db"
        d.searched.append(db)
        d.add(db, MODE)
    d.explain_empty(dirs[0], f"no threads/threads.db under {dirs[0]} (nor the macOS or Windows data dirs)")
    return d


def matches(path: Path) -> bool:
    """True for Zed's ``threads.db`` given with ``--path``."""
    return path.name == "threads.db" and path.parent.name == "threads"


def _probe(conn) -> tuple[set[str], int]:
    cols = {r[1] for r in conn.execute("PRAGMA table_info(threads)")}
    if not {"id", "updated_at", "data_type", "data"} <= cols:
        raise ValueError("no threads table of Zed's shape")
    top = conn.execute("SELECT coalesce(max(rowid), 0) FROM threads").fetchone()[0]
    return cols, top


def _decode(data_type, data) -> dict:
    raw = bytes(data) if isinstance(data, bytes | memoryview) else str(data or "").encode()
    if data_type == "zstd":
        import zstandard

        raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=256 * 1024 * 1024)
    doc = orjson.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("thread data is not a JSON object")
    return doc


def _content_text(c) -> str:
    """Text of a 0.3.0 content item list or a tool result's content."""
    if isinstance(c, str):
        return c
    if isinstance(c, dict):
        if isinstance(c.get("Text"), str):
            return c["Text"]
        return compact_json(c, 2000)
    if isinstance(c, list):
        return "\n".join(_content_text(x) for x in c)
    return "" if c is None else str(c)


def thread_entries(doc: dict, base: dict, tally: Tally, raw: bytes) -> list[dict]:
    """Entry dicts of one thread document (both versions; see the module doc)."""
    tid = base["session_id"]
    version = str(doc.get("version") or "")
    model_obj = dict_at(doc, "model")
    model = model_obj.get("model") if isinstance(model_obj.get("model"), str) else None
    out: list[dict] = []
    unknown: list[str] = [] if version in KNOWN_VERSIONS else [f"version:{version}"]
    for i, m in enumerate(doc.get("messages") or []):
        mid = str(i)
        if isinstance(m, dict) and ("User" in m or "Agent" in m):  # 0.3.0
            role = "user" if "User" in m else "assistant"
            got = m.get("User") or m.get("Agent")
            body: dict = got if isinstance(got, dict) else {}
            if isinstance(body.get("id"), str):
                mid = body["id"]
            content = body.get("content")
            items: list = content if isinstance(content, list) else []
            tr = body.get("tool_results")
            results: dict = tr if isinstance(tr, dict) else {}
            b = dict(base, record_id=f"{tid}:{i}:{mid}", message_id=mid, role=role)
            for it in items:
                if not isinstance(it, dict) or len(it) != 1:
                    continue
                ((k, v),) = it.items()
                e = dict(b, part=len([x for x in out if x["record_id"] == b["record_id"]]))
                if k == "Text":
                    out.append(dict(e, kind="message", text=str(v)))
                elif k == "Thinking":
                    out.append(dict(e, kind="thinking", text=str((v or {}).get("text") or "")))
                elif k == "RedactedThinking":
                    out.append(dict(e, kind="thinking", text="[redacted thinking]"))
                elif k == "ToolUse" and isinstance(v, dict):
                    args = v.get("input") if v.get("input") is not None else v.get("raw_input")
                    out.append(
                        dict(
                            e,
                            kind="tool_call",
                            tool_name=v.get("name"),
                            native_id=v.get("id"),
                            text=args if isinstance(args, str) else compact_json(args),
                        )
                    )
                    r = results.get(str(v["id"])) if v.get("id") else None
                    if isinstance(r, dict):
                        text = _content_text(r.get("content"))
                        out.append(
                            dict(
                                e,
                                part=e["part"] + 1,
                                role="tool",
                                kind="tool_result",
                                tool_name=r.get("tool_name") or v.get("name"),
                                native_id=v.get("id"),
                                text=("[error] " + text) if r.get("is_error") else text,
                            )
                        )
                elif k == "Mention" and isinstance(v, dict):
                    out.append(
                        dict(
                            e,
                            kind="meta",
                            role="system",
                            tool_name="mention",
                            text=str(v.get("uri") or "")
                            + ("\n" + _content_text(v.get("content")) if v.get("content") else ""),
                        )
                    )
                elif k == "Image":
                    out.append(dict(e, kind="message", text="[image]"))
                else:
                    unknown.append(f"content:{k}")
                    out.append(
                        dict(e, kind="meta", role="system", tool_name=str(k), text=compact_json(v, 2000))
                    )
        elif isinstance(m, dict) and "role" in m:  # 0.2.0
            mid = str(m.get("id", i))
            role = str(m.get("role")) if m.get("role") in ("user", "assistant", "system") else "system"
            b = dict(base, record_id=f"{tid}:{i}:{mid}", message_id=mid, role=role)
            for seg in m.get("segments") or []:
                if isinstance(seg, dict):
                    kind = "thinking" if seg.get("type") == "thinking" else "message"
                    out.append(
                        dict(
                            b,
                            part=sum(x["record_id"] == b["record_id"] for x in out),
                            kind=kind,
                            text=str(seg.get("text") or ""),
                        )
                    )
            for tu in m.get("tool_uses") or []:
                if isinstance(tu, dict):
                    out.append(
                        dict(
                            b,
                            part=sum(x["record_id"] == b["record_id"] for x in out),
                            role="assistant",
                            kind="tool_call",
                            tool_name=tu.get("name"),
                            native_id=tu.get("id"),
                            text=compact_json(tu.get("input")),
                        )
                    )
            for tr in m.get("tool_results") or []:
                if isinstance(tr, dict):
                    text = _content_text(tr.get("content"))
                    out.append(
                        dict(
                            b,
                            part=sum(x["record_id"] == b["record_id"] for x in out),
                            role="tool",
                            kind="tool_result",
                            native_id=tr.get("tool_use_id"),
                            text=("[error] " + text) if tr.get("is_error") else text,
                        )
                    )
        elif m == "Resume":
            continue
        else:
            unknown.append("message")
    usage = dict_at(doc, "request_token_usage")
    for uid, u in usage.items():
        if not isinstance(u, dict):
            continue
        out.append(
            dict(
                base,
                record_id=f"{tid}:usage:{uid}",
                part=0,
                role="system",
                kind="meta",
                tool_name="usage",
                text="",
                model=model,
                input_tokens=as_int(u.get("input_tokens")) or 0,
                output_tokens=as_int(u.get("output_tokens")) or 0,
                cache_creation_tokens=as_int(u.get("cache_creation_input_tokens")) or 0,
                cache_read_tokens=as_int(u.get("cache_read_input_tokens")) or 0,
                usage_key=f"zed:{tid}:{uid}",
            )
        )
    for e in out:
        if e["role"] == "assistant" and e.get("model") is None:
            e["model"] = model
    tally.record(version or None, len(out), unknown, raw)
    return out


def _read_rows(rd: DbRead, probed: tuple) -> Iterator[Batch]:
    path, state = rd.path, rd.state
    cols, top = probed
    mark = dict(state.get("mark") or {})
    if top < (mark.get("rowid") or 0):
        mark = {}  # the table was emptied or replaced: read it all again
    extra = [c if c in cols else "NULL" for c in ("summary", "parent_id", "folder_paths")]
    select = f"SELECT rowid, id, updated_at, data_type, data, {', '.join(extra)} FROM threads"
    src = str(path)
    entries: list[dict] = []
    quarantine: list[dict] = []
    tally = Tally(reset=not state.get("mark"))
    nrows = nbytes = 0
    for rows in changed_rows(path, select, "rowid", "updated_at", mark):
        for rowid, tid, updated, dtype, data, summary, parent, folders in rows:
            nrows += 1
            raw = bytes(data) if isinstance(data, bytes | memoryview) else str(data or "").encode()
            nbytes += len(raw)
            mark = advance_mark(mark, rowid, updated)
            try:
                doc = _decode(dtype, data)
            except Exception as e:  # zstd or JSON damage: the row is quarantined, the rest goes on
                quarantine.append(
                    quarantine_row(path, rowid, raw, f"threads row {rowid}: {type(e).__name__}: {e}")
                )
                tally.quarantined(None)
                continue
            ts = updated if isinstance(updated, str) else None
            project = None
            if isinstance(folders, str) and folders.strip():
                project = folders.strip().splitlines()[0]
            base = {
                "agent": AGENT,
                "session_id": str(tid),
                "parent_session_id": parent if isinstance(parent, str) and parent else None,
                "project_dir": project,
                "ts": ts,
                "is_sidechain": bool(parent),
                "source_path": src,
                "source_offset": rowid,
            }
            title = summary if isinstance(summary, str) and summary else doc.get("title")
            if isinstance(title, str) and title:
                entries.append(
                    dict(
                        base,
                        record_id=f"{tid}:title",
                        part=0,
                        role="system",
                        kind="meta",
                        tool_name="session",
                        text=title,
                    )
                )
            try:
                entries += thread_entries(doc, base, tally, raw[:2000])
            except Exception as e:
                quarantine.append(
                    quarantine_row(
                        path, rowid, raw, f"threads row {rowid}: parser error: {type(e).__name__}: {e}"
                    )
                )
                tally.quarantined(None)
    yield Batch(
        entries,
        quarantine,
        rd.watermark(dict(state, mark=mark), rd.settled()),
        lines=nrows,
        bytes_read=nbytes,
        coverage=tally,
    )


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (("threads", "id", "updated_at"),)

#: changed threads of ``threads.db``
read = database_reader(
    AGENT, PARSER_VERSION, _probe, _read_rows, "cannot read threads.db", vault=VAULT_TABLES
)
