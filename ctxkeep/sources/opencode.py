"""OpenCode (sst/opencode, the TypeScript agent): the JSON-tree storage and the newer
``opencode.db``.

Where: the data dir ``$XDG_DATA_HOME/opencode`` (default ``~/.local/share/opencode``;
sst/opencode uses the XDG layout on Linux, macOS and Windows alike,
``packages/opencode/src/global/index.ts``), plus configured dirs (a data dir or a
``storage`` dir). Two layouts, both read:

- ``storage/session/<projectID>/<sessionID>.json`` (session: id, projectID,
  directory, parentID, title, version, time{created, updated} in ms),
  ``storage/message/<sessionID>/<messageID>.json`` (role, time{created, completed},
  parentID, modelID, providerID, path{cwd, root}, cost, tokens{input, output,
  reasoning, cache{read, write}}, error, finish) and
  ``storage/part/<messageID>/<partID>.json`` (type text/reasoning/tool/file/
  step-start/step-finish/snapshot/patch/agent/subtask/compaction …; a tool part has
  callID, tool, state{status pending/running/completed/error, input, output, error}).
  The folders are named by the ids inside the JSON (``sessionID``, ``messageID``),
  which ctxkeep looks up (a file's name is the id too, unless it was renamed or
  copied: the name is the fallback); a session whose messages are found nowhere is
  named in a note (``ctxkeep sources``). Part files are stored per message, so two
  messages may hold one part id: such a part is scoped by its message.
  Many small files rewritten in place. One *session* is the unit: its change test
  (``unchanged``) is a fingerprint of the names, sizes and mtimes of its session,
  message and part files; a changed session is read again whole and its entries
  dedup by stable ids (``<session>:<part id>``).
- ``opencode.db`` (SQLite, drizzle): ``session(id, project_id, parent_id, directory,
  title, version, time_created, time_updated …)``, ``message(id, session_id,
  time_created, time_updated, data)``, ``part(id, message_id, session_id,
  time_created, time_updated, data)``; ``data`` is the same JSON as the files
  without the ids. Read with a per-row high-water mark (rowid and ``time_updated``,
  ``readers.sqlite.changed_rows``) on ``message`` and ``part``; the same record ids as the tree, so a store that saw the
  tree before opencode migrated it into the database holds each part once.

Sources of the facts: the SYNTHETIC storage tree in ``shared/corpus`` (from
iansherr/claude-code-log test fixtures), sst/opencode ``session/message-v2.ts`` as
described by public readers of the format, and ccusage 20.0.24's opencode loader
(usage = the assistant message's ``tokens``; it reports 2025-06-19
claude-3-5-sonnet-20241022 input 100, output 50, cache 0/0 on the corpus). No real
tree or ``opencode.db`` was found on GitHub: ``tests/fixtures/opencode`` holds a
generated ``opencode.db``.

Mapping: text → message, reasoning → thinking, tool → a tool_call (input) and, once
completed or failed, a tool_result (output or error, role tool), file → a
placeholder message (data URLs are never kept), patch/agent/subtask/compaction/
retry and unknown part types → meta; step-start/step-finish/snapshot → nothing (the
message carries the usage). Each completed assistant message with tokens adds one
meta entry (``tool_name`` ``usage``) carrying its usage, ``usage_key``
``opencode:<message id>``. Parts still streaming (a tool not yet completed, an
assistant message not completed, less than ``STALE_SECONDS`` old) are left for the
next run.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_float, as_int, compact_json, dict_at
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    RawCapture,
    SourceFile,
    Watermark,
    quarantine_row,
)
from ctxkeep.sources.readers import tree
from ctxkeep.sources.readers.sqlite import (
    DbRead,
    advance_mark,
    by_mode,
    changed_rows,
    database_reader,
    parse_row,
)
from ctxkeep.timeutil import format_epoch

AGENT = "opencode"
PARSER_VERSION = 3  # 2: the logged message cost; 3: tree files keyed by their ids, part ids scoped by message
MODE: Mode = "sqlite"  # opencode.db; a session of the JSON tree is a "tree" file (see mode_for)
STALE_SECONDS = 24 * 3600
_SKIP_PARTS = {"step-start", "step-finish", "snapshot"}


def data_dir(ctx: DiscoveryContext) -> Path:
    """sst/opencode's data dir: ``$XDG_DATA_HOME/opencode`` or ``~/.local/share/opencode``."""
    base = ctx.env.get("XDG_DATA_HOME")
    return (Path(base).expanduser() if base else ctx.home / ".local" / "share") / "opencode"


def _storages(ctx: DiscoveryContext) -> list[Path]:
    out = [data_dir(ctx)]
    for d in ctx.extra_dirs:
        out.append(d.parent if d.name == "storage" else d)
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """One file per session of the JSON tree, plus ``opencode.db`` when present."""
    d = Discovery(AGENT)
    for root in _storages(ctx):
        d.searched += [root / "storage" / "session", root / "opencode.db"]
        sess = root / "storage" / "session"
        if sess.is_dir():
            for p in sorted(sess.glob("*/*.json")):
                d.add(p, "tree", {"storage": str(root / "storage")})
        d.add(root / "opencode.db", "sqlite")
    root = data_dir(ctx)
    d.explain_empty(root, f"no storage/session/*/*.json and no opencode.db under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a session file of the tree or an ``opencode.db`` outside ``.opencode/``."""
    if path.name == "opencode.db":
        return path.parent.name != ".opencode"
    return (
        path.suffix == ".json"
        and path.parent.parent.name == "session"
        and path.parent.parent.parent.name == "storage"
    )


def _storage_of(file: SourceFile) -> Path:
    return Path(file.meta.get("storage") or file.path.parent.parent.parent)


def mode_for(path: Path) -> str:
    """``sqlite`` for ``opencode.db``, ``tree`` for a session file of the JSON tree."""
    return "sqlite" if path.name == "opencode.db" else "tree"


# ------------------------------------------------------------------ JSON tree


def _json_id(path: Path) -> str | None:
    """The ``id`` inside a JSON file of the tree (None when unreadable or absent)."""
    try:
        obj = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    v = obj.get("id") if isinstance(obj, dict) else None
    return v if isinstance(v, str) and v and "/" not in v and v not in (".", "..") else None


def _keyed_dir(base: Path, key: str | None, name: str) -> Path:
    """``base/<key>`` (the id inside the JSON, which names the folder sst/opencode
    writes: ``storage/message/<sessionID>/``, ``storage/part/<messageID>/``) when it
    exists, else ``base/<name>`` (the file's name, which is the id unless the file was
    renamed or copied)."""
    if key and (base / key).is_dir():
        return base / key
    return base / name


def _tree_files(file: SourceFile) -> tuple[list[Path], list[tuple[Path, list[Path]]]]:
    """A session's message files and, per message, its part files: folders looked up
    by the ids inside the session and message JSON (``_keyed_dir``)."""
    storage = _storage_of(file)
    mdir = _keyed_dir(storage / "message", _json_id(file.path), file.path.stem)
    msgs = sorted(mdir.glob("*.json"))
    return msgs, [(m, sorted(_keyed_dir(storage / "part", _json_id(m), m.stem).glob("*.json"))) for m in msgs]


def tree_fingerprint(file: SourceFile) -> str:
    """SHA-256 over (name, size, mtime_ns) of a session's session, message and part
    files: changes when any of them is added, removed or rewritten."""
    h = hashlib.sha256()
    msgs, parts = _tree_files(file)
    for p in [file.path, *msgs, *(x for _, ps in parts for x in ps)]:
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p.name}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def unchanged(file: SourceFile, wm: Watermark | None) -> bool:
    """Tree sessions: the fingerprint is the same (``opencode.db`` is a ``sqlite``
    file: ``sources.file_unchanged`` tests it)."""
    if wm is None or wm.parser_version != PARSER_VERSION:
        return False
    try:
        return wm.state.get("fp") == tree_fingerprint(file)
    except OSError:
        return False


def _load(path: Path, quarantine: list) -> dict | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        quarantine.append(quarantine_row(path, 0, raw, f"malformed JSON: {e}"))
        return None
    if not isinstance(obj, dict):
        quarantine.append(quarantine_row(path, 0, raw, f"not a JSON object ({type(obj).__name__})"))
        return None
    return obj


def _read_tree(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    fp = tree_fingerprint(file)
    quarantine: list[dict] = []
    try:
        st = file.path.stat()
    except OSError:
        return
    session = _load(file.path, quarantine) or {"id": file.path.stem}
    now = time.time()
    entries: list[dict] = []
    deferred = False
    msgs, parts = _tree_files(file)
    nbytes = st.st_size
    seen_parts: set[str] = set()
    for mpath, ppaths in parts:
        msg = _load(mpath, quarantine)
        if msg is None:
            continue
        nbytes += _size(mpath)
        loaded = []
        for pp in ppaths:
            part = _load(pp, quarantine)
            nbytes += _size(pp)
            if part is not None:
                loaded.append((pp, part))
        loaded.sort(key=lambda x: str(x[1].get("id") or x[0].stem))
        for pp, part in loaded:
            # a part id met in an earlier message of the session (part files are
            # stored per message, so two messages may hold the same part id) is
            # scoped by its message; the first keeps ``<session>:<part id>``
            pid = str(part.get("id") or pp.stem)
            es, d = part_entries(part, msg, session, str(pp), now, scoped=pid in seen_parts)
            seen_parts.add(pid)
            entries += es
            deferred |= d
        u = usage_entry(msg, session, str(mpath), now)
        if u:
            entries.append(u)
        elif _msg_pending(msg, now):
            deferred = True
    state = {"fp": "deferred" if deferred else fp}
    if not msgs:
        sid = session.get("id") or file.path.stem
        state["note"] = (
            f"session {sid} ({file.path.name}): no message files under {_storage_of(file) / 'message' / str(sid)}"
        )
    new_wm = Watermark(
        path=str(file.path),
        agent=AGENT,
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        offset=0,
        parser_version=PARSER_VERSION,
        state=state,
    )
    # the session's files, for the vault, as one document (``readers.tree``)
    storage = _storage_of(file)
    data = tree.bundle(storage, [file.path, *(x for m, ps in parts for x in (m, *ps))])
    raw = RawCapture.of(file, "document", 0, data, st)
    raw.meta["vault_tree"] = 1
    yield Batch(entries, quarantine, new_wm, bytes_read=nbytes, lines=len(msgs), raw=raw)


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


# ------------------------------------------------------------------ mapping


def ms_iso(v) -> str | None:
    """Milliseconds since the epoch → ISO-8601 UTC text (None when missing)."""
    x = as_int(v)
    if not x:
        return None
    return format_epoch(x / 1000)


def _msg_complete(msg: dict) -> bool:
    if msg.get("role") != "assistant":
        return True
    t = dict_at(msg, "time")
    return bool(t.get("completed") or msg.get("error") or msg.get("finish"))


def _msg_pending(msg: dict, now: float) -> bool:
    """An assistant message still streaming (not completed and recent)."""
    if _msg_complete(msg):
        return False
    t = dict_at(msg, "time")
    created = as_int(t.get("created")) or 0
    return now - created / 1000 < STALE_SECONDS


def _base(msg: dict, session: dict, src: str, offset: int) -> dict:
    sid = msg.get("sessionID") or session.get("id")
    path = dict_at(msg, "path")
    parent = session.get("parentID") or None
    model = msg.get("modelID")
    if not model and isinstance(msg.get("model"), dict):
        model = msg["model"].get("modelID")
    t = dict_at(msg, "time")
    return {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": parent,
        "parent_id": msg.get("parentID"),
        "project_dir": path.get("cwd") or session.get("directory"),
        "ts": ms_iso(t.get("created")),
        "model": model if msg.get("role") == "assistant" else None,
        "message_id": msg.get("id"),
        "is_sidechain": parent is not None,
        "source_path": src,
        "source_offset": offset,
    }


def part_entries(
    part: dict, msg: dict, session: dict, src: str, now: float, offset: int = 0, scoped: bool = False
) -> tuple[list[dict], bool]:
    """Entry dicts of one part, and whether it was deferred (still streaming).

    ``record_id`` is ``<session id>:<part id>`` (the same in the tree and the
    database, where ``part.id`` is the primary key), or with ``scoped``
    ``<session id>:<message id>:<part id>`` (a part id an earlier message of the
    tree's session holds too); a tool part gives ``part`` 0 (call) and 1 (result).
    """
    ptype = part.get("type")
    if ptype in _SKIP_PARTS:
        return [], False
    role = msg.get("role") if msg.get("role") in ("user", "assistant", "system") else "assistant"
    b = _base(msg, session, src, offset)
    pid = part.get("id") or hashlib.sha256(orjson.dumps(part)).hexdigest()[:24]
    rid = f"{b['session_id']}:{msg.get('id')}:{pid}" if scoped else f"{b['session_id']}:{pid}"
    b.update(record_id=rid, native_id=pid, role=role)
    pt = dict_at(part, "time")
    if pt.get("start"):
        b["ts"] = ms_iso(pt["start"]) or b["ts"]
    pending = _msg_pending(msg, now)
    if ptype in ("text", "reasoning"):
        if pending and not pt.get("end"):
            return [], True
        kind = "message" if ptype == "text" else "thinking"
        return [dict(b, part=0, kind=kind, text=str(part.get("text") or ""))], False
    if ptype == "tool":
        st = dict_at(part, "state")
        status = st.get("status")
        done = status in ("completed", "error")
        if not done and (pending or now - _epoch_s(part, msg) < STALE_SECONDS):
            return [], True
        inp = st.get("input")
        call = dict(
            b,
            part=0,
            kind="tool_call",
            tool_name=part.get("tool"),
            native_id=part.get("callID") or pid,
            text=inp if isinstance(inp, str) else compact_json(inp) if inp is not None else "",
        )
        out = [call]
        if done:
            text = st.get("output") if status == "completed" else st.get("error")
            out.append(
                dict(
                    b,
                    part=1,
                    role="tool",
                    kind="tool_result",
                    tool_name=part.get("tool"),
                    native_id=part.get("callID") or pid,
                    text=text if isinstance(text, str) else compact_json(text),
                )
            )
        return out, False
    if ptype == "file":
        label = " ".join(str(x) for x in (part.get("mime"), part.get("filename")) if x)
        url_v = part.get("url")
        url = url_v if isinstance(url_v, str) else ""
        where = "" if url.startswith("data:") else f" {url[:300]}"
        return [dict(b, part=0, kind="message", text=f"[file {label}]{where}")], False
    text = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID", "type")}
    return [
        dict(b, part=0, role="system", kind="meta", tool_name=str(ptype), text=compact_json(text, 2000))
    ], False


def _epoch_s(part: dict, msg: dict) -> float:
    t = dict_at(msg, "time")
    return (as_int(t.get("created")) or 0) / 1000


def usage_entry(msg: dict, session: dict, src: str, now: float, offset: int = 0) -> dict | None:
    """The usage-carrying meta entry of a completed assistant message with ``tokens``
    (input, output, reasoning, cache.read, cache.write: tokens) and its logged
    ``cost`` (USD, when above 0), else None."""
    tok = msg.get("tokens")
    if msg.get("role") != "assistant" or not isinstance(tok, dict) or _msg_pending(msg, now):
        return None
    cache = dict_at(tok, "cache")
    vals = [
        as_int(tok.get("input")) or 0,
        as_int(tok.get("output")) or 0,
        as_int(cache.get("read")) or 0,
        as_int(cache.get("write")) or 0,
        as_int(tok.get("reasoning")) or 0,
    ]
    if not any(vals):
        return None
    b = _base(msg, session, src, offset)
    mid = msg.get("id")
    cost = msg.get("cost")
    return dict(
        b,
        record_id=f"{b['session_id']}:{mid}:usage",
        native_id=mid,
        part=0,
        role="system",
        kind="meta",
        tool_name="usage",
        text=f"cost {cost}" if cost else "",
        input_tokens=vals[0],
        output_tokens=vals[1],
        cache_read_tokens=vals[2],
        cache_creation_tokens=vals[3],
        reasoning_tokens=vals[4],
        # OpenCode writes 0 when it has no price for the provider (a subscription, a
        # local model): not a logged cost (ccusage's OpenCode loader takes cost > 0)
        cost_usd=logged if (logged := as_float(cost)) and logged > 0 else None,
        usage_key=f"opencode:{mid}",
    )


# ------------------------------------------------------------------ opencode.db


def _probe(conn) -> tuple[dict, dict]:
    """Every ``session`` row by id (the fields the tree's session files have) and the
    largest rowid of ``part`` and ``message``."""
    sessions = {}
    cur = conn.execute("SELECT * FROM session")
    names = [c[0] for c in cur.description]
    for r in cur.fetchall():
        s = dict(zip(names, r, strict=False))
        sessions[s["id"]] = {
            "id": s["id"],
            "directory": s.get("directory"),
            "parentID": s.get("parent_id"),
            "title": s.get("title"),
        }
    tops = {
        t: conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {t}").fetchone()[0] for t in ("part", "message")
    }
    return sessions, tops


def _read_rows(rd: DbRead, probed: tuple) -> Iterator[Batch]:
    path, state = rd.path, rd.state
    sessions, tops = probed
    now = time.time()
    quarantine: list[dict] = []
    entries: list[dict] = []
    deferred: list[int] = []
    src = str(path)
    nbytes = 0

    def jload(raw, rowid, what):
        try:
            v = orjson.loads(raw)
            if isinstance(v, dict):
                return v
            raise ValueError("not a JSON object")
        except (orjson.JSONDecodeError, ValueError, TypeError) as e:
            quarantine.append(
                quarantine_row(
                    path, rowid, raw.encode() if isinstance(raw, str) else b"", f"{what} row {rowid}: {e}"
                )
            )
            return None

    # parts changed since the mark, with their message
    marks = dict(state.get("marks") or {})
    pmark, mmark = dict(marks.get("part") or {}), dict(marks.get("message") or {})
    # rows deleted and the table refilled (rowids went back): read it all again
    pmark = pmark if tops["part"] >= (pmark.get("rowid") or 0) else {}
    mmark = mmark if tops["message"] >= (mmark.get("rowid") or 0) else {}
    select = (
        "SELECT p.rowid, p.id, p.session_id, p.message_id, p.time_updated, p.data, m.data, m.id, "
        "m.time_created FROM part p LEFT JOIN message m ON m.id = p.message_id"
    )
    new_p = dict(pmark)
    for rows in changed_rows(path, select, "p.rowid", "p.time_updated", pmark):
        for rowid, pid, sid, mid, tu, pdata, mdata, _mid, mtc in rows:
            nbytes += len(pdata or "")
            new_p = advance_mark(new_p, rowid, tu)
            part = jload(pdata, rowid, "part")
            msg = jload(mdata, rowid, "message") if mdata is not None else {"role": "assistant"}
            if part is None or msg is None:
                continue
            part = dict(part, id=pid, sessionID=sid, messageID=mid)
            msg = dict(msg, id=mid, sessionID=sid)
            msg.setdefault("time", {"created": mtc})
            es, d = parse_row(
                quarantine,
                path,
                rowid,
                pdata,
                f"part row {rowid}",
                part_entries,
                part,
                msg,
                sessions.get(sid, {"id": sid}),
                src,
                now,
                rowid,
                default=([], False),
            )
            entries += es
            if d:
                deferred.append(tu)
    # messages changed since the mark: usage
    select = "SELECT rowid, id, session_id, time_created, time_updated, data FROM message"
    new_m = dict(mmark)
    for rows in changed_rows(path, select, "rowid", "time_updated", mmark):
        for rowid, mid, sid, tc, tu, mdata in rows:
            nbytes += len(mdata or "")
            new_m = advance_mark(new_m, rowid, tu)
            msg = jload(mdata, rowid, "message")
            if msg is None:
                continue
            msg = dict(msg, id=mid, sessionID=sid)
            msg.setdefault("time", {"created": tc})
            sess = sessions.get(sid, {"id": sid})
            u = parse_row(
                quarantine,
                path,
                rowid,
                mdata,
                f"message row {rowid}",
                usage_entry,
                msg,
                sess,
                src,
                now,
                rowid,
                default=None,
            )
            if u:
                entries.append(u)
    if deferred and new_p.get("ts") is not None:
        new_p["ts"] = min(new_p["ts"], min(deferred))
    fp = rd.settled()
    if deferred:
        fp = dict(fp, wal="deferred")
    state["marks"] = {"part": new_p, "message": new_m}
    yield Batch(entries, quarantine, rd.watermark(state, fp), lines=len(entries), bytes_read=nbytes)


#: the rows of a session, for the vault (``readers.rows``)
VAULT_TABLES = (
    ("session", "id", "time_updated"),
    ("message", "session_id", "time_updated"),
    ("part", "session_id", "time_updated"),
)

#: one tree session (whole) or the new rows of ``opencode.db``
read = by_mode(
    mode_for, database_reader(AGENT, PARSER_VERSION, _probe, _read_rows, vault=VAULT_TABLES), _read_tree
)
