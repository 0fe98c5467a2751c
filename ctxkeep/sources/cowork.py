"""Claude Desktop's Cowork (local agent mode): the desktop app's agent sessions, run by
the Claude Code engine in a sandbox and kept as Claude Code transcripts.

Where (agentsview 0.46 ``internal/parser/cowork_paths.go``: the Electron user-data
dir of the Claude app): ``~/.config/Claude/local-agent-mode-sessions`` (Linux),
``~/Library/Application Support/Claude/local-agent-mode-sessions`` (macOS),
``%LOCALAPPDATA%\\Packages\\Claude_pzs8sxrjxfjjc\\LocalCache\\Roaming\\Claude\\
local-agent-mode-sessions`` (Windows MSIX) or ``%APPDATA%\\Claude\\
local-agent-mode-sessions`` (older Windows installs), each under the home;
``$COWORK_DIR`` names the root instead. (Claude Code sessions started from the
desktop app's Code tab are written to ``~/.claude/projects`` and read as
``claude-code``.)

Layout (agentsview 0.46 ``cowork.go``; cowork-bridge's ``docs/session-internals.md``
for the ``<account>/<workspace>/local_<id>`` nesting)::

    <root>/<account>/<workspace>/local_<uuid>.json       session metadata
    <root>/<account>/<workspace>/local_<uuid>/.claude/projects/<enc>/<cliSessionId>.jsonl
    <root>/<account>/<workspace>/local_<uuid>/.claude/projects/<enc>/<cliSessionId>/subagents/**/agent-<id>.jsonl

The metadata ``{sessionId, cliSessionId, title, userSelectedFolders [paths],
createdAt, lastActivityAt (epoch ms)}`` names the transcript; the encoded project
folder varies between app versions, so the transcript is found by its name
``<cliSessionId>.jsonl`` in any folder of ``projects/``. The transcript and the
sub-agent transcripts are Claude Code's JSONL (see ``claude_code``), append-only,
parsed by the same parser; an ``ai-title`` line carries a generated title.

Entries: Claude Code's, labelled ``cowork``, usage keys prefixed ``cowork:``. The
project is the first folder the user attached (``userSelectedFolders``) when there is
one, else the ``cwd`` the transcript records (a path inside the sandbox). The
metadata's ``title`` becomes a ``title`` ``meta`` entry at the transcript's first
line (a later rename, which touches only the metadata, is not read again until the
transcript grows).
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from ctxkeep.sources import claude_code
from ctxkeep.sources._util import relabel
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile, sorted_paths
from ctxkeep.sources.readers.jsonl import record_reader

AGENT = "cowork"
PARSER_VERSION = claude_code.PARSER_VERSION
MODE: Mode = "append"

_META_NAME = re.compile(r"^local_[0-9A-Za-z_-]+\.json$")
_ID = re.compile(r"^[0-9A-Za-z_-]{8,}$")
_SUB = "local-agent-mode-sessions"


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$COWORK_DIR`` when set, else the Linux, macOS and Windows roots."""
    env = ctx.env.get("COWORK_DIR")
    if env:
        return [Path(env).expanduser()]
    h = ctx.home
    return [
        h / ".config" / "Claude" / _SUB,
        h / "Library" / "Application Support" / "Claude" / _SUB,
        h
        / "AppData"
        / "Local"
        / "Packages"
        / "Claude_pzs8sxrjxfjjc"
        / "LocalCache"
        / "Roaming"
        / "Claude"
        / _SUB,
        h / "AppData" / "Roaming" / "Claude" / _SUB,
    ]


def read_meta(path: Path) -> dict:
    """The fields of a ``local_<uuid>.json`` this source uses ({} when unreadable)."""
    try:
        if path.stat().st_size > 4 * 1024 * 1024:
            return {}
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    if not isinstance(doc, dict):
        return {}
    out: dict = {}
    cli = doc.get("cliSessionId")
    if isinstance(cli, str) and _ID.match(cli):
        out["cli"] = cli
    if isinstance(doc.get("title"), str) and doc["title"].strip():
        out["title"] = doc["title"].strip()
    folders = doc.get("userSelectedFolders")
    if isinstance(folders, list):
        first = next((f for f in folders if isinstance(f, str) and f), None)
        if first:
            out["project"] = first
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """Each session's transcript and sub-agent transcripts, found through its metadata
    file (``<account>/<workspace>/local_<uuid>.json``) under each root and configured
    root."""
    d = Discovery(AGENT)
    for root in [*roots(ctx), *ctx.extra_dirs]:
        d.searched.append(root)
        if not root.is_dir():
            continue
        for meta_path in sorted_paths(root.glob("*/*/local_*.json")):
            if not _META_NAME.match(meta_path.name):
                continue
            meta = read_meta(meta_path)
            cli = meta.get("cli")
            if not cli:
                continue
            facts = {k: v for k, v in meta.items() if k in ("title", "project")}
            projects = meta_path.with_suffix("") / ".claude" / "projects"
            for main in sorted_paths(projects.glob(f"*/{cli}.jsonl")):
                d.add(main, MODE, dict(facts))
                sub = {k: v for k, v in facts.items() if k == "project"}
                for p in sorted_paths((main.parent / cli / "subagents").glob("**/agent-*.jsonl")):
                    d.add(p, MODE, dict(claude_code.subagent_meta(p), **sub, parent_session=cli))
                break
    d.explain_empty(roots(ctx)[0], "no Cowork session (local_<uuid>.json with a transcript) found")
    return d


def matches(path: Path) -> bool:
    """A Claude Code-shaped transcript under a ``local-agent-mode-sessions`` folder."""
    return _SUB in path.parts and claude_code.matches(path)


def init_state(file: SourceFile) -> dict:
    """Claude Code's (session id from the file name, sub-agent ids), with the
    metadata's title and project."""
    state = claude_code.init_state(file)
    if file.path.name.startswith("agent-") and not state.get("sub"):
        m = claude_code.subagent_meta(file.path)
        state.update(sub=m.get("subagent"), parent=m.get("parent_session"))
    state["cowork_title"] = file.meta.get("title")
    state["cowork_project"] = file.meta.get("project")
    return state


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Claude Code's parse of the line, relabelled ``cowork`` (and, at the first
    line, the metadata's title)."""
    out = relabel(claude_code.parse_record(rec, offset, line_hash, state, src), AGENT)
    project = state.get("cowork_project")
    for e in out:
        if project:
            e["project_dir"] = project
    title = state.get("cowork_title")
    if offset == 0 and title and out:
        first = out[0]
        out.append(
            {
                "agent": AGENT,
                "session_id": first["session_id"],
                "parent_session_id": first.get("parent_session_id"),
                "project_dir": first.get("project_dir"),
                "ts": first.get("ts"),
                "part": 0,
                "role": "system",
                "kind": "meta",
                "tool_name": "title",
                "text": title,
                "source_path": src,
                "source_offset": offset,
                "record_id": f"{first['session_id']}:cowork-title:{title}",
            }
        )
    return out


#: new lines of one transcript into entry dicts (``parse_record``; ``claude_code.keep_ids``)
read = claude_code.keep_ids(record_reader(PARSER_VERSION, parse_record, init_state))
#: the ids a store gave a file (``sources.as_stored``): Claude Code's
ids_meta = claude_code.ids_meta
