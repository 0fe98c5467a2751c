"""Mistral Vibe (``vibe``, Mistral's coding CLI) session logs.

Where: ``$VIBE_SESSIONS_DIR`` else ``~/.vibe/logs/session`` (all platforms, under the
user's home): one folder per session, ``session_<YYYYMMDD>_<HHMMSS>_<id>/``, holding
``messages.jsonl`` (the transcript, appended) and ``meta.json`` (rewritten as the
session goes).

Format facts (Mistral Vibe 1.x/2.x as agentsview 0.46's ``internal/parser/vibe.go``
and ``vibe_provider.go`` read it): each ``messages.jsonl`` line is an OpenAI-style chat
message ``{role, content, reasoning_content?, tool_calls?[{id, index, function {name,
arguments}}], name?, tool_call_id?, message_id?, injected?, model?}``; ``role`` is
``system``, ``user``, ``assistant`` or ``tool`` (a result, paired by
``tool_call_id``); ``injected: true`` marks a message the agent added, not the user.
Lines carry no timestamps. ``meta.json``: ``{session_id, parent_session_id, start_time,
end_time, git_commit, git_branch, model | config.active_model, working_dir |
environment.working_directory, title, stats {session_prompt_tokens,
session_completion_tokens, session_cached_tokens, context_tokens, …}}``.

Usage: the session's cumulative ``stats`` from ``meta.json`` as one row per session
(``usage_key`` ``vibe:<session id>``; a later, larger total replaces it, as the store
keeps the larger copy of a key): input = prompt - cached, cache read = cached, output
= completion. Entries take ``start_time`` as their time (the lines have none); the
usage row ``end_time``. The vault keeps ``meta.json`` as a sidecar of its
``messages.jsonl`` (``readers.sidecar``: each version, no entries), so a restore gives
the session folder back whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ctxkeep.sources._util import as_int, compact_json, dict_at, json_object, nonempty, openai_tool_calls
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    FileMode,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "mistral-vibe"
# parser 2: tool calls through _util.openai_tool_calls (a call without arguments is "", not "null")
PARSER_VERSION = 2
MODE: Mode = "append"


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<root>/*/messages.jsonl`` under ``$VIBE_SESSIONS_DIR`` when set, else
    ``~/.vibe/logs/session``, and in configured dirs; each session folder's
    ``meta.json`` as a sidecar of its ``messages.jsonl`` (``readers.sidecar``)."""
    d = Discovery(AGENT)
    root = ctx.env_dir("VIBE_SESSIONS_DIR", ctx.home / ".vibe" / "logs" / "session")
    for base in [root, *ctx.extra_dirs]:
        d.add_glob(base, ["*/messages.jsonl"], MODE)
        for p in [
            f.path for f in d.files if f.path.parent.parent == base and f.path.name == "messages.jsonl"
        ]:
            d.add(p.with_name("meta.json"), sidecar.MODE, sidecar.meta("session-meta", p))
    d.explain_empty(root, f"no */messages.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Vibe ``messages.jsonl`` (a ``meta.json`` beside it) given with ``--path``."""
    return (
        path.name == "messages.jsonl"
        and (path.parent / "meta.json").is_file()
        and b'"role"' in file_head(path, (".jsonl",), 4096)
    )


def _meta(session_dir: Path) -> dict:
    """``meta.json`` of a session folder as a dict ({} when missing or unreadable),
    read again only when it changed."""
    p = session_dir / "meta.json"
    return json_object(p)


def init_state(file: SourceFile) -> dict:
    """Nothing but the folder: the session id, project and model come from
    ``meta.json`` as each line is parsed (it is rewritten while the session runs)."""
    return {}


def _session(src: str) -> tuple[str, dict]:
    folder = Path(src).parent
    meta = _meta(folder)
    sid = meta.get("session_id") if isinstance(meta.get("session_id"), str) else None
    return sid or folder.name, meta


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One Vibe chat message → its entries: the message, its reasoning, one tool call
    per ``tool_calls`` item; a ``tool`` message → a tool result; and, on assistant
    lines, the session's usage row from ``meta.json``."""
    sid, meta = _session(src)
    env = dict_at(meta, "environment")
    cfg = dict_at(meta, "config")
    session_model = nonempty(meta.get("model")) or nonempty(cfg.get("active_model"))
    role = str(rec.get("role") or "")
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": nonempty(meta.get("parent_session_id")),
        "native_id": nonempty(rec.get("message_id")),
        "project_dir": nonempty(meta.get("working_dir")) or nonempty(env.get("working_directory")),
        "part": 0,
        "ts": nonempty(meta.get("start_time")),
        "model": (nonempty(rec.get("model")) or session_model) if role == "assistant" else None,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{nonempty(rec.get('message_id')) or line_hash}",
    }
    content = rec.get("content")
    text = content if isinstance(content, str) else compact_json(content, 2000) if content else ""
    if role == "tool":
        return [
            dict(
                base,
                role="tool",
                kind="tool_result",
                native_id=nonempty(rec.get("tool_call_id")),
                tool_name=nonempty(rec.get("name")),
                text=text,
            )
        ]
    if role == "user" and not rec.get("injected"):
        return [dict(base, role="user", kind="message", text=text)]
    if role in ("system", "user"):  # the system prompt, or a message the agent injected
        return [
            dict(
                base, role="system", kind="meta", tool_name="injected" if role == "user" else role, text=text
            )
        ]
    if role != "assistant":
        return [dict(base, role="system", kind="meta", tool_name=role or "unknown", text=text)]
    out = [dict(base, role="assistant", kind="message", text=text)]
    if nonempty(rec.get("reasoning_content")):
        out.append(
            dict(base, role="assistant", kind="thinking", part=len(out), text=rec["reasoning_content"])
        )
    out += openai_tool_calls(rec.get("tool_calls"), base, len(out))
    out += _usage(meta, base, sid, session_model)
    return out


def _usage(meta: dict, base: dict, sid: str, model: str | None) -> list[dict]:
    """The session's cumulative usage from ``meta.json`` (nothing without a model or
    any tokens): one meta entry whose record id names the totals (the same totals are
    one entry), counted under ``vibe:<session>``."""
    stats = dict_at(meta, "stats")
    prompt = as_int(stats.get("session_prompt_tokens")) or 0
    cached = as_int(stats.get("session_cached_tokens")) or 0
    completion = as_int(stats.get("session_completion_tokens")) or 0
    if not model or not (prompt or completion):
        return []
    return [
        dict(
            base,
            role="system",
            kind="meta",
            tool_name="usage",
            part=0,
            native_id=None,
            ts=nonempty(meta.get("end_time")) or base["ts"],
            model=model,
            text=f"usage {model}",
            input_tokens=max(prompt - cached, 0),
            output_tokens=completion,
            cache_read_tokens=cached,
            cache_creation_tokens=0,
            usage_key=f"vibe:{sid}",
            record_id=f"{sid}:usage:{prompt}:{cached}:{completion}",
        )
    ]


#: new lines of one session's messages.jsonl into entry dicts (``parse_record``)
_read_transcript = record_reader(PARSER_VERSION, parse_record, init_state)


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecar of ``messages.jsonl`` at ``path`` (an ``ingest --path`` of it takes it
    in too): the ``meta.json`` beside it, when there is one."""
    p = path.with_name("meta.json")
    if path.name != "messages.jsonl" or not p.is_file():
        return []
    return [SourceFile(AGENT, p, sidecar.MODE, sidecar.meta("session-meta", path))]


def mode_for(path: Path) -> FileMode:
    """``rewrite`` for a session's ``meta.json`` (a sidecar), else ``append``."""
    return sidecar.MODE if path.name == "meta.json" else MODE


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """New lines of ``messages.jsonl`` into entry dicts (``parse_record``); a sidecar
    (``meta.json``) whole, for the vault, with no entries."""
    if sidecar.is_sidecar(file):
        return sidecar.read_sidecar(file, wm, PARSER_VERSION, batch_bytes)
    return _read_transcript(file, wm, batch_bytes)
