"""Resume snapshots (``ctxkeep resume``, MCP ``ctx_resume``, the agents' SessionStart
hook): what an agent needs to go on with a session, from the stored transcript of any
agent, within a token budget.

Sections, filled in priority order until the budget is spent (each item whole or not
at all; a section's first item before any section's second):

1. ``prompts``: the first user prompts and the last few;
2. ``tasks``: the last state of the session's plan: Claude Code ``TodoWrite``
   (``{"todos": [{content, status}]}``) or its ``TaskCreate``/``TaskUpdate`` tools
   (v2.1: ``{"subject"}``, then ``{"taskId", "status"}``, ids counted from 1 in
   creation order), Codex ``update_plan`` (``{"plan": [{step, status}]}``), Gemini CLI
   ``write_todos`` (``{"todos": [{description, status}]}``);
3. ``files``: files created, edited and read, with counts: Claude Code
   Write/Edit/MultiEdit/NotebookEdit/Read, Codex ``apply_patch`` (as a tool or inside a
   shell command: ``*** Add|Update|Delete File:``), Gemini CLI write_file/replace/
   read_file, and shell commands that write (``>``, ``>>``, ``tee``, ``sed -i``,
   ``touch``) or read (``cat``, ``sed -n``, ``head``, ``tail``, ``nl``);
4. ``failure``: the last failing tool call and the tail of its error
   (``sessions.error_flag``; a call the user rejected is their decision, no failure:
   ``is_rejection``);
5. ``constraints``: sentences of the user's prompts that state a rule ("don't",
   "must", "always", "never", …), verbatim;
6. ``fetch``: the entry ids and the exact ``ctxkeep show`` / ``ctx_fetch`` calls that
   return more (always included).

The snapshot is the same whichever agent resumes it; sub-agent sessions count toward
their parent's files, tasks and failures (their prompts were written by the parent
agent, so they are not the user's prompts). Tokens are ``heuristic_tokens`` estimates.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import asdict, dataclass, field

from ctxkeep.errors import NotFound, UsageError
from ctxkeep.paths import under_sql
from ctxkeep.query.sessions import error_flag, prompt_text, resolve_session, session_rows
from ctxkeep.sinks.sqlite import content_text
from ctxkeep.transforms.tokens import heuristic_tokens

FIRST_PROMPTS = 2
LAST_PROMPTS = 3
PROMPT_CHARS = 600
ERROR_LINES = 12
MAX_CONSTRAINTS = 12

#: a sentence (or its clause after a colon) that opens with an instruction ("Don't
#: touch…", "Please always…", "To be clear: don't use…")
_RULE_OPEN_RE = re.compile(
    r"(?:^|[:;]\s+)(?:please\s+|and\s+|also\s+|but\s+|so\s+)*(?:don'?t|do not|never|always|make sure|ensure|avoid|only|"
    r"keep|stop|no need to|must|use|prefer)\b",
    re.I,
)
#: an obligation said of someone or something ("you must not…", "the tests should…")
_RULE_SAID_RE = re.compile(
    r"\b(?:you|we|it|this|that|they|code|tests?|\w+s)\s+(?:must|should|shall|need to|have to)(?:n'?t|\s+not)?\b"
    r"|\b(?:must not|mustn'?t|never|always)\b",
    re.I,
)
#: what only reports a thought or doubt ("I don't think…", "I'm not sure…", "I wonder…")
_REMARK_RE = re.compile(
    r"\bI(?:'m| am)?\s+(?:don'?t|do not|didn'?t)?\s*(?:think|guess|believe|know|wonder|suppose|remember|"
    r"see|understand|not sure|wondering)\b|\b(?:maybe|perhaps|I think|not sure)\b",
    re.I,
)
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_PATCH_RE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", re.M)
_MOVE_RE = re.compile(r"^\*\*\* Move to: (.+?)\s*$", re.M)
_WRITE_RE = re.compile(r"(?:^|[\s;&|])(?:>>?|tee(?:\s+-a)?)\s*([^\s;&|<>'\"()]+)")
_SED_I_RE = re.compile(r"\bsed\s+-i\S*\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+([^\s;&|<>]+)")
_TOUCH_RE = re.compile(r"\btouch\s+([^\s;&|<>]+)")
_READ_RE = re.compile(
    r"(?:^|[\s;&|(])(?:cat|head|tail|nl|less|wc)\s+(?:-\S+\s+)*([^\s;&|<>'\"()-][^\s;&|<>'\"()]*)"
    r"|\bsed\s+-n\s+(?:'[^']*'|\"[^\"]*\"|\S+)\s+([^\s;&|<>]+)"
)
_EDIT_TOOLS = {"Edit": "edited", "MultiEdit": "edited", "NotebookEdit": "edited", "replace": "edited"}
_WRITE_TOOLS = {"Write": "written", "write_file": "written"}
_READ_TOOLS = {"Read": "read", "read_file": "read", "read_many_files": "read"}
_SHELL_TOOLS = {"Bash", "shell", "local_shell_call", "run_shell_command", "exec_command", "shell_command"}
_OPEN = ("pending", "in_progress", "in-progress", "open", "todo", "not_started")


@dataclass
class Item:
    """One line of a snapshot section: its ``text`` and the ``entry_id`` it came
    from (None for a summary line)."""

    text: str
    entry_id: str | None = None
    #: where the item stands in the session (a prompt's number, 0-based): a section kept
    #: in priority order is shown in this order (newuser21 M6); not in ``as_dict``
    at: int | None = None
    #: what ``text`` says, as fields (``FIELDS``: a script reads these, not the Markdown;
    #: newuser21 M6)
    fields: dict = field(default_factory=dict)


#: the ``fields`` of each section's items (``Item.fields``), by section
FIELDS = {
    "summary": "summary (the agent's own, clipped to 600 characters)",
    "prompts": "number (1-based), of (the session's prompts), prompt (clipped to 600 characters)",
    "tasks": "the first item: open, tasks (counts), tool (the plan tool); then task, status (null: none)",
    "files": "the first item: changed, only_read (counts); then path (relative to the project), "
    "actions (created/written/edited/deleted/read → times); a last one: more_files (left out)",
    "failure": "tool, call (its arguments, clipped), at (the result's time, ISO-8601 UTC), error "
    "(the result's last lines)",
    "constraints": "rule (the user's sentence, verbatim)",
    "fetch": "fetch (conversation, entries, search), command (the CLI's; null: none), ids (entries), "
    "mcp (the MCP tool → its arguments; null: none)",
}


@dataclass
class Snapshot:
    """A resume snapshot (``build_snapshot``): the session (``agent``,
    ``session_id``, ``project_dir``, ``started``/``ended`` ISO-8601 UTC), the
    ``sections`` kept (name → items, in priority order: summary, prompts, tasks,
    files, failure, constraints, fetch), ``budget`` and estimated ``tokens`` (of the Markdown
    rendering), and what the budget left out (``omitted``: section → item count;
    ``note``: the same in words, as search's budget note)."""

    agent: str
    session_id: str
    project_dir: str | None
    started: str | None
    ended: str | None
    budget: int
    sections: dict[str, list[Item]] = field(default_factory=dict)
    omitted: dict[str, int] = field(default_factory=dict)
    tokens: int = 0
    #: what the budget left out, in words (``omitted_note``; None: nothing)
    note: str | None = None

    def to_markdown(self) -> str:
        """The snapshot as Markdown (what an agent gets in its context)."""
        return _render(self, self.sections)

    def as_dict(self) -> dict:
        """The snapshot as a JSON-ready dict (sections: lists of ``{text, entry_id,
        fields}``: ``text`` the Markdown line, ``fields`` what it says, ``FIELDS``)."""
        d = asdict(self)
        for items in d["sections"].values():
            for i in items:
                i.pop("at", None)
        d["markdown"] = self.to_markdown()
        return d

    def to_json(self) -> str:
        """``as_dict`` as a JSON string."""
        return json.dumps(self.as_dict(), ensure_ascii=False, indent=2)


_TITLES = {
    "summary": "The agent's summary",
    "prompts": "What the user asked",
    "tasks": "Plan (last state)",
    "files": "Files",
    "failure": "Last failure",
    "constraints": "The user's rules (verbatim)",
    "fetch": "Fetch more",
}


def _render(s: Snapshot, sections: dict[str, list[Item]]) -> str:
    # only what is known (newuser20 F14: a summary-only file has no project or time,
    # and the line read "project ?; ? → ? UTC")
    facts = [f"project {s.project_dir}"] if s.project_dir else []
    if s.started:
        facts.append(f"{s.started[:16]} → {(s.ended or s.started)[:16]} UTC")
    head = f"# Resume: {s.agent} session {s.session_id}" + ("\n" + "; ".join(facts) if facts else "")
    parts = [head]
    for name, items in sections.items():
        if items:
            parts.append(f"## {_TITLES[name]}\n" + "\n".join(i.text for i in items))
    return "\n\n".join(parts) + "\n"


def latest_session(
    conn: sqlite3.Connection, project_dir: str | None, *, agent: str | None = None, exact: bool = False
) -> str:
    """The session (not a sub-agent) with the newest entry, under ``project_dir`` (or
    anywhere when None), of ``agent`` when given (an agent name, e.g. ``claude-code``).
    ``exact``: the session's project is ``project_dir`` itself, not a directory below it
    (what an agent's hook wants: ``/tmp`` is not the project of a ``/tmp/repo`` session).
    Raises NotFound (a UsageError) when there is none."""
    where, args = "parent_session_id IS NULL AND agent <> 'note'", []
    if agent:
        where += " AND agent = ?"
        args.append(agent)
    if project_dir:  # by project id (v10): no lookup per entry
        sql, pargs = ("project_dir = ?", [project_dir]) if exact else under_sql("project_dir", project_dir)
        where += f" AND project_id IN (SELECT project_id FROM projects WHERE {sql})"
        args += pargs
    r = conn.execute(
        f"SELECT session_id FROM entry_rows WHERE {where} AND ts IS NOT NULL ORDER BY ts DESC LIMIT 1", args
    ).fetchone()
    if not r:
        of = f" of {agent}" if agent else ""
        # an ingest helps only an empty store: else no session's project is this folder
        # (a new user ran `resume` in a folder of no session and was told to ingest)
        empty = conn.execute("SELECT 1 FROM entry_rows WHERE agent <> 'note' LIMIT 1").fetchone() is None
        raise NotFound(
            f"no {'stored ' if empty else ''}session{of}{' of project ' + project_dir if project_dir else ''}",
            where="project",
            hint="run `ctxkeep ingest`" if empty else "name one (`ctxkeep sessions` lists them)",
        )
    return r[0]


def build_snapshot(
    conn: sqlite3.Connection,
    session_id: str | None = None,
    *,
    project_dir=None,
    budget: int = 1500,
    entry_ids: list[str] | None = None,
) -> Snapshot:
    """The resume snapshot of a session within ``budget`` tokens.

    Args:
        conn: the SQLite store (read-only is enough).
        session_id: a session id or unique prefix; None: the latest session of
            ``project_dir`` (``latest_session``), or of the session of ``entry_ids``.
        project_dir: a normalized project directory (for the default session).
        budget: tokens for the whole Markdown rendering (at least 100).
        entry_ids: only these entries count (e.g. what compress cut from a file);
            their session is the snapshot's session.
    Returns a ``Snapshot``. Raises UsageError for an unknown session or a budget
    below 100.
    """
    if budget < 100:
        raise UsageError(
            f"budget {budget} is too small for a snapshot", where="budget", hint="use 100 or more"
        )
    only = set(entry_ids) if entry_ids else None
    if session_id:
        sid = resolve_session(conn, session_id)
    elif only:
        r = conn.execute(
            "SELECT coalesce(parent_session_id, session_id) FROM entries WHERE entry_id = ?",
            (next(iter(only)),),
        ).fetchone()
        if not r:
            raise NotFound("the entries are not stored", where="ids")
        sid = r[0]
    else:
        sid = latest_session(conn, project_dir)
    rows = session_rows(conn, sid, subagents=True)
    if only is not None:
        rows = [r for r in rows if r[0] in only]
    own = [r for r in rows if r[2] == sid]
    base = own or rows
    snap = Snapshot(
        agent=base[0][1] if base else "",
        session_id=sid,
        project_dir=next((r[3] for r in base if r[3]), None),
        started=min((r[4] for r in rows if r[4]), default=None),
        ended=max((r[4] for r in rows if r[4]), default=None),
        budget=budget,
    )
    texts = _Texts(conn)
    cands = {
        "summary": _summary(own, texts),
        "prompts": _prompts(own, texts),
        "tasks": _tasks(rows, texts),
        "files": _files(rows, texts, snap.project_dir),
        "failure": _failure(rows, texts),
        "constraints": _constraints(own, texts),
    }
    _fill(snap, cands)
    return snap


class _Texts:
    """Stored texts by content hash, read once."""

    def __init__(self, conn):
        self.conn, self.cache = conn, {}

    def __call__(self, chash: str | None) -> str:
        if not chash:
            return ""
        if chash not in self.cache:
            self.cache[chash] = content_text(self.conn, chash) or ""
        return self.cache[chash]


def _clip(text: str, n: int) -> str:
    t = text.strip()
    return t if len(t) <= n else t[: n - 1].rstrip() + "…"


def _quote(text: str, n: int = PROMPT_CHARS) -> str:
    return "> " + _clip(text, n).replace("\n", "\n> ")


def _summary(rows, texts) -> list[Item]:
    """The session's last summary the agent wrote itself (Claude Code's ``summary``
    lines and ``away_summary`` records: kind ``summary``, ``sources.claude_code``):
    often all a compacted or summary-only session file holds (newuser20 F14)."""
    last = next((r for r in reversed(rows) if r[6] == "summary" and texts(r[8]).strip()), None)
    if last is None:
        return []
    return [Item(_quote(texts(last[8])), last[0], fields={"summary": _clip(texts(last[8]), PROMPT_CHARS)})]


def _prompts(rows, texts) -> list[Item]:
    ps = [(r[0], texts(r[8])) for r in rows if r[5] == "user" and r[6] == "message"]
    ps = [(e, typed) for e, t in ps if (typed := prompt_text(t))]
    if not ps:
        return []
    n = len(ps)
    firsts = list(range(min(FIRST_PROMPTS, n)))
    lasts = [i for i in range(max(n - LAST_PROMPTS, 0), n) if i not in firsts]
    out = []
    order = ([firsts[0]] if firsts else []) + ([lasts[-1]] if lasts else []) + firsts[1:] + lasts[:-1][::-1]
    for i in order:  # priority: first prompt, last prompt, then the others
        label = "first prompt" if i == 0 else ("last prompt" if i == n - 1 else f"prompt {i + 1} of {n}")
        out.append(
            Item(
                f"- {label} (entry {ps[i][0][:12]}):\n{_quote(ps[i][1])}",
                ps[i][0],
                at=i,
                fields={"number": i + 1, "of": n, "prompt": _clip(ps[i][1], PROMPT_CHARS)},
            )
        )
    return out


def _args(text: str) -> dict:
    try:
        v = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return {}
    return v if isinstance(v, dict) else {}


def _tasks(rows, texts) -> list[Item]:
    """The last plan state, open tasks first."""
    state: list[tuple[str, str]] | None = None
    src = eid = None
    created: list[list[str]] = []  # Claude Code TaskCreate/TaskUpdate: [subject, status]
    for r in rows:
        if r[6] != "tool_call" or r[7] not in (
            "TodoWrite",
            "update_plan",
            "write_todos",
            "TaskCreate",
            "TaskUpdate",
        ):
            continue
        a = _args(texts(r[8]))
        tool = r[7]
        if tool == "TodoWrite" and isinstance(a.get("todos"), list):
            state = [
                (str(t.get("content") or ""), str(t.get("status") or ""))
                for t in a["todos"]
                if isinstance(t, dict)
            ]
        elif tool == "write_todos" and isinstance(a.get("todos"), list):
            state = [
                (str(t.get("description") or t.get("content") or ""), str(t.get("status") or ""))
                for t in a["todos"]
                if isinstance(t, dict)
            ]
        elif tool == "update_plan" and isinstance(a.get("plan"), list):
            state = [
                (str(t.get("step") or ""), str(t.get("status") or ""))
                for t in a["plan"]
                if isinstance(t, dict)
            ]
        elif tool == "TaskCreate":
            created.append([str(a.get("subject") or a.get("description") or ""), "pending"])
            state = [(s, st) for s, st in created]
        elif tool == "TaskUpdate":
            try:
                k = int(str(a.get("taskId"))) - 1
            except ValueError:
                continue
            if 0 <= k < len(created) and a.get("status"):
                created[k][1] = str(a["status"])
            state = [(s, st) for s, st in created]
        else:
            continue
        src, eid = tool, r[0]
    if not state:
        return []
    assert eid is not None  # set with state
    open_ = [(s, st) for s, st in state if st.lower() in _OPEN]
    done = [(s, st) for s, st in state if st.lower() not in _OPEN]
    mark = {"in_progress": "[~]", "in-progress": "[~]", "completed": "[x]", "done": "[x]"}
    out = [
        Item(
            f"{len(open_)} open of {len(state)} tasks (from {src}, entry {eid[:12]})"
            + ("" if open_ else ": every task is done"),
            eid,
            fields={"open": len(open_), "tasks": len(state), "tool": src},
        )
    ]
    for s, st in open_ + done:
        out.append(
            Item(
                f"- {mark.get(st.lower(), '[ ]')} {_clip(s, 160)} ({st or 'no status'})",
                eid,
                fields={"task": _clip(s, 160), "status": st or None},
            )
        )
    return out


def _rel(path: str, project: str | None) -> str:
    p = path.strip().strip("'\"")
    if project and p.startswith(project.rstrip("/") + "/"):
        return p[len(project.rstrip("/")) + 1 :]
    return p


def _files(rows, texts, project) -> list[Item]:
    counts: dict[str, dict[str, int]] = {}

    def add(path, what, shell=False):
        path = path.strip().strip("'\"")
        if not path or path in ("/dev/null", "&1", "&2"):
            return
        if shell and (path.startswith("-") or "*" in path or not ("/" in path or "." in path)):
            return  # a flag, a glob or a bare word, not a file
        c = counts.setdefault(_rel(path, project), {})
        c[what] = c.get(what, 0) + 1

    for r in rows:
        if r[6] != "tool_call":
            continue
        tool, text = r[7], texts(r[8])
        a = _args(text) if text.startswith("{") else {}
        path = a.get("file_path") or a.get("path") or a.get("notebook_path") or a.get("absolute_path")
        if tool in _EDIT_TOOLS and path:
            add(str(path), "edited")
        elif tool in _WRITE_TOOLS and path:
            add(str(path), "written")
        elif tool in _READ_TOOLS and path:
            add(str(path), "read")
        if "*** Begin Patch" in text:
            for m in _PATCH_RE.finditer(text):
                add(m.group(2), {"Add": "created", "Update": "edited", "Delete": "deleted"}[m.group(1)])
            for m in _MOVE_RE.finditer(text):
                add(m.group(1), "created")
        elif tool in _SHELL_TOOLS:
            cmd = str(a.get("command") or text) if a else text
            cmd = cmd.split("\n{", 1)[0]
            for rx in (_WRITE_RE, _SED_I_RE, _TOUCH_RE):
                for m in rx.finditer(cmd):
                    add(m.group(1), "written", shell=True)
            for m in _READ_RE.finditer(cmd):
                add(m.group(1) or m.group(2), "read", shell=True)
    if not counts:
        return []

    def weight(kv):
        c = kv[1]
        return (-(sum(c.values()) - c.get("read", 0)), -c.get("read", 0), kv[0])

    ranked = sorted(counts.items(), key=weight)
    changed = sum(1 for _, c in ranked if set(c) - {"read"})
    only = len(ranked) - changed
    out = [
        Item(
            f"{changed} file{'' if changed == 1 else 's'} changed, {only} only read (most changed first)",
            fields={"changed": changed, "only_read": only},
        )
    ]
    for path, c in ranked:
        what = ", ".join(
            f"{k} {n}×" if n > 1 else k for k, n in sorted(c.items(), key=lambda x: _ORDER.index(x[0]))
        )
        out.append(Item(f"- `{path}`: {what}", fields={"path": path, "actions": dict(c)}))
    return out


_ORDER = ["created", "written", "edited", "deleted", "read"]


#: how a tool result says the user turned the call down at the permission prompt (Claude
#: Code writes it as an ``is_error`` result: "The user doesn't want to proceed with this
#: tool use. The tool use was rejected …", read in the corpus' 0d3a8e6f and small.jsonl)
_REJECTED_RE = re.compile(r"^\[error\]\s*The user doesn't want to proceed with this tool use")


def is_rejection(text: str | None) -> bool:
    """Whether an error-flagged tool result is the user's rejection of the call (their
    decision, not a failure of the agent: ``_REJECTED_RE``)."""
    return bool(text) and bool(_REJECTED_RE.match(text))  # type: ignore[arg-type]


def _failure(rows, texts) -> list[Item]:
    """The last failing tool call and its error's tail; a call the user rejected is no
    failure and is passed over (newuser23 F13)."""
    calls = {(r[2], r[11]): r for r in rows if r[6] == "tool_call" and r[11]}
    for r in reversed(rows):
        if r[6] != "tool_result":
            continue
        text = texts(r[8])
        if not error_flag(text) or is_rejection(text):
            continue
        call = calls.get((r[2], r[11]))
        what = _clip(" ".join(texts(call[8]).split()), 300) if call else "(call not stored)"
        tail = "\n".join(text.strip().splitlines()[-ERROR_LINES:])
        return [
            Item(
                f"`{call[7] if call else '?'}` {what}\n(result entry {r[0][:12]}, {r[4] or '?'})\n"
                "```\n" + _clip(tail, 1200) + "\n```",
                r[0],
                fields={
                    "tool": call[7] if call else None,
                    "call": what if call else None,
                    "at": r[4],
                    "error": _clip(tail, 1200),
                },
            )
        ]
    return []


def is_rule(sentence: str) -> bool:
    """Whether a sentence of a user's prompt states a rule for the agent: it opens with
    an instruction (``Don't…``, ``Always…``, ``Only…``, ``Make sure…``) or says what
    someone or something must, should or never does (``the tests must pass``); a
    question (``…should match the filters?``) or a reported thought (``I don't think we
    need…``, ``maybe…``) is a remark, not a rule (a new user's question was listed as
    one: any "don't", "only" or "should" counted)."""
    s = sentence.strip()
    if s.endswith("?") or _REMARK_RE.search(s):
        return False
    return bool(_RULE_OPEN_RE.search(s) or _RULE_SAID_RE.search(s))


def _constraints(rows, texts) -> list[Item]:
    seen, out = set(), []
    for r in rows:
        if r[5] != "user" or r[6] != "message":
            continue
        t = prompt_text(texts(r[8]))
        if not t:
            continue
        for s in _SENTENCE_RE.split(t):
            s = s.strip(" -*>\t")
            if 8 <= len(s) <= 300 and is_rule(s) and s.lower() not in seen:
                seen.add(s.lower())
                out.append(Item(f'- "{s}" (entry {r[0][:12]})', r[0], fields={"rule": s}))
    return out[-MAX_CONSTRAINTS:][::-1]  # the latest rules first


def _fetch(snap: Snapshot, kept: dict[str, list[Item]]) -> list[Item]:
    ids = []
    for items in kept.values():
        for i in items:
            if i.entry_id and i.entry_id not in ids:
                ids.append(i.entry_id)
    sid = snap.session_id
    whole = f"ctxkeep show --session {sid}"
    out = [
        Item(
            f"- the whole conversation: `{whole}` (add `--budget N`)",
            fields={"fetch": "conversation", "command": whole, "mcp": None},
        )
    ]
    if ids:  # every entry quoted above (newuser21 M6: only the first 4 were named)
        show = f"ctxkeep show {' '.join(i[:12] for i in ids)}"
        out.append(
            Item(
                f"- the entries above in full: `{show}` or ctx_fetch {json.dumps({'ids': ids})}",
                fields={"fetch": "entries", "command": show, "ids": ids, "mcp": {"ctx_fetch": {"ids": ids}}},
            )
        )
    out.append(
        Item(
            f'- search this session: ctx_search {{"queries": ["…"], "filters": {{"session": "{sid}"}}}}',
            fields={"fetch": "search", "command": None, "mcp": {"ctx_search": {"filters": {"session": sid}}}},
        )
    )
    return out


def _fill(snap: Snapshot, cands: dict[str, list[Item]]) -> None:
    """Keep items within the budget: round 1 takes each section's first item (the
    tasks and files sections: their header and first line), round 2 the rest, each in
    priority order; the fetch section is always there."""
    kept: dict[str, list[Item]] = {k: [] for k in cands}
    lead = {"tasks": 2, "files": 2}

    def cost(sections) -> int:
        full = dict(sections)
        full["fetch"] = _fetch(snap, sections)
        return heuristic_tokens(_render(snap, full))

    for rnd in (1, 2):
        for name, items in cands.items():
            start = len(kept[name])
            stop = lead.get(name, 1) if rnd == 1 else len(items)
            for it in items[start:stop]:
                kept[name].append(it)
                if cost(kept) > snap.budget:
                    kept[name].pop()
                    if rnd == 1 or name != "files":
                        break
    for name, items in cands.items():
        if len(items) > len(kept[name]):
            snap.omitted[name] = len(items) - len(kept[name])
    if snap.omitted.get("files") and kept["files"]:
        more = Item(
            f"- … {snap.omitted['files']} more files (`ctxkeep resume {snap.session_id} --budget 4000`)",
            fields={"more_files": snap.omitted["files"]},
        )
        kept["files"].append(more)
        while kept["files"] and cost(kept) > snap.budget:  # the summary line must fit too
            kept["files"].pop(-2 if len(kept["files"]) > 2 else -1)
            snap.omitted["files"] = len(cands["files"]) - max(len(kept["files"]) - 1, 0)
            more.text = (
                f"- … {snap.omitted['files']} more files (`ctxkeep resume {snap.session_id} --budget 4000`)"
            )
            more.fields = {"more_files": snap.omitted["files"]}
    for name in kept:  # kept by priority, shown in the session's order (newuser21 M6)
        if all(i.at is not None for i in kept[name]):
            kept[name].sort(key=lambda i: i.at or 0)
    kept["fetch"] = _fetch(snap, kept)
    snap.sections = {k: v for k, v in kept.items() if v}
    snap.tokens = heuristic_tokens(snap.to_markdown())
    snap.note = omitted_note(snap)


#: how ``omitted_note`` names one left-out item of each section (singular, plural)
_ITEM_WORDS = {
    "prompts": ("prompt", "prompts"),
    "tasks": ("plan line", "plan lines"),
    "files": ("file", "files"),
    "failure": ("failure line", "failure lines"),
    "constraints": ("rule of the user", "rules of the user"),
}


def omitted_note(snap: Snapshot) -> str | None:
    """What the budget left out of ``snap`` in one line (None when nothing was), e.g.
    "the 1,500-token budget left out 3 prompts and 12 files: `ctxkeep resume 0d3a
    --budget 6000` shows more" (the budget offered is 4x, at least 4,000). Before, only
    the files section said it was cut (newuser15)."""
    parts = [f"{n:,} {_ITEM_WORDS[k][n != 1]}" for k, n in snap.omitted.items() if n and k in _ITEM_WORDS]
    if not parts:
        return None
    what = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    more = max(4000, snap.budget * 4)
    return (
        f"the {snap.budget:,}-token budget left out {what}: "
        f"`ctxkeep resume {snap.session_id} --budget {more}` shows more"
    )
