"""Google Antigravity: the CLI (``agy``) and the IDE, one conversation database each.

Where (agentsview 0.46 ``internal/parser/types.go`` AgentAntigravityCLI and
AgentAntigravity; ``antigravity_cli.go`` and ``antigravity.go`` headers): the CLI keeps
``~/.gemini/antigravity-cli`` (env ``ANTIGRAVITY_CLI_DIR``), the IDE
``~/.gemini/antigravity`` (env ``ANTIGRAVITY_DIR``), the same under the user's home on
Linux, macOS and Windows. Under the root:

- ``conversations/<uuid>.db``: SQLite, one per conversation (the session file read
  here); the agent updates its rows as the conversation runs (mode ``sqlite``);
- ``conversations/<uuid>.pb`` and ``implicit/<uuid>.pb``: AES-encrypted conversation
  streams of older CLI releases: not readable without the agent's key, not read
  (discovery counts them as skipped, and says so when they are all there is);
- ``brain/<uuid>/*.md`` (+ ``<name>.md.metadata.json {artifactType, summary,
  updatedAt}``): the plain-text task, plan and walkthrough artifacts of the
  conversation;
- ``history.jsonl`` (CLI): one line per prompt ``{display, conversationId?, workspace,
  timestamp (epoch ms)}``; it names the conversation's workspace (the project);
- ``<uuid>.trajectory.json`` beside a ``.db``: a decode written by the third-party
  ``agy-reader``; only its ``agyReader.parentCascadeId`` (a sub-agent's parent
  conversation) is used here.

The database (agentsview 0.46 ``antigravity.go`` loadAntigravityStepsWithRawCount and
``antigravity_test.go`` createAntigravityStepTables; field numbers from the
FileDescriptorProtos of the Antigravity CLI 1.1.16 binary as agentsview names them):

- ``steps(idx PRIMARY KEY, step_type, status, …, step_payload BLOB)``: one protobuf
  ``CortexStep`` per step; its field 1 (varint) is the step kind, else ``step_type``:
  14 ``USER_INPUT`` (the user's prompt), 15 ``PLANNER_RESPONSE`` (the model's answer and
  tool calls); every other kind is a tool's execution step (run command, view file,
  code action, …). No ``.proto`` is published: texts are the UTF-8 strings of the
  payload tree, a step's time its earliest ``google.protobuf.Timestamp``-shaped
  message ``{1: seconds, 2: nanos}``, and a tool call a known tool name string with
  the JSON-object string and the id string beside it (agentsview's heuristics);
- ``gen_metadata(idx, data)``: one ``CortexStepGeneratorMetadata`` per model call:
  field 1 ``chat_model`` {4 ``usage`` ``ModelUsageStats`` {1 model enum (1000-4999), 2
  input tokens (uncached), 3 output tokens (thinking included), 4 cache write
  (deprecated), 5 cache read}, 19 ``response_model``, 21 ``model_display_name``}, field
  2 ``step_indices`` (the steps it produced; the first planner step among them takes
  the usage);
- the database carries no product version: the ledger's agent version is the schema
  fingerprint (SHA-256 of the ``sqlite_master`` SQL ordered by type and name, each
  followed by a newline, then ``PRAGMA user_version`` and a newline), named
  ``1.0.7-1.0.10`` for the one schema agentsview 0.46 ``antigravity_version.go`` maps,
  else ``schema-<first 12 hex>``.

Entries: a step is read again whole when the database changes; its ``record_id`` is
``<uuid>:<idx>:<SHA-256 of the payload, 12 hex>`` (a step the agent rewrote is a new
entry; the old one is marked ``rewound``, ``readers.document.track_ids``). User steps:
``user``/``message``; planner steps: ``assistant``/``message`` plus one ``tool_call``
per call found; execution steps: ``tool``/``tool_result`` whose ``native_id`` is the
tool call id the step names, when it names one. Usage: one row per generation
(``usage_key`` ``antigravity:<uuid>:gen:<idx>``) on the planner step it produced (or
a ``meta`` entry when none decoded). Brain artifacts are ``meta`` entries (``tool_name``
``artifact``). Times: the step's timestamp, else the database's mtime.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.coverage import Tally
from ctxkeep.sources.readers.document import track_ids
from ctxkeep.sources.readers.sqlite import DbRead, database_reader, parse_row, read_pages

USER_INPUT = 14
PLANNER_RESPONSE = 15
#: schema fingerprint prefix → release range (agentsview 0.46 antigravity_version.go)
SCHEMA_VERSIONS = {"1ca98426f561": "1.0.7-1.0.10"}
#: Antigravity's tool names (agentsview 0.46 antigravity.go knownAntigravityToolNames)
TOOL_NAMES = frozenset(
    [
        "view_file",
        "read_url_content",
        "replace_file_content",
        "multi_replace_file_content",
        "write_to_file",
        "define_subagent",
        "invoke_subagent",
        "manage_subagents",
        "send_message",
        "manage_task",
        "ask_permission",
        "ask_question",
        "schedule",
        "search_web",
        "generate_image",
        "run_command",
        "execute_command",
        "run_shell_command",
        "grep_search",
        "search_files",
        "list_directory",
        "edit_file",
        "read_file",
        "write_file",
    ]
)
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MAX_DEPTH = 24
#: the key before the first row of a keyset page (``readers.sqlite.read_pages``)
_FIRST: Any = -1
REASON_ENCRYPTED = "encrypted conversation stream (.pb): not readable without the agent's key"
_MAX_FIELDS = 200_000

# ---------------------------------------------------------------- protobuf wire format


@dataclass
class Field:
    """One protobuf field: number, wire type, value (int for varints, bytes for
    length-delimited and fixed fields) and, for bytes that parse as a message, its
    fields."""

    num: int
    wire: int
    value: Any
    nested: list[Field] | None = None


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise ValueError("bad varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def pb_parse(buf: bytes, depth: int = 0, budget: list[int] | None = None) -> list[Field]:
    """The fields of a protobuf message (Protocol Buffers encoding: varint 0, fixed64
    1, length-delimited 2, groups 3/4 skipped, fixed32 5). A length-delimited value
    that parses whole as a message gets ``nested``. Raises ValueError on bytes that
    are not a message."""
    budget = budget if budget is not None else [_MAX_FIELDS]
    if depth > _MAX_DEPTH:
        raise ValueError("too deep")
    out: list[Field] = []
    pos = 0
    while pos < len(buf):
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("too many fields")
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        if num < 1 or num > 100_000:
            raise ValueError("bad field number")
        if wire == 0:
            v, pos = _varint(buf, pos)
            out.append(Field(num, 0, v))
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if pos + n > len(buf):
                raise ValueError("short fixed field")
            out.append(Field(num, wire, buf[pos : pos + n]))
            pos += n
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("short bytes")
            val = buf[pos : pos + n]
            pos += n
            f = Field(num, 2, val)
            if val and val[0] >= 0x08:
                try:
                    f.nested = pb_parse(val, depth + 1, budget) or None
                except ValueError:
                    f.nested = None
            out.append(f)
        elif wire in (3, 4):
            continue
        else:
            raise ValueError("bad wire type")
    return out


def pb_find(fields: list[Field], num: int) -> Field | None:
    return next((f for f in fields if f.num == num), None)


def _text(f: Field) -> str | None:
    """The field's bytes as text when they are printable UTF-8 (tabs and newlines
    allowed)."""
    if f.wire != 2 or not f.value:
        return None
    try:
        s = f.value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(unicodedata.category(c) in ("Cc", "Cs") and c not in "\n\t\r" for c in s):
        return None
    return s


def pb_strings(fields: list[Field]) -> list[str]:
    """Every text leaf of the field tree, in order (a leaf that is itself a message
    with text leaves is walked instead)."""
    out: list[str] = []
    for f in fields:
        if f.nested:
            sub = pb_strings(f.nested)
            if sub:
                out += sub
                continue
        s = _text(f)
        if s is not None:
            out.append(s)
    return out


def _timestamp(fields: list[Field]) -> float | None:
    """Seconds of a ``google.protobuf.Timestamp``-shaped message (varints only: 1
    seconds in 2001-2100, 2 nanos < 1e9), else None."""
    if not fields or any(f.wire != 0 or f.num not in (1, 2) for f in fields):
        return None
    sec = pb_find(fields, 1)
    nanos = pb_find(fields, 2)
    if sec is None or not 978_307_200 <= sec.value < 4_102_444_800:
        return None
    if nanos is not None and nanos.value >= 1_000_000_000:
        return None
    return sec.value + (nanos.value / 1e9 if nanos is not None else 0.0)


def earliest_time(fields: list[Field]) -> float | None:
    """The earliest Timestamp-shaped message in the tree (seconds), or None."""
    best: float | None = None
    for f in fields:
        if f.nested:
            t = _timestamp(f.nested)
            if t is None:
                t = earliest_time(f.nested)
            if t is not None and (best is None or t < best):
                best = t
    return best


def _iso(sec: float | None) -> str | None:
    if sec is None:
        return None
    return dt.datetime.fromtimestamp(sec, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def _is_json_object(s: str) -> bool:
    s = s.strip()
    if not (s.startswith("{") and s.endswith("}")):
        return False
    try:
        return isinstance(orjson.loads(s), dict)
    except orjson.JSONDecodeError:
        return False


def tool_calls(fields: list[Field]) -> list[tuple[str, str | None, str]]:
    """``(name, id, arguments JSON)`` of each tool call in a planner step: a message
    of the tree holding a known tool name string, with the UUID-like and JSON-object
    strings beside it."""
    out: list[tuple[str, str | None, str]] = []
    for f in fields:
        if not f.nested:
            continue
        leaves = [s for g in f.nested if not g.nested and (s := _text(g)) is not None]
        name = next((s for s in leaves if s in TOOL_NAMES), None)
        if name is not None:
            cid = next((s for s in leaves if _UUID.match(s) or s.startswith(("toolu_", "call_"))), None)
            args = next((s for s in leaves if _is_json_object(s)), "")
            out.append((name, cid, args))
        else:
            out += tool_calls(f.nested)
    return out


def _noise(s: str) -> bool:
    """Strings of a step that are ids, placeholders or config paths, not content."""
    t = s.strip()
    return (
        len(t) < 2
        or bool(_UUID.match(t))
        or t.startswith(("MODEL_PLACEHOLDER_", "toolu_", "call_"))
        or t in TOOL_NAMES
        or "/.gemini/antigravity" in t
    )


def usage_of(data: bytes) -> tuple[dict | None, str | None, list[int]]:
    """``(token counts, model name, step indices)`` of one ``gen_metadata`` row (see
    the module doc); counts None when the row holds no plausible usage block."""
    fields = pb_parse(data)
    steps: list[int] = []
    for f in fields:
        if f.num != 2:
            continue
        if f.wire == 0:
            steps.append(f.value)
        elif f.wire == 2:
            pos = 0
            while pos < len(f.value):
                v, pos = _varint(f.value, pos)
                steps.append(v)
    chat = pb_find(fields, 1)
    if chat is None or not chat.nested:
        return None, None, steps
    model = None
    for num in (21, 19):
        m = pb_find(chat.nested, num)
        s = _text(m) if m is not None else None
        if s and len(s) <= 64 and any(c.isalpha() for c in s):
            model = s
            break
    u = pb_find(chat.nested, 4)
    if u is None or not u.nested:
        return None, model, steps
    vals = {f.num: f.value for f in u.nested if f.wire == 0}
    if not 1000 <= vals.get(1, 0) < 5000 or 2 not in vals or 3 not in vals:
        return None, model, steps
    if any(v > 2_000_000 for k, v in vals.items() if k != 1):
        return None, model, steps
    return (
        {
            "input_tokens": vals[2],
            "output_tokens": vals[3],
            "cache_read_tokens": vals.get(5, 0),
        },
        model,
        steps,
    )


# ---------------------------------------------------------------- the source


def schema_version(conn) -> str:
    """The ledger's agent version of a database: the release range of its schema
    fingerprint, else ``schema-<12 hex>`` (see the module doc)."""
    h = hashlib.sha256()
    for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name"):
        h.update(str(sql).encode() + b"\n")
    h.update(str(conn.execute("PRAGMA user_version").fetchone()[0]).encode() + b"\n")
    key = h.hexdigest()[:12]
    return SCHEMA_VERSIONS.get(key, f"schema-{key}")


def _probe(conn) -> tuple[str, bool, bool]:
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "steps" not in tables:
        raise ValueError("no steps table of Antigravity's shape")
    cols = {r[1] for r in conn.execute("PRAGMA table_info(steps)")}
    return schema_version(conn), "gen_metadata" in tables, "step_type" in cols


def _history(root: Path, sid: str) -> str | None:
    """The workspace ``history.jsonl`` names for conversation ``sid`` (the CLI), or None."""
    try:
        with open(root / "history.jsonl", "rb") as f:
            for line in f:
                if sid.encode() not in line:
                    continue
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(rec, dict) and rec.get("conversationId") == sid:
                    ws = rec.get("workspace")
                    if isinstance(ws, str) and ws:
                        return ws
    except OSError:
        return None
    return None


def _parent(db: Path) -> str | None:
    """``agyReader.parentCascadeId`` of the ``<uuid>.trajectory.json`` beside ``db``."""
    side = db.with_name(db.stem + ".trajectory.json")
    try:
        if side.stat().st_size > 64 * 1024 * 1024:
            return None
        doc = orjson.loads(side.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    meta = doc.get("agyReader") if isinstance(doc, dict) else None
    pid = meta.get("parentCascadeId") if isinstance(meta, dict) else None
    return pid.lower() if isinstance(pid, str) and _UUID.match(pid) else None


def _artifacts(agent: str, root: Path, sid: str, base: dict) -> list[dict]:
    out: list[dict] = []
    folder = root / "brain" / sid
    try:
        names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".md"))
    except OSError:
        return out
    for name in names:
        try:
            body = (folder / name).read_text("utf-8", "replace")
        except OSError:
            continue
        kind = summary = ts = None
        try:
            meta = orjson.loads((folder / f"{name}.metadata.json").read_bytes())
            if isinstance(meta, dict):
                kind, summary, ts = meta.get("artifactType"), meta.get("summary"), meta.get("updatedAt")
        except (OSError, orjson.JSONDecodeError):
            pass
        head = f"[{kind} {name}]" if isinstance(kind, str) and kind else f"[{name}]"
        text = f"{head}\n{summary}\n\n{body}" if isinstance(summary, str) and summary else f"{head}\n{body}"
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        out.append(
            dict(
                base,
                ts=ts if isinstance(ts, str) else base["ts"],
                record_id=f"{sid}:brain:{name}:{digest}",
                message_id=f"{sid}:brain:{name}:{digest}",
                part=0,
                role="assistant",
                kind="meta",
                tool_name="artifact",
                text=text,
                source_offset=0,
            )
        )
    return out


def step_entries(idx: int, step_type: int, payload: bytes, base: dict) -> list[dict]:
    """Entry dicts of one step (see the module doc). Raises ValueError for a payload
    that is not a protobuf message."""
    fields = pb_parse(payload)
    k = pb_find(fields, 1)
    kind = k.value if k is not None and k.wire == 0 else step_type
    ts = _iso(earliest_time(fields)) or base["ts"]
    rid = f"{base['session_id']}:{idx}:{hashlib.sha256(payload).hexdigest()[:12]}"
    e = dict(base, ts=ts, record_id=rid, message_id=rid, source_offset=idx)
    strings = [s for s in dict.fromkeys(pb_strings(fields)) if not _noise(s)]
    if kind == USER_INPUT:
        prompt = max(strings, key=len) if strings else ""
        return [dict(e, part=0, role="user", kind="message", text=prompt)]
    calls = tool_calls(fields) if kind == PLANNER_RESPONSE else []
    args = {a for _, _, a in calls}
    text = "\n\n".join(s for s in strings if s not in args)
    if kind == PLANNER_RESPONSE:
        out = [dict(e, part=0, role="assistant", kind="message", text=text)] if text else []
        for name, cid, a in calls:
            out.append(
                dict(
                    e,
                    part=len(out),
                    role="assistant",
                    kind="tool_call",
                    tool_name=name,
                    native_id=cid,
                    text=a,
                )
            )
        return out or [dict(e, part=0, role="assistant", kind="message", text="")]
    cid = next((s for s in pb_strings(fields) if _UUID.match(s) or s.startswith(("toolu_", "call_"))), None)
    return [
        dict(e, part=0, role="tool", kind="tool_result", tool_name=f"step:{kind}", native_id=cid, text=text)
    ]


@dataclass(frozen=True)
class AntigravitySource:
    """A source (``contract.Source``) for one Antigravity product: its root under the
    home (``rel``), the environment variable that overrides it (``env``)."""

    AGENT: str
    env: str
    rel: str
    PARSER_VERSION: int = 1
    MODE: Mode = "sqlite"

    def roots(self, ctx: DiscoveryContext) -> list[Path]:
        return [ctx.env_dir(self.env, ctx.home / self.rel), *ctx.extra_dirs]

    def discover(self, ctx: DiscoveryContext) -> Discovery:
        """Find ``conversations/<uuid>.db`` under the root and configured roots."""
        d = Discovery(self.AGENT)
        for root in self.roots(ctx):
            base = root / "conversations"
            d.searched.append(base)
            if base.is_dir():
                for p in sorted_paths(base.glob("*.db")):
                    if _UUID.match(p.stem):
                        d.add(p, "sqlite")
            for sub in ("conversations", "implicit"):
                if (root / sub).is_dir():
                    for p in (root / sub).glob("*.pb"):
                        if _UUID.match(p.stem):
                            d.skip(p, REASON_ENCRYPTED)
        root = self.roots(ctx)[0]
        d.explain_empty(root, f"no conversations/<uuid>.db under {root}")
        if not d.files and d.skipped.get(REASON_ENCRYPTED):
            d.reason = f"only encrypted conversation streams (.pb) under {root}: not readable without the agent's key"
        return d

    def matches(self, path: Path) -> bool:
        """True for a ``conversations/<uuid>.db`` under a folder named like this
        product's root (``antigravity`` or ``antigravity-cli``)."""
        return (
            path.suffix == ".db"
            and bool(_UUID.match(path.stem))
            and path.parent.name == "conversations"
            and path.parent.parent.name == Path(self.rel).name
        )

    def _rows(self, rd: DbRead, probed: tuple) -> Iterator[Batch]:
        version, has_gen, has_type = probed
        path = rd.path
        sid = path.stem.lower()
        root = path.parent.parent
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = None
        base: dict[str, Any] = {
            "agent": self.AGENT,
            "session_id": sid,
            "parent_session_id": _parent(path),
            "project_dir": _history(root, sid),
            "ts": _iso(mtime),
            "source_path": str(path),
        }
        base["is_sidechain"] = base["parent_session_id"] is not None
        entries: list[dict] = []
        quarantine: list[dict] = []
        tally = Tally(reset=True)
        vt = tally.version(version)
        by_step: dict[int, list[dict]] = {}
        stype = "step_type" if has_type else "0"
        sql = f"SELECT idx, {stype}, step_payload FROM steps WHERE idx > ? ORDER BY idx LIMIT ?"
        nbytes = 0
        for rows, _, _ in read_pages(path, sql, lambda k: (k,), lambda r: r[0], _FIRST):
            for idx, st, payload in rows:
                raw = bytes(payload) if isinstance(payload, bytes | memoryview) else b""
                nbytes += len(raw)
                vt.records += 1
                if not raw:
                    vt.parsed += 1
                    continue
                got = parse_row(
                    quarantine,
                    path,
                    idx,
                    raw,
                    f"steps row {idx}",
                    step_entries,
                    idx,
                    st or 0,
                    raw,
                    base,
                    default=None,
                )
                if got is None:
                    vt.quarantined += 1
                    continue
                vt.parsed += 1
                vt.entries += len(got)
                by_step[idx] = got
                entries += got
        if has_gen:
            gsql = "SELECT idx, data FROM gen_metadata WHERE idx > ? ORDER BY idx LIMIT ?"
            for rows, _, _ in read_pages(path, gsql, lambda k: (k,), lambda r: r[0], _FIRST):
                for idx, data in rows:
                    raw = bytes(data) if isinstance(data, bytes | memoryview) else b""
                    nbytes += len(raw)
                    vt.records += 1
                    got = parse_row(
                        quarantine, path, idx, raw, f"gen_metadata row {idx}", usage_of, raw, default=None
                    )
                    if got is None:
                        vt.quarantined += 1
                        continue
                    vt.parsed += 1
                    counts, model, steps = got
                    target = next(
                        (
                            e
                            for s in steps or [idx]
                            for e in by_step.get(s, [])
                            if e["role"] == "assistant" and e["kind"] == "message"
                        ),
                        None,
                    )
                    if target is not None and model:
                        for e in by_step.get(target["source_offset"], []):
                            if e["role"] == "assistant":
                                e["model"] = model
                    if counts is None:
                        continue
                    key = f"antigravity:{sid}:gen:{idx}"
                    if target is not None and not target.get("usage_key"):
                        target.update(counts, usage_key=key, model=model or target.get("model"))
                    else:
                        rid = f"{sid}:gen:{idx}"
                        entries.append(
                            dict(
                                base,
                                record_id=rid,
                                part=0,
                                role="system",
                                kind="meta",
                                tool_name="usage",
                                text="",
                                model=model,
                                usage_key=key,
                                source_offset=idx,
                                **counts,
                            )
                        )
                        vt.entries += 1
        arts = _artifacts(self.AGENT, root, sid, base)
        vt.entries += len(arts)
        entries += arts
        state = dict(rd.state)
        old = list(state.get("ids") or [])
        ids = list(dict.fromkeys(e["message_id"] for e in entries if e.get("message_id")))
        track_ids(state, self.AGENT, sid, old, ids)
        changes = state.pop("_status_changes", [])
        yield Batch(
            entries,
            quarantine,
            rd.watermark(state, rd.settled()),
            lines=vt.records,
            bytes_read=nbytes,
            status_changes=changes,
            coverage=tally,
        )

    def read(
        self, file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        """Read one conversation database whole when it (or its ``-wal``) changed."""
        reader = database_reader(
            self.AGENT, self.PARSER_VERSION, _probe, self._rows, "cannot read conversation"
        )
        return reader(file, wm, batch_bytes)


#: the CLI (``agy``): ``~/.gemini/antigravity-cli``
CLI = AntigravitySource(AGENT="antigravity-cli", env="ANTIGRAVITY_CLI_DIR", rel=".gemini/antigravity-cli")
#: the IDE: ``~/.gemini/antigravity``
IDE = AntigravitySource(AGENT="antigravity", env="ANTIGRAVITY_DIR", rel=".gemini/antigravity")
