"""gptme conversation logs.

Where: ``$GPTME_DIR`` else ``~/.local/share/gptme/logs`` (gptme's XDG data dir; on
macOS and Windows gptme uses the same ``platformdirs`` data dir under the user's home):
one folder per conversation, ``<logs>/<name>/conversation.jsonl``, where ``name`` is
``YYYY-MM-DD-<topic>`` or ``YYYY-MM-DD-HHMMSS-<topic>``. Append-only JSONL.

Format facts (gptme 0.2x ``Message.to_dict`` as agentsview 0.46's
``internal/parser/gptme.go`` and its tests read it): each line is one message
``{role, content, timestamp, pinned?, hide?, files?, call_id?, metadata?}``; ``role`` is
``system`` (the prompt and context injections), ``user``, ``assistant`` or ``tool``
(a tool's output, with no stable id pairing it to its call; ``call_id`` when present).
``timestamp`` is ISO-8601 without a zone (UTC). Assistant messages may carry
``metadata {model, usage {input_tokens, output_tokens, cache_read_tokens,
cache_creation_tokens}, cost}`` (cost in USD, as gptme logged it). gptme has no
session id in the records: the folder name is the session id, and no working directory
is logged (``project_dir`` stays empty).

Usage: one row per assistant message that carries ``metadata.usage``
(``usage_key`` ``gptme:<session>:<line hash>``); ``input_tokens`` is taken as logged.
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.sources._util import as_float, as_int, dict_at
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "gptme"
PARSER_VERSION = 1
MODE: Mode = "append"

_ROLES = {"user": ("user", "message"), "assistant": ("assistant", "message"), "tool": ("tool", "tool_result")}


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<logs>/*/conversation.jsonl`` under ``$GPTME_DIR`` when set, else
    ``~/.local/share/gptme/logs``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("GPTME_DIR", ctx.home / ".local" / "share" / "gptme" / "logs")
    for base in [root, *ctx.extra_dirs]:
        d.add_glob(base, ["*/conversation.jsonl"], MODE, lambda p: {"session": p.parent.name})
    d.explain_empty(root, f"no */conversation.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a gptme ``conversation.jsonl`` given with ``--path``."""
    return path.name == "conversation.jsonl" and b'"role"' in file_head(path, (".jsonl",), 4096)


def init_state(file: SourceFile) -> dict:
    """The session id: the conversation's folder name."""
    return {"sid": file.meta.get("session") or file.path.parent.name}


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One gptme message → one entry (system messages are ``meta``; an unknown role is
    ``meta`` with the role as its ``tool_name``)."""
    sid = state["sid"]
    role = str(rec.get("role") or "")
    content = rec.get("content")
    text = content if isinstance(content, str) else ""
    meta = dict_at(rec, "metadata")
    model = meta.get("model") if isinstance(meta.get("model"), str) else None
    if model:
        state["model"] = model
    entry = {
        "agent": AGENT,
        "session_id": sid,
        "native_id": rec.get("call_id") if isinstance(rec.get("call_id"), str) else None,
        "part": 0,
        "ts": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        "model": model or (state.get("model") if role == "assistant" else None),
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{line_hash}",
    }
    if role in _ROLES:
        entry["role"], entry["kind"] = _ROLES[role]
    else:
        entry.update(role="system", kind="meta", tool_name=role or "unknown")
    entry["text"] = text
    usage = meta.get("usage") if isinstance(meta.get("usage"), dict) else None
    if role == "assistant" and usage:
        entry.update(
            input_tokens=as_int(usage.get("input_tokens")) or 0,
            output_tokens=as_int(usage.get("output_tokens")) or 0,
            cache_read_tokens=as_int(usage.get("cache_read_tokens")) or 0,
            cache_creation_tokens=as_int(usage.get("cache_creation_tokens")) or 0,
            cost_usd=as_float(meta.get("cost")),
            usage_key=f"gptme:{sid}:{line_hash}",
        )
    return [entry]


#: new lines of one conversation file into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)
