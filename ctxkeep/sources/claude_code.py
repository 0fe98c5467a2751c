"""Claude Code sessions.

Where (Claude Code 1.x–2.1): ``$CLAUDE_CONFIG_DIR`` (comma-separated list allowed) or
``~/.claude`` and ``~/.config/claude``, each with ``projects/<encoded cwd>/<session>.jsonl``;
sub-agent transcripts as ``projects/<dir>/<session>/subagents/agent-<id>.jsonl``
(v2.1) or flat ``projects/<dir>/agent-<id>.jsonl`` (v2.0); the sub-agents of a
workflow run (the Workflow tool, v2.1.x) as
``projects/<dir>/<session>/subagents/workflows/<run id>/agent-<id>.jsonl``, beside the
run's ``journal.jsonl`` (``started``/``result`` lines per agent: not a transcript, not
read) and ``agent-<id>.meta.json`` (label, phase, model). Beside the transcripts, kept by
the vault as sidecars (``readers.sidecar``: no entries, restored with their session):
``<session>/subagents/agent-<id>.meta.json`` (``{agentType, worktreePath,
description}``), a workflow run's ``agent-<id>.meta.json`` and ``journal.jsonl``, and
``<session>/tool-results/<tool use id>.txt`` (a tool output too large to inline; the
transcript keeps a 2 KB preview and the path), and the session's todo lists
``<config dir>/todos/<session id>-agent-<agent id>.json`` (``TODOS``: outside the
projects dir, tied to the session's ``<session>.jsonl``). Source of the workflow
layout: users' public notes on Claude Code workflow runs ("``result.json`` records the
transcript directory, under ``~/.claude/projects/<project>/<session>/subagents/
workflows/<runId>/``"; file listings such as ``H:/.claude/projects/H--prism/321c1d3f-…/
subagents/workflows/wf_57c6a296-6f2/agent-a7748a49cbfabf1b6.jsonl``) and
jazzyalex/agent-sessions' artifact rules (``subagents/workflows/<run>/journal.jsonl``
is a workflow journal, not a session).

Format facts (from real files in ``shared/corpus``, CC v1.0.17–v2.1.114):

- one JSON object per line, append-only; ``type`` is ``user``, ``assistant``,
  ``system``, ``summary`` or one of many meta types (``permission-mode``,
  ``attachment``, ``file-history-snapshot``, ``last-prompt``, ``progress`` …);
- ``message.content`` is a string or a list of blocks: ``text``, ``tool_use``,
  ``tool_result`` (content: string or blocks), ``thinking``, ``redacted_thinking``,
  ``image``/``document`` (base64 ``source.data``);
- ``toolUseResult`` repeats the tool result in another shape: not stored twice;
- one API response is often written as several lines that share ``message.id`` and
  ``requestId``, each repeating ``message.usage``: usage is counted once per
  (message.id, requestId), or per message.id when the lines carry no requestId;
- ``message.usage.cache_creation`` splits ``cache_creation_input_tokens`` into
  ``ephemeral_5m_input_tokens`` and ``ephemeral_1h_input_tokens`` (in the corpus from
  v1.0.98 on; v1.0.17 and v1.0.43 lack it): a 1-hour write costs 2x the input price, a
  5-minute one 1.25x; older versions wrote a top-level ``costUSD`` on assistant lines
  (the cost Claude Code computed: ccusage's cost-modes guide; no corpus file has one);
- ``isSidechain`` marks sub-agent lines; v2 sub-agent lines carry ``agentId``;
- ``isCompactSummary`` marks the summary written after ``/compact``; ``system`` records
  with ``subtype: compact_boundary`` mark where the context was compacted;
- the project is the record's ``cwd``, never the folder name (the encoding is lossy);
- a fork (``claude --resume <id> --fork-session``, v2.x; ``/branch``) writes a new
  ``<new id>.jsonl`` that repeats the original's lines, their ``uuid`` (and
  ``message.id``/``requestId``) unchanged, with ``sessionId`` rewritten to the new id,
  then goes on under it. No fork in the corpus; sources: anthropics/claude-code issue
  #39355 (v2.1.x: ``--resume <id> --fork-session`` starts a new session id and file)
  and a fork tool's notes read in this session's reference search ("``--fork-session``
  copies every line verbatim with only ``sessionId`` rewritten (spike-verified)",
  a Rust ``claude`` client's truncate-fork module), modelled by
  tests/sources/test_source_claude_fork.py.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from ctxkeep.sources._util import (
    as_float,
    as_int,
    block_text,
    blocks_text,
    compact_json,
    drop_media,
    media_placeholder,
    strip_ansi,
)
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
    Watermark,
    sorted_paths,
)
from ctxkeep.sources.coverage import set_version, unknown
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "claude-code"
PARSER_VERSION = 4  # 3: cache-write split and costUSD (a re-read fills them); 4: usage of lines without requestId keyed by message.id (store migration v14); session-keyed ids (session 17) need no bump: a watermark's state says how its file is keyed (``ids``)
MODE: Mode = "append"

_META_TEXT_KEYS = (
    "content",
    "summary",
    "customTitle",
    "aiTitle",
    "lastPrompt",
    "agentName",
    "title",
    "prUrl",
    "error",
)
#: the record types whose meaning is known (the corpus' real files v1.0.17-v2.1.114 and
#: agent-sessions' schema fixture, jazzyalex/agent-sessions
#: Resources/Fixtures/stage0/agents/claude/small.jsonl): other types are stored as
#: ``meta`` entries and named in the coverage ledger as not understood
KNOWN_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "attachment",
        "permission-mode",
        "file-history-snapshot",
        "last-prompt",
        "progress",
        "queue-operation",
        "agent-name",
        "custom-title",
        "ai-title",
        "pr-link",
        "worktree-state",
    }
)
#: the content block types whose meaning is known (Anthropic Messages API blocks)
KNOWN_BLOCKS = frozenset(
    {"text", "thinking", "redacted_thinking", "tool_use", "tool_result", "image", "document"}
)
#: inline sidechains (v1.0.x Task sub-agents) are grouped by their chain's root uuid,
#: looked up through the parent uuid: ``state["sc"]``. A file read since session 22
#: keeps a window of the ``SIDECHAIN_WINDOW`` sidechain uuids last written (oldest out
#: first; their roots' first 8 characters, what the session id takes) and
#: says so in its state (``"scw"``: the window's size); a file a store read before
#: keeps the whole map (``_SIDECHAIN_MAP_MAX`` uuids, the full roots), also when read
#: again from byte 0 (``SIDECHAIN_META``, ``ids_meta``). The two give the same sessions
#: unless a record's parent lies more than the window back: in the corpus's v1.0.x
#: files a parent is at most 3 sidechain records back (1 in the real v1.0.98 file, 405
#: sidechain records, 5 chains). The whole map was 9.3 MB of the watermark's JSON at a
#: 1 GB single session, dumped and rewritten with every group's commit
_SIDECHAIN_MAP_MAX = 200_000
SIDECHAIN_WINDOW = 10_000
#: the ``SourceFile.meta`` key that asks for the whole sidechain map (``"map"``) of a
#: file a store read before the window (``ids_meta``)
SIDECHAIN_META = "claude_sidechains"
#: the ``SourceFile.meta`` key that asks for parser v4's ids, a record's uuid alone
#: (``ids_meta``)
IDS_META = "claude_ids"
#: what a record uuid looks like (CC writes RFC 4122 UUIDs); anything else is not
#: trusted as a unique key and the record is keyed by its line hash instead
_ID_RE = re.compile(r"^[0-9A-Za-z_-]{8,}$")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """Claude config dirs to search: ``$CLAUDE_CONFIG_DIR`` entries, else ``~/.claude``
    and ``~/.config/claude``; plus dirs configured for the agent."""
    env = ctx.env.get("CLAUDE_CONFIG_DIR")
    if env:
        out = [Path(p.strip()).expanduser() for p in env.split(",") if p.strip()]
    else:
        out = [ctx.home / ".claude", ctx.home / ".config" / "claude"]
    return out


def subagent_meta(p: Path) -> dict:
    """The ``meta`` of a sub-agent transcript ``agent-<id>.jsonl``: ``subagent`` (the
    id) and, where the layout names it, ``parent_session`` (the folder holding
    ``subagents/``) and ``workflow_run`` (a workflow sub-agent's run folder,
    ``<session>/subagents/workflows/<run>/``)."""
    meta: dict = {"subagent": p.stem[len("agent-") :]}
    if p.parent.name == "subagents":
        meta["parent_session"] = p.parent.parent.name
    elif p.parent.parent.name == "workflows" and p.parent.parent.parent.name == "subagents":
        meta["parent_session"] = p.parents[3].name
        meta["workflow_run"] = p.parent.name
    return meta


def sidecar_kind(path: Path) -> str | None:
    """The sidecar kind of ``path`` (``readers.sidecar``) by its place beside a session,
    or None for a transcript: ``subagent-meta`` (``<session>/subagents/agent-<id>.meta.json``),
    ``workflow-meta`` and ``workflow-journal`` (``<session>/subagents/workflows/<run>/``'s
    ``agent-<id>.meta.json`` and ``journal.jsonl``), ``tool-result``
    (``<session>/tool-results/<file>``), ``todos`` (``todos/<session>-agent-<id>.json``)."""
    name, parent = path.name, path.parent
    if todo_session(path):
        return TODO_KIND
    if parent.name == "tool-results":
        return "tool-result"
    if name.startswith("agent-") and name.endswith(".meta.json"):
        if parent.name == "subagents":
            return "subagent-meta"
        if parent.parent.name == "workflows":
            return "workflow-meta"
    if name == "journal.jsonl" and parent.parent.name == "workflows":
        return "workflow-journal"
    return None


#: the folder of a config dir holding the sessions' todo lists, and the kind of those
#: sidecars. Claude Code (1.x-2.x, TodoWrite tool) keeps each session's list as
#: ``todos/<session id>-agent-<agent id>.json`` (the main thread's agent id is the
#: session id; a sub-agent's list carries its own id), one JSON array of ``{content,
#: status (pending | in_progress | completed), activeForm}`` (older lists: ``id``,
#: ``priority``: Claude Code 1.0's TodoWrite schema), rewritten whole on each TodoWrite
#: call (``[]`` once every item is completed); it goes with its session (session tools delete a session's lists with
#: its transcript: ``claudeSessionFiles`` below), so only the vault keeps it. No todo
#: file is in ``shared/corpus``; sources: santaclaude2025/confab
#: ``pkg/discovery`` (``findTodoFiles``: "Todos are stored in ~/.claude/todos/ as
#: {sessionID}-agent-{agentID}.json", the main session's agent id its session id), a
#: session manager's ``claudeSessionFiles`` (the transcript "and the todo lists keyed
#: by its ID"), bgauryy/open-docs ``claude-code-TodoWrite-flow.md`` (the item shape,
#: the list cleared when all are completed)
TODOS = "todos"
TODO_KIND = "todos"
_TODO_SEP = "-agent-"


def todo_session(path: Path) -> str | None:
    """The session id a todo list at ``path`` belongs to (``TODOS``: the name's part
    before ``-agent-``), or None for another file."""
    name = path.name
    if path.parent.name != TODOS or not name.endswith(".json") or _TODO_SEP not in name:
        return None
    return name.split(_TODO_SEP, 1)[0] or None


def _todo_meta(p: Path, transcript: Path) -> dict:
    """A todo list's discovery meta: its session's transcript, the session and the
    agent whose list it is."""
    sid = str(todo_session(p))
    agent = p.stem.split(_TODO_SEP, 1)[1]
    return sidecar.meta(TODO_KIND, transcript, session=sid, todo_agent=agent)


def _todos(d: Discovery, root: Path, transcripts: list[Path]) -> None:
    """Add the todo lists (``TODOS``) under config dir ``root`` whose session's
    transcript discovery found (``transcripts``: the sessions' ``<session>.jsonl``, in
    discovery order; the first of a session id is its own); a list whose transcript is
    not there is not taken (it would be tied to no session). The folder is searched (an
    agent folder: ``sources.confine`` refuses a list that is a symlink out of it). One
    ``scandir``, names split as text, a ``Path`` made only for a list taken; the
    session ids are read off the transcripts' names only when the folder holds a list
    (the 12 GB tree has none: its ~10,600 transcripts' ``Path.stem`` and dict entries
    cost ~5 ms of a no-op ingest's plan, session 24). Discovery of the 2 GB tree's
    2,729 transcripts with 4,244 lists beside them (two per session, 500 of sessions
    gone), CPU per call, mean of 20, A/B alternating at load 30-40 on 2 cores: base (no
    lists) 38-46 ms; ``glob`` and a ``Path`` per name 144-148 ms; this 116-123 ms, ~18
    µs a list taken (its ``lstat`` and confinement), what a transcript costs."""
    folder = root / TODOS
    try:
        with os.scandir(folder) as it:
            names = sorted(e.name for e in it if e.name.endswith(".json"))
    except OSError:
        return
    d.searched.append(folder)
    if not names:
        return
    sessions: dict[str, Path] = {}  # session id -> its transcript (the first found)
    for p in transcripts:
        n = p.name  # "<session>.jsonl" (``Path.stem`` without its cost)
        sessions.setdefault(n[: -len(".jsonl")] if len(n) > len(".jsonl") else n, p)
    for name in names:
        sid, sep, agent = name[: -len(".json")].partition(_TODO_SEP)
        owner = sessions.get(sid) if sep else None
        if owner is not None:
            d.add(folder / name, sidecar.MODE, sidecar.meta(TODO_KIND, owner, session=sid, todo_agent=agent))


def mode_for(path: Path) -> FileMode:
    """``rewrite`` for a sidecar (``sidecar_kind``), else ``append`` (a transcript)."""
    return sidecar.MODE if sidecar_kind(path) else MODE


#: where a session's sidecars are, relative to its folder ``<project>/<session>/``
_SIDECAR_GLOBS = (
    "subagents/agent-*.meta.json",
    "subagents/workflows/*/agent-*.meta.json",
    "subagents/workflows/*/journal.jsonl",
    "tool-results/*",
)


def _sidecar_meta(p: Path) -> dict:
    """The discovery meta of sidecar ``p`` (``readers.sidecar.meta``), with the
    transcript it belongs to: a sub-agent's meta its ``agent-<id>.jsonl``, a workflow
    journal and a tool result the session's ``<session>.jsonl``."""
    kind = str(sidecar_kind(p))
    if kind.endswith("-meta"):
        owner = p.with_name(p.name[: -len(".meta.json")] + ".jsonl")
        return sidecar.meta(kind, owner, **subagent_meta(owner))
    session = p.parents[3] if kind == "workflow-journal" else p.parent.parent
    return sidecar.meta(kind, session.with_name(session.name + ".jsonl"))


def _dirs(folder: str) -> list[os.DirEntry]:
    """The sub-folders of ``folder`` (links followed, as ``glob`` does); none when it
    cannot be read."""
    try:
        with os.scandir(folder) as it:
            return [e for e in it if e.is_dir()]
    except OSError:
        return []


def _sidecars(d: Discovery, proj: Path) -> None:
    """Add the sidecars (``sidecar_kind``) of every session under the projects dir
    ``proj`` (``_SIDECAR_GLOBS``), each with the transcript it belongs to. One walk of
    the session folders (``<project>/<session>/``), each listed once, the globs run
    only in the ``subagents`` and ``tool-results`` folders there are. Discovery of the
    2 GB tree's 2,728 transcripts, CPU per call (mean of 20, A/B alternating, load
    36-44 on 2 cores, so noisy): base 41-57 ms; the four globs over ``proj`` 48-56 ms
    (~+17 %); this walk 46-55 ms (~+5-10 %)."""
    found: dict[str, list[Path]] = {p: [] for p in _SIDECAR_GLOBS}
    for project in _dirs(str(proj)):
        for session in _dirs(project.path):
            for sub in _dirs(session.path):
                if sub.name not in ("subagents", "tool-results"):
                    continue
                base = Path(session.path)
                for pattern in _SIDECAR_GLOBS:
                    if pattern.startswith(sub.name + "/"):
                        found[pattern] += base.glob(pattern)
    for pattern in _SIDECAR_GLOBS:
        for p in sorted_paths(found[pattern]):
            d.add(p, sidecar.MODE, _sidecar_meta(p))


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecars on disk of the transcript at ``path`` (an ``ingest --path`` of it,
    as the hooks run, takes them in too): a session's ``<session>/`` folder's
    (``_SIDECAR_GLOBS``) and its todo lists (``<config dir>/todos/<session>-agent-*.json``,
    the config dir two folders above ``projects/<project>/<session>.jsonl``), a
    sub-agent's ``agent-<id>.meta.json``. Sorted per kind."""
    if path.suffix != ".jsonl" or sidecar_kind(path):
        return []
    todos: list[Path] = []
    if path.name.startswith("agent-"):
        found = [path.with_name(path.stem + ".meta.json")]
    else:
        folder = path.with_suffix("")
        found = [p for pattern in _SIDECAR_GLOBS for p in sorted_paths(folder.glob(pattern))]
        if path.parent.parent.name == "projects":
            todos = sorted_paths(
                (path.parents[2] / TODOS).glob(glob.escape(path.stem) + _TODO_SEP + "*.json")
            )
    out = [SourceFile(AGENT, p, sidecar.MODE, _sidecar_meta(p)) for p in found if p.is_file()]
    return out + [SourceFile(AGENT, p, sidecar.MODE, _todo_meta(p, path)) for p in todos if p.is_file()]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find session and sub-agent transcripts and their sidecars (``_sidecars``, and
    the todo lists of a config dir's sessions: ``_todos``). Configured extra dirs may
    point at a config dir (holding ``projects/``) or at a ``projects`` dir itself."""
    d = Discovery(AGENT)
    project_dirs = []
    for root in roots(ctx) + ctx.extra_dirs:
        proj = root / "projects" if (root / "projects").is_dir() else root
        d.searched.append(proj)
        if proj.is_dir():
            project_dirs.append(proj)
    for proj in project_dirs:
        transcripts: list[Path] = []  # the sessions' own (not sub-agents'), for ``_todos``
        for p in sorted_paths(proj.glob("*/*.jsonl")):
            meta = {}
            if p.name.startswith("agent-"):
                meta["subagent"] = p.stem[len("agent-") :]
            else:
                transcripts.append(p)
            d.add(p, MODE, meta)
        if proj.name == "projects":
            _todos(d, proj.parent, transcripts)
        for p in sorted_paths(proj.glob("*/*/subagents/agent-*.jsonl")):
            d.add(p, MODE, {"subagent": p.stem[len("agent-") :], "parent_session": p.parent.parent.name})
        for p in sorted_paths(proj.glob("*/*/subagents/workflows/*/agent-*.jsonl")):
            d.add(p, MODE, subagent_meta(p))
        _sidecars(d, proj)
    if not d.files:
        d.reason = (
            "no Claude Code projects dir (" + ", ".join(str(p) for p in d.searched) + ")"
            if not project_dirs
            else "projects dir holds no *.jsonl session files"
        )
    return d


def matches(path: Path) -> bool:
    """True when an explicit ``--path`` file looks like a Claude Code transcript."""
    head = file_head(path, (".jsonl",), 8192)
    return (
        b'"sessionId"' in head
        or b'"leafUuid"' in head
        or b'"parentUuid"' in head
        or (b'"type":"file-history-snapshot"' in head)
    )


def init_state(file: SourceFile) -> dict:
    """The parser state at offset 0 of ``file``: the session id its name implies (or,
    for a copy such as compress's ``<id>.jsonl.backup``, its ``file_session`` meta),
    for sub-agent transcripts the sub-agent and parent session ids, and ``ids``: how
    records are keyed (``IDS_META``: ``"uuid"`` for a file a store keyed so, else
    ``"session"``), and ``scw``: the inline-sidechain window's size, unless the file
    keeps the whole map (``SIDECHAIN_META``)."""
    return {
        "file_session": file.meta.get("file_session") or file.path.stem,
        "sub": file.meta.get("subagent"),
        "parent": file.meta.get("parent_session"),
        "ids": "uuid" if file.meta.get(IDS_META) == "uuid" else "session",
    } | ({} if file.meta.get(SIDECHAIN_META) == "map" else {"scw": SIDECHAIN_WINDOW})


def legacy_ids(state: dict | None) -> bool:
    """True when a watermark's ``state`` is of a file a store read before records were
    keyed by session (``ctxkeep`` before session 17: no ``ids`` in the state): the
    store holds its entries under ``uuid`` ids, which the file keeps (``read``)."""
    return state is not None and state.get("ids", "uuid") == "uuid"


def ids_meta(file: SourceFile, state: dict | None) -> SourceFile:
    """``file`` with ``IDS_META`` set when its watermark's ``state`` says the store keyed
    it by uuid alone (``legacy_ids``), so a parse of it from byte 0 (a re-read, compress's
    and scrub's line checks, a reparse keeping a store's ids) gives the ids the store
    holds; else without it (the vault keeps a capture's meta, so a file the vault met
    with it is keyed anew by a reparse that does not keep its old ids). The same for
    ``SIDECHAIN_META`` when the state holds the whole inline-sidechain map
    (``whole_sidechain_map``): the file's sidechain sessions stay those the store holds."""
    meta = {k: v for k, v in file.meta.items() if k not in (IDS_META, SIDECHAIN_META)}
    if legacy_ids(state):
        meta[IDS_META] = "uuid"
    if whole_sidechain_map(state):
        meta[SIDECHAIN_META] = "map"
    return file if meta == file.meta else SourceFile(file.agent, file.path, file.mode, meta)


def whole_sidechain_map(state: dict | None) -> bool:
    """True when a watermark's ``state`` holds the whole inline-sidechain map of a file
    a store read before the window (``"sc"`` without ``"scw"``: ``SIDECHAIN_WINDOW``):
    the file keeps it, so its sessions stay those the store holds."""
    return state is not None and "sc" in state and "scw" not in state


def _session(rec: dict, state: dict) -> tuple[str | None, str | None]:
    """(session_id, parent_session_id) of a record: sub-agents and inline sidechains
    are sessions of their own, linked to the session that spawned them."""
    sid = rec.get("sessionId") or state.get("sid") or state.get("file_session")
    agent_id = rec.get("agentId") or state.get("sub")
    if agent_id and (rec.get("isSidechain") or state.get("sub")):
        return f"agent-{agent_id}", sid if sid != f"agent-{agent_id}" else state.get("parent")
    if rec.get("isSidechain"):
        # inline sidechain (v1.0.x Task sub-agents): group by the chain's root uuid
        window = state.get("scw")
        if window:
            return f"{sid}/sidechain-{_window_root(rec, state, window)}", sid
        sc = state.setdefault("sc", {})
        parent = rec.get("parentUuid")
        root = sc.get(parent) if parent else None
        if root is None:
            root = rec.get("uuid") or parent or "?"
        u = rec.get("uuid")
        if u and len(sc) < _SIDECHAIN_MAP_MAX:
            sc[u] = root
        return f"{sid}/sidechain-{root[:8]}", sid
    return sid, None


def _window_root(rec: dict, state: dict, window: int) -> str:
    """The first 8 characters of the root uuid of an inline-sidechain record's chain,
    from the ``window`` sidechain uuids last written (``state["sc"]``, uuid -> root[:8],
    oldest first; ``SIDECHAIN_WINDOW``); the record's uuid goes in, the oldest out past
    ``window``. A parent not in the window (a chain's first record, or one more than
    ``window`` sidechain records back) makes the record a root, as the whole map does
    for a parent it does not hold. A lookup does not keep a parent in: a chain's record
    is a parent once, so kept it would push out twice as many uuids (9,000 chains
    written round robin lost their parents at a 10,000-uuid window that way)."""
    sc = state.get("sc")
    if not isinstance(sc, OrderedDict):  # a dict from the watermark's JSON keeps its order
        sc = state["sc"] = OrderedDict(sc or ())
    parent = rec.get("parentUuid")
    root = sc.get(parent) if parent else None
    if root is None:
        root = (rec.get("uuid") or parent or "?")[:8]
    u = rec.get("uuid")
    if u:
        sc[u] = root
        sc.move_to_end(u)
        if len(sc) > window:
            sc.popitem(last=False)
    return root


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Map one Claude Code line to entry dicts (keys of ``SOURCE_SCHEMA``).

    A user/assistant line gives one entry per content block; usage (assistant lines)
    rides on the first entry with ``usage_key = "<message.id>:<requestId>"``. Every
    other record type gives one entry (``summary`` or ``meta``); unknown types are
    ``meta``, never errors.

    ``record_id`` (the dedup key) is ``<session>:<uuid>`` (``state["ids"] ==
    "session"``, what ``init_state`` gives a file a store reads first now): the same
    session continued in another file stores its records once, and a fork (the
    original's uuids under a new ``sessionId``) holds its copy of the history as its
    own session's. A file a store keyed by ``uuid`` alone before session 17 (its
    watermark's state has no ``ids``; ``ids_meta``) keeps that key, so the ids the store
    and its users hold stay; ``reparse`` keeps it too. Records without a usable uuid
    (``summary``, ``permission-mode``, ``last-prompt`` …) are keyed by session and
    SHA-256 of the line, so byte-identical repeats of such a line are one record.
    Usage is keyed by the response, never the session (``usage_key``): a fork's copy of
    a response is counted once, as ccusage counts it.
    """
    rtype = rec.get("type")
    set_version(state, rec.get("version"))
    if rtype not in KNOWN_TYPES:
        unknown(state, rtype)
    if rec.get("sessionId"):
        state["sid"] = rec["sessionId"]
    if rec.get("cwd"):
        state["cwd"] = rec["cwd"]
    session_id, parent_session = _session(rec, state)
    uuid = rec.get("uuid")
    if not (isinstance(uuid, str) and _ID_RE.match(uuid)):
        uuid = None  # a placeholder such as "[trimmed for fixture]" is not a unique id
    base = {
        "agent": AGENT,
        "session_id": session_id,
        "parent_session_id": parent_session,
        "native_id": uuid,
        "parent_id": rec.get("parentUuid"),
        "project_dir": rec.get("cwd") or state.get("cwd"),
        "ts": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        "is_sidechain": bool(rec.get("isSidechain")) or bool(state.get("sub")),
        "source_path": src,
        "source_offset": offset,
        "record_id": (f"{session_id}:{uuid}" if state.get("ids") == "session" else uuid)
        if uuid
        else f"{session_id}:{line_hash}",
    }
    msg = rec.get("message") if isinstance(rec.get("message"), dict) else None
    if rtype in ("user", "assistant") and msg is None:
        state["_broken"] = True  # a message record without its message: a damaged copy
    if rtype in ("user", "assistant") and msg is not None:
        out = _message_entries(rec, msg, base)
        for e in out:
            if e["kind"] == "meta" and e.get("tool_name") and e["tool_name"] not in KNOWN_BLOCKS:
                unknown(state, f"block:{e['tool_name']}")
        return out
    if rtype == "summary":
        return [
            dict(
                base,
                role="system",
                kind="summary",
                part=0,
                native_id=uuid or rec.get("leafUuid"),
                text=str(rec.get("summary") or ""),
            )
        ]
    if rtype == "system":
        content = rec.get("content")
        text = content if isinstance(content, str) else ""
        sub = rec.get("subtype")
        kind = "summary" if sub == "away_summary" else "meta"
        return [
            dict(
                base,
                role="system",
                kind=kind,
                part=0,
                tool_name=sub if isinstance(sub, str) else None,
                text=strip_ansi(text),
            )
        ]
    return [dict(base, role="system", kind="meta", part=0, tool_name=rtype, text=_meta_text(rec))]


def _meta_text(rec: dict) -> str:
    for k in _META_TEXT_KEYS:
        v = rec.get(k)
        if isinstance(v, str) and v:
            return strip_ansi(v)
    att = rec.get("attachment")
    if isinstance(att, dict):
        for k in ("content", "stdout", "prompt"):
            v = att.get(k)
            if isinstance(v, str) and v:
                return strip_ansi(v)
        return compact_json(drop_media(att), 2000)
    return ""


def _block(b: dict) -> str:
    return block_text(b, ("image", "document"), scrub=True)


def _tool_result_text(content) -> str:
    """Plain text of a tool_result's content: string, or text/image/document blocks."""
    return blocks_text(content, _block)


def _message_entries(rec: dict, msg: dict, base: dict) -> list[dict]:
    role = msg.get("role") or rec.get("type")
    content = msg.get("content")
    out: list[dict] = []
    if rec.get("isCompactSummary"):
        kind_msg = "summary"
    elif rec.get("isMeta"):
        kind_msg = "meta"
    else:
        kind_msg = "message"
    if isinstance(content, str):
        out.append(dict(base, role=role, kind=kind_msg, text=content))
    elif isinstance(content, list):
        for b in content:
            if not isinstance(b, dict):
                out.append(dict(base, role=role, kind=kind_msg, text=str(b)))
                continue
            t = b.get("type")
            if t == "text":
                out.append(dict(base, role=role, kind=kind_msg, text=str(b.get("text") or "")))
            elif t == "thinking":
                out.append(dict(base, role=role, kind="thinking", text=str(b.get("thinking") or "")))
            elif t == "redacted_thinking":
                out.append(dict(base, role=role, kind="thinking", text="[redacted thinking]"))
            elif t == "tool_use":
                out.append(
                    dict(
                        base,
                        role=role,
                        kind="tool_call",
                        tool_name=b.get("name"),
                        native_id=b.get("id") or base["native_id"],
                        text=compact_json(b.get("input")),
                    )
                )
            elif t == "tool_result":
                text = _tool_result_text(b.get("content"))
                if b.get("is_error"):
                    text = "[error] " + text
                out.append(
                    dict(
                        base,
                        role="tool",
                        kind="tool_result",
                        native_id=b.get("tool_use_id") or base["native_id"],
                        text=text,
                    )
                )
            elif t in ("image", "document"):
                src = b.get("source") or {}
                out.append(
                    dict(
                        base,
                        role=role,
                        kind=kind_msg,
                        text=media_placeholder(t, src.get("media_type"), len(src.get("data") or "")),
                    )
                )
            else:
                out.append(
                    dict(base, role=role, kind="meta", tool_name=t, text=compact_json(drop_media(b), 2000))
                )
    if not out:
        out.append(dict(base, role=role, kind="meta", text=""))
    for i, e in enumerate(out):
        e["part"] = i
    first = out[0]
    first["model"] = msg.get("model")
    mid, rid = msg.get("id"), rec.get("requestId")
    first["message_id"], first["request_id"] = mid, rid
    usage = msg.get("usage")
    if isinstance(usage, dict) and rec.get("type") == "assistant":
        first["input_tokens"] = as_int(usage.get("input_tokens"))
        first["output_tokens"] = as_int(usage.get("output_tokens"))
        first["cache_read_tokens"] = as_int(usage.get("cache_read_input_tokens"))
        first["cache_creation_tokens"] = as_int(usage.get("cache_creation_input_tokens"))
        split = usage.get("cache_creation")
        if isinstance(split, dict):
            first["cache_creation_5m_tokens"] = as_int(split.get("ephemeral_5m_input_tokens"))
            first["cache_creation_1h_tokens"] = as_int(split.get("ephemeral_1h_input_tokens"))
        first["cost_usd"] = as_float(rec.get("costUSD"))
        # one API response: (message.id, requestId); a line without requestId (seen in
        # files of other Claude Code builds and in tools that rewrite transcripts) still
        # repeats its response's usage on every line of the message: the id alone keys it
        if mid and rid:
            first["usage_key"] = f"{mid}:{rid}"
        elif mid:
            first["usage_key"] = f"{mid}:"
        else:
            # the record's uuid alone (not its session-keyed id): a fork's copy of the
            # line is the same API response, counted once
            first["usage_key"] = f"line:{base['native_id'] or base['record_id']}"
    return out


def keep_ids(reader):
    """``reader`` (a ``record_reader`` over this parser: Claude Code's, OpenClaude's,
    Cowork's) as a ``read(file, wm, batch_bytes)`` that keeps the ids the store gave a
    file: one it keyed by uuid alone (its watermark, ``legacy_ids``) keeps those, also
    when it is read again from byte 0. Without a watermark ``file`` is read as it comes
    (a reparse sets ``IDS_META`` to keep a store's ids: ``sources.as_stored``)."""

    def read(
        file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        for b in reader(file if wm is None else ids_meta(file, wm.state), wm, batch_bytes):
            yield _window_at(b)

    read.__doc__ = reader.__doc__
    return read


def _window_at(b: Batch) -> Batch:
    """``b`` with its watermark's state copied as it is at the batch's end when it holds
    an inline-sidechain window (``"scw"``): the reader's state is one dict, parsed on
    while the batch waits to be stored (read ahead, held for a flush's redaction), and a
    window stored from later on has let go of uuids the lines after the watermark need
    (the whole map only grows, so a later one held every earlier uuid). ~60 batches per
    GB (16 MiB each), a copy of ``SIDECHAIN_WINDOW`` pairs each."""
    wm = b.watermark
    if wm is not None and "scw" in wm.state:
        state = dict(wm.state)
        if "sc" in state:
            state["sc"] = dict(state["sc"])  # in order: least recent first
        b.watermark = dataclasses.replace(wm, state=state)
    return b


#: new lines of one transcript into entry dicts (``parse_record``; ``keep_ids``)
_read_transcript = keep_ids(record_reader(PARSER_VERSION, parse_record, init_state, unique_ids=True))


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """New lines of one transcript into entry dicts (``parse_record``, ids kept as the
    store gave them: ``keep_ids``); a sidecar (``readers.sidecar``) whole, for the vault,
    with no entries."""
    if sidecar.is_sidecar(file):
        return sidecar.read_sidecar(file, wm, PARSER_VERSION, batch_bytes)
    return _read_transcript(file, wm, batch_bytes)
