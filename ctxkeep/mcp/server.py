"""The stdio MCP server (``ctxkeep mcp``) for agents, on the official ``mcp`` SDK
(2.x low-level ``Server``). A front end: each tool reads its arguments into a
``ctxkeep.service`` request, asks the question and renders the result; the input
schemas are generated from the request models (``service.model.tool_schema``).

Tools: ``ctx_search`` (tier 1), ``ctx_fetch`` (tier 2), ``ctx_stats`` (read-only
counts), ``ctx_index`` (index a text or file as a note), ``ctx_resume`` (a resume
snapshot of a session, ``query.resume``), ``ctx_purge`` (when the
purge core is available). Every tool answers with a text rendering for the model and
the same data as ``structured_content``. Wrong arguments come back as a tool error
(``is_error``) with one line saying what, where and what to do.

Lenient inputs, because models send them (read by the request models): booleans also
as ``"true"``/``"false"``, arrays also as a JSON string (``'["a"]'``) or a single
string, numbers also as strings. Interactive path: never imports Prefect.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxkeep.errors import CtxkeepError
from ctxkeep.service.fetch import AgentFetchRequest, fetch
from ctxkeep.service.index import IndexRequest, index
from ctxkeep.service.model import tool_schema
from ctxkeep.service.purge import PurgeRequest, purge
from ctxkeep.service.resume import ResumeRequest, resume
from ctxkeep.service.search import AgentSearchRequest, QueryHits, search
from ctxkeep.service.stats import StatsRequest, stats
from ctxkeep.service.store import store_error

if TYPE_CHECKING:
    from pydantic import BaseModel

log = logging.getLogger(__name__)

SERVER_NAME = "ctxkeep"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "ctx_search",
        "description": (
            "Search the stored history of coding-agent sessions (Claude Code, Codex, notes, …): "
            "past messages, tool calls and outputs, decisions, error messages, file paths, ids. "
            "Returns a ranked index (tier 1): entry id, agent, session, time, kind, title, token "
            "size and a ≤300-character snippet per hit, within a token budget (default 4,000 "
            "tokens, ~18 hits; a note says what it left out: pass `budget`, up to 200,000, for more). "
            "WHEN: you need context from earlier sessions or from this one beyond your window "
            '("what did we decide about X", "where did error Y happen", "which command built Z"). '
            "Then call ctx_fetch with the ids worth reading. "
            "WHEN NOT: for files in the working tree (read them directly), or to read a whole "
            "entry (use ctx_fetch). Several phrasings go in one call as `queries`."
        ),
        "input_schema": tool_schema(AgentSearchRequest),
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
        "input_schema": tool_schema(AgentFetchRequest),
    },
    {
        "name": "ctx_stats",
        "description": (
            "Read-only counts of the context store: entries per agent, kind and status, sessions, "
            "distinct texts, tokens, usage totals, file sizes, last new data, redacted values per "
            "kind (counts only, never the values). "
            "WHEN: before a purge (to preview what is stored), or to see whether sessions were "
            "ingested at all. WHEN NOT: to find content (use ctx_search). Changes nothing."
        ),
        "input_schema": tool_schema(StatsRequest),
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
        "input_schema": tool_schema(IndexRequest),
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
    "input_schema": tool_schema(ResumeRequest),
}

PURGE_TOOL = {
    "name": "ctx_purge",
    "description": (
        "Permanently delete stored context: one session (`sessionId`) or one project "
        '(`scope: "project"`, the project being `projectDir`, else the server\'s working '
        "directory), from every store. `confirm: true` is required. Idempotent; the reply lists "
        "what was removed and the resolved scope. WHEN: the user asks to forget a session or a "
        "project (e.g. private data was pasted). WHEN NOT: to free space (compression does "
        "that), or without the user's explicit request. Preview first with `dryRun: true` (what "
        "would be removed; changes nothing), then call again with `confirm: true`."
    ),
    "input_schema": tool_schema(PurgeRequest),
}


# ---------------------------------------------------------------- handlers


def _render_hits(res: QueryHits) -> str:
    lines = [f'query "{res.query}": {len(res.hits)} hit(s)']
    for h in res.hits:
        lines += [("- " if part == "head" else "  ") + line for part, line in h.render()]
    if res.note:
        lines.append(f"note: {res.note}")
    if res.suggestions:
        lines.append(res.did_you_mean())
    return "\n".join(lines)


def _n(n: int, one: str, many: str | None = None) -> str:
    """``1 session``, ``2 sessions`` (``ctx_stats`` said ``1 sessions``: newuser24 F18)."""
    return f"{n} {one if n == 1 else many or one + 's'}"


class Handlers:
    """The tools over a ctxkeep home, independent of the transport: each method reads
    the tool's arguments into the question's request (``ctxkeep.service``), asks it and
    returns ``(text, structured content)``; a bad argument raises ``UsageError``."""

    def __init__(self, home: Path, cwd: Path | None = None):
        self.home = Path(home)
        self.cwd = Path(cwd or os.getcwd())

    def ctx_search(self, a: dict) -> tuple[str, dict]:
        res = search(self.home, AgentSearchRequest.parse(a, cwd=self.cwd))
        text = "\n\n".join(_render_hits(r) for r in res.results)
        if res.notes:
            text += "\nnote: " + "; ".join(res.notes)
        if any(r.hits for r in res.results):  # no hint after 0 hits (newuser24 F17)
            text += '\n(fetch full texts with ctx_fetch {"ids": [...]})'
        return text, res.as_json()

    def ctx_fetch(self, a: dict) -> tuple[str, dict]:
        res = fetch(self.home, AgentFetchRequest.parse(a, cwd=self.cwd))
        parts = [f"=== {r.header()}\n{r.text}" for r in res.entries]
        if res.notes:
            parts.append("note: " + "; ".join(res.notes))
        return "\n\n".join(parts), res.as_json()

    def ctx_stats(self, a: dict) -> tuple[str, dict]:
        s = stats(self.home, StatsRequest.parse(a))
        lines = [
            f"store {self.home}: {_n(s.entries, 'entry', 'entries')}, {_n(s.sessions, 'session')}, "
            f"{s.contents.distinct} distinct texts ({s.contents.bytes} bytes, "
            f"~{s.contents.token_estimate} tokens); last new data {s.last_ingest or 'never'}"
        ]
        for agent, d in s.agents.items():
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(d.kinds.items()))
            lines.append(
                f"- {agent}: {_n(d.entries, 'entry', 'entries')}, {_n(d.sessions, 'session')} ({kinds})"
            )
        lines.append("status: " + ", ".join(f"{k} {n}" for k, n in s.status.items()))
        lines.append(s.redactions.line())
        return "\n".join(lines), s.as_json()

    def ctx_index(self, a: dict) -> tuple[str, dict]:
        r = index(self.home, IndexRequest.parse(a, cwd=self.cwd), cwd=self.cwd)
        return r.line(), r.as_json()

    def ctx_resume(self, a: dict) -> tuple[str, dict]:
        req = ResumeRequest.parse(a, cwd=self.cwd)
        snap = resume(self.home, req)
        return snap.markdown + "".join(f"note: {n}\n" for n in req.notes), snap.as_json()

    def ctx_purge(self, a: dict) -> tuple[str, dict]:
        r = purge(self.home, PurgeRequest.parse(a, cwd=self.cwd), cwd=self.cwd)
        return r.line(), r.as_json()


#: each tool's request model: its field names and aliases are the tool's arguments
REQUESTS: dict[str, type[BaseModel]] = {
    "ctx_search": AgentSearchRequest,
    "ctx_fetch": AgentFetchRequest,
    "ctx_stats": StatsRequest,
    "ctx_index": IndexRequest,
    "ctx_resume": ResumeRequest,
    "ctx_purge": PurgeRequest,
}


def _line(e: CtxkeepError, request: type[BaseModel] | None) -> str:
    """``what (where) - what to do``, a request field in ``where`` named as the tool's
    argument (``session`` → ``sessionId`` where the tool calls it so)."""
    where = e.where
    f = request.model_fields.get(where) if request is not None and where else None
    if f is not None and f.alias:
        where = f.alias
    line = e.what + (f" ({where})" if where else "") + (f" - {e.todo}" if e.todo else "")
    return " ".join(line.split())


def build_server(home: Path, cwd: Path | None = None):
    """The low-level MCP ``Server`` serving the ctxkeep tools over ``home``."""
    import anyio.to_thread
    import mcp_types as types
    from mcp.server import Server

    def _tool_error(msg: str, e: CtxkeepError | None = None) -> types.CallToolResult:
        """A tool error: ``error: what (where) - what to do`` for the model, and the
        same with its fields as structured content."""
        fields = {} if e is None else {"what": e.what, "where": e.where, "todo": e.todo}
        return types.CallToolResult(
            content=[types.TextContent(text=f"error: {msg}")],
            is_error=True,
            structured_content={"error": msg, **fields},
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
        except Exception as e:  # never crash the server on one bad call, never leak internals
            err = store_error(home, e)  # a CtxkeepError, or a damaged page read mid-call
            if err is None:
                log.exception("ctxkeep mcp: %s failed", name)
                return _tool_error(
                    f"{name} failed on an internal error - check the arguments against the tool's "
                    "schema; the server's log has the details"
                )
            return _tool_error(_line(err, REQUESTS.get(name)), err)
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
