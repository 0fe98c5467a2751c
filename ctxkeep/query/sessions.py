"""Sessions: the list of stored sessions (``ctxkeep sessions``) and one session's
conversation in order (``ctxkeep show --session``).

The list is built in SQL, one page at a time (``sinks.session_list``: filters, the
order, ``LIMIT``/``OFFSET`` and the total in the database): from DuckDB's ``history``
(counts, usage tokens, cost in USD, titles) when ``<home>/analytics.duckdb`` exists and
opens read-only; else (no analytics file, or another process holds it) from SQLite's
``entries`` and ``usage``, without cost. Either way a sub-agent session (one with a
``parent_session_id``) is listed right under its parent. Only the page's sessions
are read further here: first prompts for those without a title, their shown ids.

Session ids are shown as their shortest unique prefix among every session id of the
store (``sinks.sqlite.lookup.short_session_ids``, looked up per id through the index),
and any unique prefix is accepted back (``lookup.resolve_session``, the one resolver).
Times are ISO-8601 UTC text; tokens are tokens; sizes are UTF-8 bytes. Nothing here
imports Polars or Prefect; ``sinks.analytics_current`` only when the list is asked.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import ANALYTICS_DB
from ctxkeep.sinks.sqlite import content_text
from ctxkeep.sinks.sqlite.lookup import resolve_session, short_ids, short_session_ids
from ctxkeep.transforms.tokens import heuristic_tokens

TITLE_CHARS = 120
#: user "messages" that are not prompts: Claude Code slash-command echoes and their
#: output, the caveat it writes before them (Claude Code 1.x–2.1)
_NOT_PROMPT_RE = re.compile(
    r"^\s*(<command-name>|<command-message>|<local-command-stdout>|<local-command-stderr>|"
    r"<local-command-caveat>|<bash-input>|<bash-stdout>|<bash-stderr>|<user-prompt-submit-hook>|"
    r"\[Request interrupted by user)"
)


#: a slash command the user gave arguments: ``<command-name>/orchestrator</command-name>``
#: and ``<command-args>create TODO app by Next.js</command-args>`` in one user message
#: (Claude Code 1.x-2.1; ``<command-message>`` may come first)
_COMMAND_NAME_RE = re.compile(r"<command-name>\s*(/?[^<\s]+)\s*</command-name>")
_COMMAND_ARGS_RE = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def prompt_text(text: str | None) -> str | None:
    """What the user typed, from a user message's ``text``: the text itself; for a
    slash command given arguments, ``"/name args"``; None for a slash command without
    arguments, command output, a caveat or an empty text (Claude Code stores those as
    user messages too)."""
    if not (text and text.strip()):
        return None
    if not _NOT_PROMPT_RE.match(text):
        return text
    args = _COMMAND_ARGS_RE.search(text)
    name = _COMMAND_NAME_RE.search(text)
    if name and args and args.group(1).strip():
        return f"{name.group(1)} {args.group(1).strip()}"
    return None


@dataclass
class SessionRow:
    """One session of ``list_sessions``: ``agent``, ``session_id`` and its shortest
    unique prefix ``short_id``, ``parent_session_id`` (sub-agents), ``project_dir``,
    ``started``/``ended`` (ISO-8601 UTC), counts of ``messages`` and ``tool_calls``,
    ``tokens`` (usage the agent logged: input + output + cache read + cache write;
    0 when it logged none; None when it logged a cost but did not record the tokens:
    Crush, Go opencode), ``token_estimate`` (tokens of the stored texts),
    ``cost_usd`` (None without the analytics file or a price), ``cost_logged`` (of its
    responses, those whose cost is the agent's own logged figure, not list prices: Crush,
    OpenCode), ``title`` (the session's
    title or first prompt, one line; None: neither), ``depth`` (0, or 1 for a sub-agent listed under
    its parent)."""

    agent: str
    session_id: str
    short_id: str
    parent_session_id: str | None
    project_dir: str | None
    started: str | None
    ended: str | None
    messages: int
    tool_calls: int
    tokens: int | None
    token_estimate: int
    cost_usd: float | None
    cost_logged: int
    title: str | None
    depth: int = 0

    def as_dict(self) -> dict:
        return dict(self.__dict__)  # scalars only: ``asdict``'s deep copy cost 20 % of `sessions --all`


def short_ids_of(home: Path, ids) -> dict[str, str]:
    """``session id → its shortest unique prefix`` in the store of ``home``
    (``lookup.short_session_ids``), for tables that get their ids from elsewhere
    (``ctxkeep report session`` reads DuckDB). Without a readable ``store.db`` every id
    is returned whole."""
    from ctxkeep.sinks.sqlite.lookup import short_session_ids

    ids = [i for i in ids if i]
    try:
        conn = sqlite_store.connect(Path(home), readonly=True)
    except Exception:  # no store, or a damaged one: the full ids are still right
        return {i: i for i in ids}
    try:
        return short_session_ids(conn, ids)
    finally:
        conn.close()


def _one_line(text: str | None, n: int = TITLE_CHARS) -> str:
    t = " ".join((text or "").split())
    return t if len(t) <= n else t[: n - 1] + "…"


@dataclass
class SessionPage:
    """One page of ``session_page``: ``rows`` (``SessionRow``, in list order),
    ``total`` (the sessions that match, sub-agents included: what ``limit`` and
    ``offset`` count too), ``offset`` and ``limit`` (None: all) as asked, ``source``
    (``"duckdb"`` with cost, or ``"sqlite"``)."""

    rows: list[SessionRow]
    total: int
    offset: int
    limit: int | None
    source: str
    empty: int = 0  # the empty sessions that match, left out (``empty=False``)
    #: why DuckDB could not be brought current (``analytics_current.bring_current``'s
    #: note), so the page came from SQLite without cost; None otherwise
    lag: str | None = None


def session_page(
    conn: sqlite3.Connection,
    home: Path | None = None,
    *,
    agents: list[str] | None = None,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    offset: int = 0,
    empty: bool = True,
) -> SessionPage:
    """The sessions that match, newest first, each sub-agent right under its parent:
    ``limit`` rows of that list (None: all) from row ``offset`` on, and the total that
    match. The order, the filters and the page are SQL (``sinks.session_list``); only
    the page's rows are read further (titles, shown ids).

    Args:
        conn: the SQLite store (read-only is enough).
        home: the ctxkeep home; with an ``analytics.duckdb`` in it the rows come from
            DuckDB (with cost), brought current first (``analytics_current.bring_current``),
            else (or when it still lags behind SQLite, or cannot be read) from SQLite.
        agents: only these agents; project: only sessions whose project directory is
            this one or below it (a normalized path); since/until: only sessions active
            at or after ``since`` / that started before ``until`` (stored-``ts`` text,
            ``search.parse.parse_when``); a session without a time is left out by
            either (it cannot be placed in a period).
        empty: list the sessions with no time and no message (summary-only files), or
            (False) leave them out of the rows and ``total`` and count them (``empty``).
    """
    import dataclasses

    from ctxkeep.sinks import session_list as sl

    flt = sl.SessionFilter(tuple(agents or ()), project, since, until, empty)
    page = None
    # DuckDB brought current first (a hook's ingest leaves it behind); when it still
    # lags (the store is busy), SQLite lists the sessions (without cost). Imported here:
    # ``compress --check`` (<= 0.5 s) and ``show --session`` load this module without
    # listing sessions, and ``analytics_current`` brings the store lock (``filelock``),
    # recovery and intents (~0.015-0.03 s of CPU)
    from ctxkeep.sinks import analytics_current

    # (brought current before the file is looked for: a small first ingest leaves
    # DuckDB's first build to its first reader)
    lag = None if home is None else analytics_current.bring_current(Path(home))
    if home is not None and lag is None and (Path(home) / ANALYTICS_DB).exists():
        try:
            page = sl.duckdb_page(Path(home), flt, limit=limit, offset=offset)
        except Exception:  # held by a running ingest, or older than the model: SQLite
            page = None
    if page is None:
        page = sl.sqlite_page(conn, flt, limit=limit, offset=offset)
    raw = page.rows
    duck = page.source == "duckdb"
    # SQLite's first prompts only for the page's sessions DuckDB gave no usable title
    # (all of them on the SQLite path)
    untitled = [r["session_id"] for r in raw if not duck or prompt_text(r["title"]) is None]
    titles = _first_prompts(conn, untitled) if untitled else {}
    # (the empty sessions left out or not: ids unique among the listed ones)
    if limit is None and not offset and dataclasses.replace(flt, empty=True) == sl.SessionFilter():
        # every session of the store: compared with its sorted neighbours in Python
        # (``short_ids``, O(n log n)) rather than looked up id by id
        ids = short_ids(
            [r["session_id"] for r in raw], {r["session_id"]: r["parent_session_id"] for r in raw}
        )
    else:
        ids = short_session_ids(conn, [r["session_id"] for r in raw])
    rows = [
        SessionRow(
            agent=r["agent"],
            session_id=r["session_id"],
            short_id=ids.get(r["session_id"], r["session_id"]),
            parent_session_id=r["parent_session_id"],
            project_dir=r["project_dir"],
            started=_iso(r["started"]),
            ended=_iso(r["ended"]),
            messages=int(r["messages"] or 0),
            tool_calls=int(r["tool_calls"] or 0),
            tokens=None if r["tokens"] is None else int(r["tokens"]),
            token_estimate=int(r["token_estimate"] or 0),
            cost_usd=None if r["cost_usd"] is None else float(r["cost_usd"]),
            cost_logged=int(r["cost_logged"] or 0),
            # DuckDB's first prompt may be a slash-command echo: SQLite's then
            title=_one_line(prompt_text(r["title"]) or titles.get((r["agent"], r["session_id"]))) or None,
            depth=int(r["depth"]),
        )
        for r in raw
    ]
    return SessionPage(rows, page.total, offset, limit, page.source, page.empty, lag)


def list_sessions(
    conn: sqlite3.Connection,
    home: Path | None = None,
    *,
    agents: list[str] | None = None,
    project: str | None = None,
    since: str | None = None,
    until: str | None = None,
) -> tuple[list[SessionRow], str]:
    """Every session that matches (``session_page`` without a limit): ``(rows,
    source)``, the ``SessionRow`` list and ``"duckdb"`` or ``"sqlite"``."""
    p = session_page(conn, home, agents=agents, project=project, since=since, until=until)
    return p.rows, p.source


def _iso(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    from ctxkeep.timeutil import format_utc

    return format_utc(v)


def _first_prompts(conn: sqlite3.Connection, sessions: list[str] | None = None) -> dict[tuple[str, str], str]:
    """The first user prompt (first 400 characters) of every session, or of the
    session ids ``sessions`` only (read by the session index, 500 ids a query)."""
    out: dict[tuple[str, str], str] = {}
    head = (
        "SELECT e.agent, e.session_id, substr(ch.text, 1, 400) FROM entry_rows e "
        "JOIN chunks ch ON ch.content_id = e.content_id AND ch.seq = 0 "
        "WHERE e.kind = 'message' AND e.role = 'user' "
    )
    queries: list[tuple[str, tuple[str, ...]]]
    if sessions is None:
        queries = [(head + "ORDER BY e.ts, e.rowid", ())]
    else:
        ids = sorted(set(sessions))
        queries = [
            (head + f"AND e.session_id IN ({','.join('?' * len(part))}) ORDER BY e.ts, e.rowid", tuple(part))
            for part in (ids[i : i + 500] for i in range(0, len(ids), 500))
        ]
    for sql, args in queries:
        for agent, sid, text in conn.execute(sql, args):
            if (agent, sid) not in out and (typed := prompt_text(text)):
                out[(agent, sid)] = typed
    return out


# ---------------------------------------------------------------- one conversation


@dataclass
class Turn:
    """One line of a conversation: ``entry_id``, ``ts`` (ISO-8601 UTC), ``role``,
    ``kind`` (``message``, ``tool_call``, ``thinking``, ``summary``, ``compaction``,
    ``tool_result`` for a result without its call), ``tool_name``, ``text`` (the whole
    message; for a tool call its arguments on one line), and for a tool call its
    result's ``result_bytes`` (UTF-8 bytes), ``result_error`` flag and
    ``result_entry_id``; ``tokens`` estimates ``text``; ``session_id`` (a sub-agent's
    turns carry their own)."""

    entry_id: str
    session_id: str
    ts: str | None
    role: str
    kind: str
    tool_name: str | None
    text: str
    tokens: int
    result_bytes: int | None = None
    result_error: bool | None = None
    result_entry_id: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


#: a thinking turn with nothing to read (Codex's encrypted reasoning: no text, no tokens;
#: ``service.conversation_core.EMPTY_THINKING`` names it for the front ends)
EMPTY_THINKING = "(thinking, ~0 tokens)"


@dataclass
class Conversation:
    """A session's ``turns`` in order (``conversation``), with the session's
    ``agent``, ``session_id``, ``project_dir``; ``omitted`` turns (``omitted_tokens``)
    that a budget left out (the oldest, after the first prompt) and a ``note``."""

    agent: str
    session_id: str
    project_dir: str | None
    turns: list[Turn] = field(default_factory=list)
    omitted: int = 0
    omitted_tokens: int = 0
    note: str = ""

    def as_dict(self) -> dict:
        return {
            **{k: v for k, v in asdict(self).items() if k != "turns"},
            "turns": [t.as_dict() for t in self.turns],
        }


#: records that mark where an agent's context was compacted: Claude Code's ``system``
#: ``compact_boundary`` line (v1.0.x–2.1) and its ``isCompactSummary`` user message,
#: Codex's ``compacted`` line (0.4x+) (both stored as kind ``summary``)
def is_compaction(agent: str, role: str, kind: str, tool_name: str | None) -> bool:
    if kind == "meta" and tool_name == "compact_boundary":
        return True
    return kind == "summary" and (role == "user" or (agent == "codex" and role == "system"))


def error_flag(text: str | None) -> bool:
    """True when a stored tool result says it failed: the sources' ``[error]`` prefix
    (Claude Code ``is_error``, Gemini CLI, Copilot CLI, Cline family), or a non-zero
    ``Exit code:``/``exit code`` line (Codex 0.5x+ writes one at the head of a shell
    output; older rollouts kept it only in metadata, which is not stored)."""
    if not text:
        return False
    if text.startswith("[error]"):
        return True
    return bool(_EXIT_RE.search(text[:400]))


_EXIT_RE = re.compile(r"(?im)^(?:Exit code|Process exited with code|exit status)[: ]\s*([1-9]\d*)\b")


def session_rows(conn: sqlite3.Connection, session_id: str, *, subagents: bool = True) -> list[tuple]:
    """The stored rows of a session (and, with ``subagents``, of the sessions whose
    parent it is) in transcript order: ``(entry_id, agent, session_id, project_dir, ts,
    role, kind, tool_name, content_hash, text_bytes, token_estimate, native_id)``;
    rewound entries are left out."""
    where = "session_id = ?" + (" OR parent_session_id = ?" if subagents else "")
    args = (session_id, session_id) if subagents else (session_id,)
    return conn.execute(
        "SELECT entry_id, agent, session_id, project_dir, ts, role, kind, tool_name, content_hash, "
        f"text_bytes, token_estimate, native_id FROM entries WHERE ({where}) AND status IS NOT 'rewound' "
        "ORDER BY session_id <> ?, ts, source_path, source_offset, rowid",
        (*args, session_id),
    ).fetchall()


def _head(conn: sqlite3.Connection, content_hash: str | None, n: int = 400) -> str:
    if not content_hash:
        return ""
    r = conn.execute(
        "SELECT substr(ch.text, 1, ?) FROM chunks ch JOIN contents c ON c.content_id = ch.content_id "
        "WHERE c.content_hash = ? AND ch.seq = 0",
        (n, content_hash),
    ).fetchone()
    return r[0] if r else ""


#: ``Conversation.note`` of a session holding only meta records
META_ONLY_NOTE = (
    "this session holds only records, no conversation (for Aider's aider-input:<hash>, the "
    "prompts typed, kept by its .aider.input.history; each is also in the chat session of that time)"
)


def conversation(
    conn: sqlite3.Connection, session_ref: str, *, budget: int | None = None, subagents: bool = False
) -> Conversation:
    """One session's conversation in order: user and assistant messages whole, each
    tool call folded to one line with its result's size and error flag, thinking as
    one line, compaction boundaries marked; meta records left out, except in a session
    holding nothing else (Aider's input history ``aider-input:<hash>``,
    ``sources.aider``; a Claude Code session of ``file-history-snapshot`` records
    only): then its records, one line each (kind ``meta``), and ``META_ONLY_NOTE``.

    ``session_ref`` is a session id or a unique prefix (``resolve_session``).
    ``budget`` (tokens, None: all) keeps the first prompt and then the newest turns that
    fit; a message longer than half the budget is cut (head and tail, with the
    ``ctxkeep show ID`` call that returns it whole). Raises UsageError for an unknown
    or ambiguous session."""
    from ctxkeep.query.fetch import cut_text

    sid = resolve_session(conn, session_ref)
    rows = session_rows(conn, sid, subagents=subagents)
    results = {}
    for r in rows:
        if r[6] == "tool_result" and r[11]:
            results[(r[2], r[11])] = r
    turns: list[Turn] = []
    used_results = set()
    for eid, agent, s, _proj, ts, role, kind, tool, chash, nbytes, tok, native in rows:
        if is_compaction(agent, role, kind, tool):
            size = nbytes or 0
            turns.append(
                Turn(
                    eid,
                    s,
                    ts,
                    role,
                    "compaction",
                    tool,
                    f"── context compacted here ({size:,} bytes of summary) ──",
                    12,
                )
            )
        elif kind == "message" and role in ("user", "assistant"):
            text = content_text(conn, chash) if chash else ""
            turns.append(Turn(eid, s, ts, role, kind, None, text or "", tok or heuristic_tokens(text or "")))
        elif kind == "tool_call":
            args = _one_line(_head(conn, chash, 600), 200)
            res = results.get((s, native)) if native else None
            t = Turn(eid, s, ts, role, kind, tool, args, heuristic_tokens(args) + 12)
            if res is not None:
                used_results.add(res[0])
                t.result_entry_id = res[0]
                t.result_bytes = res[9] or 0
                t.result_error = error_flag(_head(conn, res[8]))
            turns.append(t)
        elif kind == "thinking":
            text = EMPTY_THINKING if not tok else f"(thinking, ~{tok:,} tokens)"
            turns.append(Turn(eid, s, ts, role, kind, None, text, 8))
        elif kind == "summary":
            text = _one_line(_head(conn, chash), 200)
            turns.append(Turn(eid, s, ts, role, kind, tool, text, heuristic_tokens(text)))
    meta_only = not turns and any(r[6] == "meta" for r in rows)
    if meta_only:  # a session of records only: list them (else ``show`` prints a bare header)
        for r in rows:
            if r[6] == "meta":
                text = _one_line(_head(conn, r[8]), 200)
                turns.append(Turn(r[0], r[2], r[4], r[5], "meta", r[7], text, heuristic_tokens(text)))
    for r in rows:  # results whose call is not stored (a cut transcript)
        if r[6] == "tool_result" and r[0] not in used_results:
            text = _one_line(_head(conn, r[8]), 120)
            turns.append(Turn(r[0], r[2], r[4], r[5], "tool_result", r[7], text, heuristic_tokens(text)))
    if any(t.kind == "tool_result" for t in turns):
        turns.sort(key=lambda t: (t.session_id != sid, t.ts or ""))
    first = rows[0] if rows else None
    # the session's own rows first: a summary or snapshot record names no project
    project = next((r[3] for r in rows if r[2] == sid and r[3]), None) or next(
        (r[3] for r in rows if r[3]), None
    )
    conv = Conversation(first[1] if first else "", sid, project, turns)
    if meta_only:
        conv.note = META_ONLY_NOTE
    if budget is not None:
        _fit(conv, budget, cut_text)
    return conv


def _fit(conv: Conversation, budget: int, cut_text) -> None:
    """Keep the first user prompt and the newest turns within ``budget`` tokens."""
    turns = conv.turns
    cap = max(budget // 2, 50)
    whole = [t.tokens for t in turns]  # before any cut: what a dropped turn leaves out
    for t in turns:  # one long message never takes the whole budget
        if t.kind == "message" and t.tokens > cap:
            bpt = max(len(t.text.encode()) / max(t.tokens, 1), 1.0)
            t.text = cut_text(t.text, t.entry_id, int(cap * bpt)).text
            t.tokens = heuristic_tokens(t.text)
    first = next((i for i, t in enumerate(turns) if t.role == "user" and t.kind == "message"), None)
    keep = set()
    left = budget
    if first is not None and turns[first].tokens <= left:
        keep.add(first)
        left -= turns[first].tokens
    for i in range(len(turns) - 1, -1, -1):
        if i in keep:
            continue
        if turns[i].tokens > left:
            break
        keep.add(i)
        left -= turns[i].tokens
    dropped = [t for i, t in enumerate(turns) if i not in keep]
    conv.turns = [t for i, t in enumerate(turns) if i in keep]
    conv.omitted = len(dropped)
    # a dropped turn leaves out its whole text, not the cut it was given above
    # (newuser23 17: a 394,369-token message was counted as its ~150-token cut)
    conv.omitted_tokens = sum(whole[i] for i in range(len(turns)) if i not in keep)
    if dropped:
        conv.note = (
            f"budget of {budget} tokens: {len(dropped)} older turns (~{conv.omitted_tokens:,} tokens) left out; "
            f"`ctxkeep show --session {conv.session_id}` without --budget prints them"
        )
