"""The stdio MCP server (``ctxkeep mcp``) for agents, on the official ``mcp`` SDK
(2.x low-level ``Server``: the input schemas below are written by hand, plain
objects, so cross-field checks live in the handlers).

Tools: ``ctx_search`` (tier 1), ``ctx_fetch`` (tier 2), ``ctx_stats`` (read-only
counts), ``ctx_index`` (index a text or file as a note), ``ctx_resume`` (a resume
snapshot of a session, ``query.resume``), ``ctx_purge`` (when the
purge core is available). Every tool answers with a text rendering for the model and
the same data as ``structured_content``. Wrong arguments come back as a tool error
(``is_error``) with one line saying what, where and what to do.

Lenient inputs, because models send them: booleans also as ``"true"``/``"false"``,
arrays also as a JSON string (``'["a"]'``) or a single string, numbers also as
strings. Interactive path: never imports Prefect.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from ctxkeep.errors import CtxkeepError, PurgeCancelled, UsageError
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.sqlite.store_safety import damaged, is_corruption

log = logging.getLogger(__name__)

SERVER_NAME = "ctxkeep"
MAX_QUERIES = 10
DEFAULT_LIMIT = 8
MAX_LIMIT = 200
DEFAULT_SEARCH_BUDGET = 2000
DEFAULT_FETCH_BUDGET = 8000
DEFAULT_RESUME_BUDGET = 1500
MAX_BUDGET = 200_000
PURGE_LOCK_TIMEOUT = 30.0  # seconds to wait for a running ingest/compress to finish

_FILTER_PROPS = {
    "agent": {"type": "string", "description": "claude-code, codex, note, … (a,b for several)"},
    "project": {"type": "string", "description": "project directory; entries at or below it"},
    "session": {"type": "string", "description": "a session id"},
    "kind": {"type": "string", "description": "message, tool_call, tool_result, thinking, summary, meta"},
    "role": {"type": "string", "description": "user, assistant, system, tool"},
    "tool": {"type": "string", "description": "tool name, e.g. Bash, shell, apply_patch"},
    "since": {"type": "string", "description": "UTC time or age: 2025-06-01, 2025-06-01T12:00Z, 7d, 12h"},
    "until": {"type": "string", "description": "UTC time or age, inclusive (a date includes that whole day)"},
    "status": {"type": "string", "description": "active, archived, consumed"},
}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "ctx_search",
        "description": (
            "Search the stored history of coding-agent sessions (Claude Code, Codex, notes, …): "
            "past messages, tool calls and outputs, decisions, error messages, file paths, ids. "
            "Returns a ranked index (tier 1): entry id, agent, session, time, kind, title, token "
            "size and a ≤300-character snippet per hit, within a token budget. "
            "WHEN: you need context from earlier sessions or from this one beyond your window "
            '("what did we decide about X", "where did error Y happen", "which command built Z"). '
            "Then call ctx_fetch with the ids worth reading. "
            "WHEN NOT: for files in the working tree (read them directly), or to read a whole "
            "entry (use ctx_fetch). Several phrasings go in one call as `queries`."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "queries": {
                    "type": ["array", "string"],
                    "items": {"type": "string"},
                    "description": 'one or more queries: words, "exact phrases", ids like '
                    "bd-q3fy, paths, error text; CJK works",
                },
                "limit": {
                    "type": ["integer", "string"],
                    "description": f"hits per query, 1-{MAX_LIMIT} (default {DEFAULT_LIMIT})",
                },
                "budget": {
                    "type": ["integer", "string"],
                    "description": f"token budget for the whole answer (default {DEFAULT_SEARCH_BUDGET})",
                },
                "filters": {
                    "type": "object",
                    "properties": _FILTER_PROPS,
                    "description": "combinable filters",
                },
                "raw": {
                    "type": ["boolean", "string"],
                    "description": "pass FTS5 query syntax through (default false)",
                },
            },
            "required": ["queries"],
        },
    },
    {
        "name": "ctx_fetch",
        "description": (
            "Fetch the full contents of entries found by ctx_search (tier 2), within a token budget. "
            "A text that does not fit keeps its head and tail; the middle is replaced by a marker "
            "giving the elided bytes and the offset to fetch them with (pass `offset` with one id). "
            "WHEN: a ctx_search hit looks relevant and you need its whole text. "
            "WHEN NOT: to search (use ctx_search), or for many ids at once with a small budget."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "ids": {
                    "type": ["array", "string"],
                    "items": {"type": "string"},
                    "description": "entry ids (or unique prefixes of 6+ characters)",
                },
                "budget": {
                    "type": ["integer", "string"],
                    "description": f"token budget for all texts (default {DEFAULT_FETCH_BUDGET})",
                },
                "offset": {
                    "type": ["integer", "string"],
                    "description": "continue one entry from this byte offset (from a marker)",
                },
            },
            "required": ["ids"],
        },
    },
    {
        "name": "ctx_stats",
        "description": (
            "Read-only counts of the context store: entries per agent, kind and status, sessions, "
            "distinct texts, tokens, usage totals, file sizes, last ingest, redacted values per "
            "kind (counts only, never the values). "
            "WHEN: before a purge (to preview what is stored), or to see whether sessions were "
            "ingested at all. WHEN NOT: to find content (use ctx_search). Changes nothing."
        ),
        "input_schema": {"type": "object", "properties": {}},
    },
    {
        "name": "ctx_index",
        "description": (
            "Index a text or a file as a note entry (agent `note`) under a source label, so later "
            "ctx_search calls find it; indexing the same label again replaces it. The file is only "
            "read. WHEN: to keep a decision, a summary, a design note or a document searchable "
            "across sessions. WHEN NOT: for agent session files (the ingest job reads those), or "
            "for secrets."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "description": "source label (the note's session id)"},
                "text": {"type": "string", "description": "the text to index (or give path)"},
                "path": {"type": "string", "description": "a file to index (or give text)"},
                "projectDir": {"type": "string", "description": "project the note belongs to"},
            },
            "required": ["label"],
        },
    },
]

RESUME_TOOL = {
    "name": "ctx_resume",
    "description": (
        "A resume snapshot of a stored session, within a token budget: the user's first and last "
        "prompts, the open tasks (last TodoWrite / update_plan / todo state), the files created, "
        "edited and read with counts, the last failing command and its error, the rules the user "
        "stated (verbatim), and the exact ctx_fetch / `ctxkeep show` calls for more. Works for a "
        "session of any agent. WHEN: after a compaction or when picking up earlier work "
        '("where were we?"); without arguments it takes the latest session of the project. '
        "WHEN NOT: to find a specific past detail (use ctx_search)."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "sessionId": {"type": "string", "description": "a session id or unique prefix (default: latest)"},
            "projectDir": {
                "type": "string",
                "description": "the project whose latest session to take (default: the server's directory)",
            },
            "budget": {
                "type": ["integer", "string"],
                "description": f"token budget of the snapshot (default {DEFAULT_RESUME_BUDGET})",
            },
        },
    },
}

PURGE_TOOL = {
    "name": "ctx_purge",
    "description": (
        "Permanently delete stored context: one session (`sessionId`) or one project "
        '(`scope: "project"`, the project being `projectDir`, else the server\'s working '
        "directory), from every store. `confirm: true` is required. Idempotent; the reply lists "
        "what was removed and the resolved scope. WHEN: the user asks to forget a session or a "
        "project (e.g. private data was pasted). WHEN NOT: to free space (compression does "
        "that), or without the user's explicit request. Preview with ctx_stats first."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "sessionId": {"type": "string", "description": "the session to purge (scope session)"},
            "scope": {"type": "string", "description": '"session" or "project"'},
            "projectDir": {"type": "string", "description": "the project for scope project"},
            "confirm": {"type": ["boolean", "string"], "description": "must be true to purge"},
        },
        "required": ["confirm"],
    },
}


# ---------------------------------------------------------------- lenient inputs


def as_bool(v: Any, name: str, default: bool = False) -> bool:
    """``v`` as a boolean: bool, or the strings true/false/1/0/yes/no (any case).
    None → ``default``. Raises UsageError otherwise."""
    if v is None:
        return default
    if isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
        return v.strip().lower() in ("true", "1", "yes")
    raise UsageError(f"{name} must be true or false, got {v!r}", where=name)


def as_list(v: Any, name: str) -> list[str]:
    """``v`` as a list of strings: a list, a JSON array in a string, or one string.
    Raises UsageError for other types."""
    if v is None:
        return []
    if isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            try:
                v = json.loads(s)
            except json.JSONDecodeError:
                raise UsageError(
                    f"{name} is not a valid JSON array: {s[:60]}",
                    where=name,
                    hint='pass an array like ["a", "b"]',
                ) from None
        else:
            return [s] if s else []
    if isinstance(v, (list, tuple)):
        return [str(x) for x in v if str(x).strip()]
    raise UsageError(f"{name} must be an array of strings", where=name)


def as_int(v: Any, name: str, default: int, lo: int, hi: int, *, clamp_high: bool = True) -> tuple[int, str]:
    """``v`` as an integer in ``[lo, hi]``. Returns ``(value, note)``: above ``hi`` it is
    clamped (note says so); below ``lo``, or not a number, raises UsageError."""
    if v is None or v == "":
        return default, ""
    try:
        n = int(str(v).strip()) if not isinstance(v, bool) else None
    except ValueError:
        n = None
    if n is None:
        raise UsageError(f"{name} must be a whole number, got {v!r}", where=name)
    if n < lo:
        raise UsageError(f"{name} {n} is too small", where=name, hint=f"use {lo} to {hi}")
    if n > hi:
        if not clamp_high:
            raise UsageError(f"{name} {n} is too large", where=name, hint=f"use {lo} to {hi}")
        return hi, f"{name} {n} clamped to {hi}"
    return n, ""


def strict_confirm(v: Any) -> bool | None:
    """A destructive call's ``confirm``: True only for ``true`` or ``"true"`` (any
    case); None when absent (the purge contract then asks for it); False otherwise
    (``"yes"``, ``1``, ``"y"``: cancelled, never a purge)."""
    if v is None:
        return None
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


#: file names ``ctx_index`` never reads: credentials and keys (fnmatch patterns,
#: matched on the lower-cased file name)
CREDENTIAL_NAMES = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "id_*",
    ".netrc",
    "_netrc",
    "shadow",
    "gshadow",
    "shadow-",
    "passwd-",
    "credentials",
    "credentials.*",
    "credentials*",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    "kubeconfig",
    "*.kubeconfig",
    "secrets.*",
    ".htpasswd",
)
#: directories whose files are never read (kernel and device pseudo-files)
SPECIAL_ROOTS = ("/proc", "/sys", "/dev", "/run")


def index_roots(home: Path) -> list[Path]:
    """Extra directories ``ctx_index`` may read, from ``[mcp] index_roots`` in
    ``<home>/config.toml`` (a list of paths; ``~`` expanded). Missing or unreadable
    config: none."""
    from ctxkeep import config as cfgmod
    from ctxkeep.errors import ConfigError

    try:
        roots = cfgmod.load_config(Path(home)).mcp.index_roots or []
    except (OSError, ConfigError):
        return []
    if isinstance(roots, str):
        roots = [roots]
    return [Path(os.path.expanduser(str(r))).resolve() for r in roots if isinstance(r, str) and r.strip()]


def check_index_path(path: str, cwd: Path, extra_roots: list[Path]) -> Path:
    """The file ``ctx_index`` may read for ``path`` (relative to ``cwd``), resolved
    through symlinks. Raises UsageError for: special files (``/proc``, ``/sys``,
    ``/dev``, ``/run``, sockets, FIFOs, devices), a hard link (``st_nlink > 1``: its
    other names cannot be found, as discovery's rule, ``sources.confine``), a file outside the project dir
    (``cwd``), the home dir and the configured ``[mcp] index_roots``, and credential
    files by name (``CREDENTIAL_NAMES``), each with what to do."""
    import fnmatch
    import stat

    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = cwd / p
    real = Path(os.path.realpath(p))
    for root in SPECIAL_ROOTS:
        if real == Path(root) or str(real).startswith(root + "/"):
            raise UsageError(f"{path} is a system pseudo-file, not a document", where="path")
    try:
        st = real.stat()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}", where="path") from None
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "a socket, FIFO or device"
        raise UsageError(f"{path} is {what}, not a regular file", where="path", hint="give a text file")
    if st.st_nlink > 1:  # a hard link: its other names (maybe outside) cannot be found cheaply
        raise UsageError(
            f"{path} is a hard link ({st.st_nlink} names): its other names may be outside the project",
            where="path",
            hint="index a copy of the file",
        )
    for name in {p.name.lower(), real.name.lower()}:
        if any(fnmatch.fnmatchcase(name, pat) for pat in CREDENTIAL_NAMES):
            raise UsageError(
                f"{path} looks like a credential file ({name}): not indexed",
                where="path",
                hint="index a summary as text instead; secrets do not belong in the store",
            )
    roots = [Path(os.path.realpath(cwd)), Path(os.path.realpath(Path.home()))] + extra_roots
    if not any(real == r or r in real.parents for r in roots):
        raise UsageError(
            f"{path} is outside the project and home directories",
            where="path",
            hint="add its directory to [mcp] index_roots in config.toml to allow it",
        )
    return real


# ---------------------------------------------------------------- handlers


def _render_hits(res) -> str:
    lines = [f'query "{res.query}": {len(res.hits)} hit(s)']
    for h in res.hits:
        when = (h.ts or "")[:16].replace("T", " ")
        lines.append(
            f"- {h.entry_id} | {h.agent} | session {h.session_id} | {when} | {h.kind}"
            + (f" {h.tool_name}" if h.tool_name else "")
            + f" | ~{h.token_estimate} tok"
        )
        if h.title:
            lines.append(f"  title: {h.title}")
        lines.append(f"  {h.snippet}")
    if res.note:
        lines.append(f"note: {res.note}")
    return "\n".join(lines)


class Handlers:
    """The tools' logic over a ctxkeep home, independent of the transport.

    Each method takes the tool's argument dict and returns ``(text, data)``; it
    raises CtxkeepError (UsageError for bad arguments) with a one-line message.
    """

    def __init__(self, home: Path, cwd: Path | None = None):
        self.home = Path(home)
        self.cwd = Path(cwd or os.getcwd())

    def _ro(self):
        from ctxkeep.sinks import sqlite as sqlite_store

        return sqlite_store.connect(self.home, readonly=True, mmap=True)

    def ctx_search(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.query.search import Filters, search

        queries = as_list(a.get("queries", a.get("query")), "queries")
        if not queries:
            raise UsageError(
                "queries is required: one or more search strings",
                where="queries",
                hint='pass {"queries": ["what to find"]}',
            )
        notes = []
        if len(queries) > MAX_QUERIES:
            notes.append(f"only the first {MAX_QUERIES} of {len(queries)} queries were run")
            queries = queries[:MAX_QUERIES]
        limit, n1 = as_int(a.get("limit"), "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        budget, n2 = as_int(a.get("budget"), "budget", DEFAULT_SEARCH_BUDGET, 1, MAX_BUDGET)
        notes += [n for n in (n1, n2) if n]
        raw = as_bool(a.get("raw"), "raw")
        f = a.get("filters") or {}
        if isinstance(f, str):
            try:
                f = json.loads(f) if f.strip() else {}
            except json.JSONDecodeError:
                raise UsageError("filters is not a JSON object", where="filters") from None
        if not isinstance(f, dict):
            raise UsageError("filters must be an object", where="filters")
        top = {k: a[k] for k in _FILTER_PROPS if a.get(k) not in (None, "")}
        if top:  # filters given beside "filters" (a common slip): used, and said so
            clash = sorted(k for k in top if f.get(k) not in (None, "") and f[k] != top[k])
            if clash:
                raise UsageError(
                    f"filter {', '.join(clash)} given twice with different values",
                    where="filters",
                    hint='put filters inside "filters" only',
                )
            f = {**f, **top}
            notes.append(f'read {", ".join(sorted(top))} as filters (they belong inside "filters")')
        unknown = sorted(set(f) - set(_FILTER_PROPS))
        if unknown:
            raise UsageError(
                f"unknown filter {', '.join(unknown)}",
                where="filters",
                hint="known: " + ", ".join(_FILTER_PROPS),
            )
        filters = Filters(**{k: v for k, v in f.items() if v not in (None, "")})
        conn = self._ro()
        try:
            per_query = max(1, budget // len(queries))
            results = [
                search(conn, q, filters=filters, limit=limit, budget_tokens=per_query, raw=raw)
                for q in queries
            ]
        finally:
            conn.close()
        text = "\n\n".join(_render_hits(r) for r in results)
        if notes:
            text += "\nnote: " + "; ".join(notes)
        text += '\n(fetch full texts with ctx_fetch {"ids": [...]})'
        return text, {"results": [r.as_dict() for r in results], "notes": notes, "budget_tokens": budget}

    def ctx_fetch(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.query.fetch import fetch

        ids = as_list(a.get("ids", a.get("id")), "ids")
        if not ids:
            raise UsageError("ids is required: entry ids from ctx_search", where="ids")
        budget, n1 = as_int(a.get("budget"), "budget", DEFAULT_FETCH_BUDGET, 1, MAX_BUDGET)
        offset, _ = as_int(a.get("offset"), "offset", 0, 0, 2**62, clamp_high=False)
        conn = self._ro()
        try:
            rows, problems = fetch(conn, ids, budget_tokens=budget, offset=offset)
        finally:
            conn.close()
        if n1:
            problems.append(n1)
        if not rows:
            raise UsageError(
                "; ".join(problems) or "nothing to fetch", where="ids", hint="use entry ids from ctx_search"
            )
        parts = []
        for r in rows:
            parts.append(
                f"=== {r.entry_id} | {r.agent} | session {r.session_id} | {r.ts} | "
                f"{r.role}/{r.kind}"
                + (f" {r.tool_name}" if r.tool_name else "")
                + f" | {r.bytes} bytes"
                + (" | CUT" if r.truncated else "")
                + "\n"
                + r.text
            )
        if problems:
            parts.append("note: " + "; ".join(problems))
        return "\n\n".join(parts), {"entries": [r.as_dict() for r in rows], "notes": problems}

    def ctx_stats(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.query.stats import redaction_line, store_stats

        conn = self._ro()
        try:
            s = store_stats(conn, self.home)
        finally:
            conn.close()
        lines = [
            f"store {self.home}: {s['entries']} entries, {s['sessions']} sessions, "
            f"{s['contents']['distinct']} distinct texts ({s['contents']['bytes']} bytes, "
            f"~{s['contents']['token_estimate']} tokens); last ingest {s['last_ingest'] or 'never'}"
        ]
        for agent, d in s["agents"].items():
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(d["kinds"].items()))
            lines.append(f"- {agent}: {d['entries']} entries, {d['sessions']} sessions ({kinds})")
        lines.append("status: " + ", ".join(f"{k} {n}" for k, n in s["status"].items()))
        lines.append(redaction_line(s["redactions"]))
        return "\n".join(lines), s

    def ctx_index(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.pipeline.notes import index_note
        from ctxkeep.sinks import sqlite as sqlite_store

        text, path = a.get("text"), a.get("path")
        if text is not None and path is not None:
            raise UsageError("give text or path, not both", where="ctx_index")
        if text is not None and not isinstance(text, str):
            raise UsageError("text must be a string", where="text")
        if path is not None:
            if not isinstance(path, str):
                raise UsageError("path must be a string", where="path")
            path = check_index_path(path, self.cwd, index_roots(self.home))
        conn = sqlite_store.connect(self.home)
        try:
            r = index_note(
                conn, str(a.get("label") or ""), text=text, path=path, project_dir=a.get("projectDir")
            )
        finally:
            conn.close()
        verb = "replaced" if r["replaced"] else "indexed"
        return (
            f"{verb} note '{r['label']}': entry {r['entry_id']}, {r['bytes']} bytes, "
            f"~{r['token_estimate']} tokens, {r['chunks']} chunk(s)"
        ), r

    def ctx_resume(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.paths import normalize_dir
        from ctxkeep.query.resume import build_snapshot

        budget, note = as_int(a.get("budget"), "budget", DEFAULT_RESUME_BUDGET, 100, MAX_BUDGET)
        sid = str(a.get("sessionId") or "").strip() or None
        project = None if sid else normalize_dir(str(a.get("projectDir") or self.cwd), str(self.cwd))
        conn = self._ro()
        try:
            snap = build_snapshot(conn, sid, project_dir=project, budget=budget)
        finally:
            conn.close()
        text = snap.to_markdown() + (f"note: {note}\n" if note else "")
        return text, snap.as_dict()

    def ctx_purge(self, a: dict) -> tuple[str, dict]:
        from ctxkeep.maintenance.purge_named import purge_named
        from ctxkeep.maintenance.purge_request import parse_purge_request

        try:
            req = parse_purge_request(
                session_id=a.get("sessionId"),
                scope=a.get("scope"),
                project_dir=a.get("projectDir"),
                confirm=strict_confirm(a.get("confirm")),
                cwd=str(self.cwd),
            )
        except PurgeCancelled as e:
            return str(e), {"cancelled": True, "message": str(e)}
        # as `ctxkeep purge`: the session as hits show it (an ambiguous prefix lists the
        # candidates), the project through symlinks, "no such session" and no tombstone
        # when nothing matches
        report = purge_named(self.home, req, timeout=PURGE_LOCK_TIMEOUT)
        r = report.get("removed", {})
        text = (
            f"purged {report['resolved']}: removed {r.get('entries', 0)} entries, "
            f"{r.get('sessions', 0)} sessions, {r.get('contents', 0)} texts, {r.get('chunks', 0)} "
            f"chunks, {r.get('usage', 0)} usage rows, {r.get('quarantine', 0)} quarantined lines; "
            f"tombstone {report.get('tombstone', 'none')}"
        )
        if report.get("backups_note"):
            text += f"; warning: {report['backups_note']}"
        return text, report


def build_server(home: Path, cwd: Path | None = None):
    """The low-level MCP ``Server`` serving the ctxkeep tools over ``home``."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server import Server

    def _tool_error(msg: str) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(text=f"error: {msg}")],
            is_error=True,
            structured_content={"error": msg},
        )

    h = Handlers(home, cwd)
    tools = TOOLS + [RESUME_TOOL, PURGE_TOOL]
    names = {t["name"] for t in tools}

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(**t) for t in tools])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        name, args = params.name, params.arguments or {}
        if name not in names:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {name} - known: {', '.join(sorted(names))}")],
                is_error=True,
            )
        if not isinstance(args, dict):
            return _tool_error(f"{name}: arguments must be an object")
        try:
            # handlers block (SQLite, file reads, indexing): run them in a worker thread
            # so that the event loop keeps answering other requests meanwhile
            text, data = await anyio.to_thread.run_sync(getattr(h, name), args)
        except CtxkeepError as e:
            return types.CallToolResult(
                content=[types.TextContent(text=f"error: {e}")],
                is_error=True,
                structured_content={"error": str(e)},
            )
        except Exception as e:  # never crash the server on one bad call, never leak internals
            if is_corruption(e):  # a damaged page read mid-call: the CLI's one line
                msg = str(damaged(Path(home) / STORE_DB, e))
                return types.CallToolResult(
                    content=[types.TextContent(text=f"error: {msg}")],
                    is_error=True,
                    structured_content={"error": msg},
                )
            log.exception("ctxkeep mcp: %s failed", name)
            return _tool_error(
                f"{name} failed on an internal error - check the arguments against the tool's "
                "schema; the server's log has the details"
            )
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content=json.loads(json.dumps(data, default=str)),
        )

    return Server(
        SERVER_NAME,
        version="0.1.0",
        instructions="Search and fetch the stored context of coding-agent sessions.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve_stdio(home: Path, cwd: Path | None = None) -> None:
    """Run the server on stdin/stdout until the client closes the connection; every
    malformed line gets its JSON-RPC error reply (``ctxkeep.mcp.stdio``)."""
    import anyio

    from ctxkeep.mcp.stdio import stdio_transport

    server = build_server(home, cwd)

    async def main() -> None:
        async with stdio_transport() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
