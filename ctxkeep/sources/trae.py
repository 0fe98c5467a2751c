"""Trae (ByteDance's VS Code-based IDE: Trae, Trae CN, TRAE SOLO CN) chat sessions.

Where (agentsview 0.46 ``internal/parser/types.go`` AgentTrae and
``trae_provider.go``): the app's VS Code ``User`` dir, ``~/.config/<App>/User``
(Linux), ``~/Library/Application Support/<App>/User`` (macOS), ``%APPDATA%\\<App>\\
User`` (Windows), for the apps ``Trae``, ``Trae CN`` and ``TRAE SOLO CN``;
``$TRAE_DIR`` names one ``User`` dir instead. In it, ``workspaceStorage/<hash>/
state.vscdb`` (one per opened folder; ``workspace.json`` beside it names the folder,
the project) and ``globalStorage/state.vscdb``.

Format facts (``trae_provider.go``, ``trae_layout.go``): ``state.vscdb`` is VS Code's
key-value SQLite database, ``ItemTable(key, value)``; the key
``memento/icube-ai-agent-storage`` holds JSON ``{list: [{sessionId, createdAt,
updatedAt, model?, messages: [{role (user | assistant | …), content, agentTaskContent
(a string or {content | text | proposal, guideline {planItems [{content}]}}),
timestamp, model?, turnIndex}]}]}``; times are epoch seconds or milliseconds (a
number under 1e11 is seconds) or RFC 3339 text. The format logs no tool calls,
results, thinking or token counts. Newer Trae builds keep their sessions in
``<App>/ModularData/ai-agent/database.db``, encrypted (its first bytes are not the
SQLite header): such a file is counted as skipped by discovery, not read.

Entries: the whole value is read again when the database (or its ``-wal``) changes
(mode ``sqlite``); a message's ``record_id`` is ``<session>:<index>:<SHA-256 of the
message, 12 hex>``, so an edited or truncated history's lost messages are marked
``rewound`` (``readers.document.track_ids``, kept per session). ``user`` and
``assistant`` messages are messages (an assistant's empty ``content`` falls back to
its ``agentTaskContent``), other roles ``meta``. No usage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources._util import as_float, compact_json, epoch_iso
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    quarantine_row,
    sorted_paths,
)
from ctxkeep.sources.coverage import Tally
from ctxkeep.sources.readers.document import track_ids
from ctxkeep.sources.readers.sqlite import DbRead, database_reader
from ctxkeep.sources.vscode_copilot import workspace_folder

AGENT = "trae"
PARSER_VERSION = 1
MODE: Mode = "sqlite"

APPS = ("Trae", "Trae CN", "TRAE SOLO CN")
KEY = "memento/icube-ai-agent-storage"
SQLITE_MAGIC = b"SQLite format 3\x00"
REASON_ENCRYPTED = "encrypted Trae session database (modern layout): not readable"


def user_dirs(ctx: DiscoveryContext) -> list[Path]:
    """``$TRAE_DIR`` when set, else every Trae ``User`` dir on the Linux, macOS and
    Windows layouts."""
    env = ctx.env.get("TRAE_DIR")
    if env:
        return [Path(env).expanduser()]
    bases = [
        Path(ctx.env["XDG_CONFIG_HOME"]) if ctx.env.get("XDG_CONFIG_HOME") else ctx.home / ".config",
        ctx.home / "Library" / "Application Support",
        Path(ctx.env["APPDATA"]) if ctx.env.get("APPDATA") else ctx.home / "AppData" / "Roaming",
    ]
    return [b / app / "User" for b in bases for app in APPS]


def _encrypted(user: Path) -> Path | None:
    db = user.parent / "ModularData" / "ai-agent" / "database.db"
    try:
        with open(db, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError:
        return None
    return db if head != SQLITE_MAGIC else None


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find the ``state.vscdb`` files of every Trae ``User`` dir (and configured
    ``User`` dirs); count an encrypted modern-layout database as skipped."""
    d = Discovery(AGENT)
    for user in [*user_dirs(ctx), *ctx.extra_dirs]:
        ws = user / "workspaceStorage"
        d.searched.append(ws)
        if ws.is_dir():
            for db in sorted_paths(ws.glob("*/state.vscdb")):
                project = workspace_folder(db.parent)
                d.add(db, MODE, {"project": project} if project else {})
        d.searched.append(user / "globalStorage")
        d.add(user / "globalStorage" / "state.vscdb", MODE)
        enc = _encrypted(user)
        if enc is not None:
            d.skip(enc, REASON_ENCRYPTED)
    first = user_dirs(ctx)[0]
    d.explain_empty(first, f"no state.vscdb under {first} (nor the other Trae User dirs)")
    if not d.files and d.skipped.get(REASON_ENCRYPTED):
        d.reason = "only Trae's encrypted session database was found (modern layout): not readable"
    return d


def matches(path: Path) -> bool:
    """A ``state.vscdb`` under a Trae app's ``User`` dir."""
    return path.name == "state.vscdb" and any(p in APPS for p in path.parts)


def _probe(conn) -> str | None:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "ItemTable" not in tables:
        raise ValueError("no ItemTable: not a VS Code state database")
    row = conn.execute("SELECT value FROM ItemTable WHERE key = ?", (KEY,)).fetchone()
    if row is None or row[0] is None:
        return None
    v = row[0]
    return bytes(v).decode("utf-8", "replace") if isinstance(v, bytes | memoryview) else str(v)


def _time(v: Any) -> str | None:
    x = as_float(v)
    if x is not None:
        return epoch_iso(x, 1.0 if x < 1e11 else 0.001)
    return v if isinstance(v, str) and v else None


def _task_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict):
        return ""
    for key in ("content", "text", "proposal"):
        if isinstance(raw.get(key), str) and raw[key].strip():
            return raw[key]
    g = raw.get("guideline")
    items = g.get("planItems") if isinstance(g, dict) else None
    if isinstance(items, list):
        return "\n".join(
            str(i["content"]) for i in items if isinstance(i, dict) and isinstance(i.get("content"), str)
        )
    return ""


def session_entries(s: dict, base: dict, old_ids: list[str], state: dict) -> list[dict]:
    """Entry dicts of one session of the list (see the module doc)."""
    sid = str(s.get("sessionId") or "").strip()
    start = _time(s.get("createdAt")) or _time(s.get("updatedAt"))
    out: list[dict] = []
    ids: list[str] = []
    for i, m in enumerate(s.get("messages") or []):
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "").strip().lower()
        content = m["content"] if isinstance(m.get("content"), str) else ""
        if not content.strip() and role == "assistant":
            content = _task_text(m.get("agentTaskContent"))
        digest = hashlib.sha256(orjson.dumps(m, option=orjson.OPT_SORT_KEYS)).hexdigest()[:12]
        rid = f"{sid}:{i}:{digest}"
        ids.append(rid)
        e = dict(
            base, session_id=sid, ts=_time(m.get("timestamp")) or start, record_id=rid, message_id=rid, part=0
        )
        if role in ("user", "assistant"):
            if not content.strip():
                continue
            model = (m.get("model") or s.get("model")) if role == "assistant" else None
            out.append(
                dict(
                    e,
                    role=role,
                    kind="message",
                    text=content,
                    model=model if isinstance(model, str) else None,
                )
            )
        else:
            out.append(
                dict(
                    e,
                    role="system",
                    kind="meta",
                    tool_name=role or "unknown",
                    text=content or compact_json(m, 2000),
                )
            )
    track_ids(state, AGENT, sid, old_ids, ids)
    return out


def _rows(rd: DbRead, value: str | None) -> Iterator[Batch]:
    state = dict(rd.state)
    per_session: dict = dict(state.get("sessions") or {})
    tally = Tally(reset=True)
    vt = tally.version(None)
    entries: list[dict] = []
    changes: list[dict] = []
    if value:
        try:
            doc = orjson.loads(value)
        except orjson.JSONDecodeError as e:
            vt.records += 1
            vt.quarantined += 1
            q = quarantine_row(rd.path, 0, value.encode("utf-8", "replace"), f"{KEY}: {e}")
            yield Batch([], [q], rd.watermark(state, rd.settled()), coverage=tally)
            return
        sessions = doc.get("list") if isinstance(doc, dict) else None
        base = {
            "agent": AGENT,
            "project_dir": state.get("project"),
            "source_path": str(rd.path),
            "source_offset": 0,
        }
        for s in sessions if isinstance(sessions, list) else []:
            vt.records += 1
            if not isinstance(s, dict) or not str(s.get("sessionId") or "").strip():
                continue
            st: dict = {}
            sid = str(s["sessionId"]).strip()
            got = session_entries(s, base, list(per_session.get(sid) or []), st)
            per_session[sid] = st["ids"]
            changes += st.pop("_status_changes", [])
            vt.parsed += 1
            vt.entries += len(got)
            entries += got
    state["sessions"] = per_session
    yield Batch(
        entries,
        [],
        rd.watermark(state, rd.settled()),
        lines=vt.records,
        status_changes=changes,
        coverage=tally,
    )


#: the rows read, for the vault (``readers.rows``): the agent's key, one document
VAULT_TABLES = (("ItemTable", f"CASE WHEN key = '{KEY}' THEN '' END"),)
_read = database_reader(AGENT, PARSER_VERSION, _probe, _rows, "cannot read state.vscdb", vault=VAULT_TABLES)


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read the sessions of one ``state.vscdb`` whole when it changed."""
    project = file.meta.get("project")
    for b in _read(file, wm):
        for e in b.entries:
            if project and not e.get("project_dir"):
                e["project_dir"] = project
        yield b
