"""Grok CLI (xAI's Grok Build, ``grok``) sessions.

Where: ``$GROK_DIR`` else ``~/.grok/sessions`` (all platforms, under the user's home;
agentsview 0.46 ``internal/parser/types.go`` AgentGrok, ``DefaultDirs .grok/sessions``,
env ``GROK_DIR``): ``<sessions>/<url-encoded cwd>/<session id>/`` holding
``chat_history.jsonl`` (the transcript, appended), ``updates.jsonl`` (the streamed
protocol updates, appended; per-turn usage), ``summary.json`` and ``signals.json``
(rewritten) (agentsview 0.46 ``grok.go``, ``grok_provider.go`` and
``testdata/grok-build/README.md``: fixtures produced by grok-build's own Rust types at
commit 7cfcb20).

Format facts, ``chat_history.jsonl`` in two generations (``testdata/grok-build``):

- current (``chat_format_version`` 1): ``{type, …}`` with ``type`` ``system``
  ``{content}``, ``user`` ``{content [text blocks], prompt_index?, synthetic_reason?}``
  (``synthetic_reason`` ``project_instructions`` / ``interjection`` …: not typed by the
  user), ``reasoning`` ``{id, summary [{type summary_text, text}]}``,
  ``backend_tool_call`` ``{kind {tool_type, action, id, status}}`` (a server-side tool
  such as web search), ``assistant`` ``{content, tool_calls [{id, name, arguments}],
  model_id}``, ``tool_result`` ``{tool_call_id, content}``;
- legacy (the ``chat-history-downgrade`` output): OpenAI chat messages ``{role, content,
  tool_calls [{id, type, function {name, arguments}}], reasoning_content?, model_id?,
  tool_call_id?}``.

Neither carries timestamps or ids for messages. ``summary.json``: ``{info {id, cwd},
session_summary, generated_title, created_at, updated_at, current_model_id,
parent_session_id, …}``. ``updates.jsonl`` lines ``{timestamp (Unix seconds), params
{update {prompt_id?, usage {inputTokens (cached included), cachedReadTokens,
outputTokens, reasoningTokens, costUsdTicks (USD × 10^10), modelUsage? {model: {same
fields}}}}}}`` (``grok.go`` parseGrokUsageEvents, ``grok_test.go``).

Entries: the session id is the folder name; ``project_dir`` ``summary.info.cwd``;
``parent_session_id`` ``summary.parent_session_id`` (a fork); times the summary's
``created_at``. Usage: one row per model per ``updates.jsonl`` usage line (``usage_key``
``grok:<session>:<prompt_id or line hash>:<model>``), input = inputTokens −
cachedReadTokens; other update lines give no entry.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ctxkeep.sources._util import (
    as_int,
    block_text,
    compact_json,
    dict_at,
    json_object,
    nonempty,
    openai_message_entries,
)
from ctxkeep.sources.contract import Discovery, DiscoveryContext, FileMode, Mode, SourceFile
from ctxkeep.sources.coverage import unknown
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "grok"
# parser 2: read through _util.openai_message_entries/openai_tool_calls (a tool call without arguments is "", not "null"; tool results carry their name)
PARSER_VERSION = 2
MODE: Mode = "append"

_FILES = ("chat_history.jsonl", "updates.jsonl")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<sessions>/<cwd>/<id>/{chat_history,updates}.jsonl`` under ``$GROK_DIR``
    when set, else ``~/.grok/sessions``, and in configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("GROK_DIR", ctx.home / ".grok" / "sessions")
    for base in [root, *ctx.extra_dirs]:
        d.add_glob(base, [f"*/*/{name}" for name in _FILES], MODE)
    sidecar.add_all(d, sidecars_of)
    d.explain_empty(root, f"no */*/chat_history.jsonl under {root}")
    return d


def matches(path: Path) -> bool:
    """True for a Grok session's ``chat_history.jsonl`` or ``updates.jsonl`` (a
    ``summary.json`` beside it) given with ``--path``."""
    return (
        path.name in _FILES
        and (path.parent / "summary.json").is_file()
        and bool(file_head(path, (".jsonl",), 64))
    )


def _summary(folder: Path) -> dict:
    """``summary.json`` of a session folder ({} when missing or unreadable), read
    again only when it changed."""
    p = folder / "summary.json"
    return json_object(p)


def init_state(file: SourceFile) -> dict:
    """Nothing: the session comes from the folder and its ``summary.json``."""
    return {}


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(block_text(b) for b in content if isinstance(b, dict))
    return "" if content is None else compact_json(content, 4000)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """One line of ``chat_history.jsonl`` (either generation) or ``updates.jsonl`` →
    its entries."""
    folder = Path(src).parent
    summary = _summary(folder)
    sid = folder.name
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": nonempty(summary.get("parent_session_id")),
        "project_dir": nonempty(dict_at(summary, "info").get("cwd")),
        "ts": nonempty(summary.get("created_at")),
        "part": 0,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{sid}:{line_hash}",
    }
    if Path(src).name == "updates.jsonl":
        return _usage(rec, base, sid, line_hash, nonempty(summary.get("current_model_id")))
    if "type" in rec:
        return _current(rec, base, state)
    if "role" in rec:
        return _legacy(rec, base, state)
    unknown(state, "untyped")
    return [dict(base, role="system", kind="meta", tool_name="unknown", text=compact_json(rec, 2000))]


def _assistant(rec: dict, base: dict) -> list[dict]:
    """A current-format assistant record: its text, then its ``tool_calls``."""
    e = dict(base, model=nonempty(rec.get("model_id")))
    return openai_message_entries(dict(rec, role="assistant"), e, _text, reasoning_keys=())


def _current(rec: dict, base: dict, state: dict) -> list[dict]:
    t = rec.get("type")
    if t == "system":
        return [dict(base, role="system", kind="meta", tool_name="system", text=_text(rec.get("content")))]
    if t == "user":
        reason = nonempty(rec.get("synthetic_reason"))
        if reason:
            return [dict(base, role="system", kind="meta", tool_name=reason, text=_text(rec.get("content")))]
        return [dict(base, role="user", kind="message", text=_text(rec.get("content")))]
    if t == "assistant":
        return _assistant(rec, base)
    if t == "reasoning":
        parts = rec.get("summary")
        text = _text(parts) if isinstance(parts, list) else _text(rec.get("content"))
        return [dict(base, role="assistant", kind="thinking", native_id=nonempty(rec.get("id")), text=text)]
    if t == "tool_result":
        return [
            dict(
                base,
                role="tool",
                kind="tool_result",
                native_id=nonempty(rec.get("tool_call_id")),
                text=_text(rec.get("content")),
            )
        ]
    if t == "backend_tool_call":
        kind = dict_at(rec, "kind")
        return [
            dict(
                base,
                role="assistant",
                kind="tool_call",
                native_id=nonempty(kind.get("id")),
                tool_name=nonempty(kind.get("tool_type")) or "backend_tool",
                text=compact_json(kind.get("action")) if kind.get("action") is not None else "",
            )
        ]
    unknown(state, str(t))
    return [dict(base, role="system", kind="meta", tool_name=str(t), text=compact_json(rec, 2000))]


def _legacy(rec: dict, base: dict, state: dict) -> list[dict]:
    role = str(rec.get("role") or "")
    if role not in ("assistant", "user", "tool", "system"):
        unknown(state, f"role:{role}")
    e = dict(base, model=nonempty(rec.get("model_id"))) if role == "assistant" else base
    return openai_message_entries(rec, e, _text, reasoning_keys=("reasoning_content",))


def _usage(rec: dict, base: dict, sid: str, line_hash: str, model: str | None) -> list[dict]:
    update = dict_at(dict_at(rec, "params"), "update")
    usage = update.get("usage")
    if not isinstance(usage, dict):
        return []
    turn = nonempty(update.get("prompt_id")) or line_hash
    ts = rec.get("timestamp")
    when = (
        datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")
        if isinstance(ts, int | float) and 0 < ts < 1e11
        else base["ts"]
    )
    per_model = usage.get("modelUsage")
    rows = (
        [(m, u) for m, u in per_model.items() if isinstance(u, dict)]
        if isinstance(per_model, dict) and per_model
        else [(model or "grok-unknown", usage)]
    )
    out: list[dict] = []
    for m, u in rows:
        cached = as_int(u.get("cachedReadTokens")) or 0
        ticks = as_int(u.get("costUsdTicks"))
        out.append(
            dict(
                base,
                part=len(out),
                ts=when,
                role="system",
                kind="meta",
                tool_name="usage",
                model=m,
                text=f"usage {m}",
                input_tokens=max((as_int(u.get("inputTokens")) or 0) - cached, 0),
                output_tokens=as_int(u.get("outputTokens")) or 0,
                cache_read_tokens=cached,
                cache_creation_tokens=0,
                reasoning_tokens=as_int(u.get("reasoningTokens")) or 0,
                cost_usd=ticks / 1e10 if ticks is not None and ticks >= 0 else None,
                usage_key=f"grok:{sid}:{turn}:{m}",
            )
        )
    return out


#: new lines of one session's chat_history.jsonl or updates.jsonl into entry dicts
#: the files beside ``chat_history.jsonl`` the vault keeps with it (``readers.sidecar``)
SIDECARS = {"summary.json": "session-meta", "signals.json": "signals"}


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecars of ``chat_history.jsonl`` at ``path`` (``SIDECARS``) on disk."""
    return sidecar.beside(AGENT, path, SIDECARS) if path.name == "chat_history.jsonl" else []


def mode_for(path: Path) -> FileMode:
    """``rewrite`` for a sidecar (``SIDECARS``), else ``append``."""
    return sidecar.MODE if path.name in SIDECARS else MODE


#: new lines of a transcript into entry dicts; a sidecar whole, for the vault
read = sidecar.reading(record_reader(PARSER_VERSION, parse_record, init_state), PARSER_VERSION)
