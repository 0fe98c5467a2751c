"""Qwen Code (QwenLM/qwen-code) chat recordings.

Where: ``$QWEN_HOME`` (Qwen Code's override of the whole ``~/.qwen`` dir,
``getGlobalQwenDir()``) else ``~/.qwen`` (all platforms); and ``$QWEN_RUNTIME_DIR``
when set (the runtime base for ephemeral data). Current layout:
``projects/<sanitized cwd>/chats/<session id>.jsonl`` (append-only JSONL). Older
releases (a Gemini CLI fork) wrote Gemini's JSON documents under
``tmp/<project hash>/chats/session-*.json``; those are read with the Gemini CLI
document mapping (``gemini_cli.parse_document``) under the agent name ``qwen-code``.

JSONL record (``ChatRecord`` in packages/core/src/services/chatRecordingService.ts):
``{uuid, parentUuid, sessionId, timestamp, type: user|assistant|tool_result|system,
subtype?, cwd, version, gitBranch?, message?: {role, parts[]}, usageMetadata?,
model?, toolCallResult?, systemPayload?, agentId?, isSidechain?}``. ``parts`` are
Gemini API parts: ``text`` (``thought: true`` = thinking), ``functionCall {id, name,
args}``, ``functionResponse {id, name, response}``, ``inlineData``. ``system`` records
(chat_compression, slash_command, ui_telemetry, rewind, custom_title, …) become
``meta`` entries (``chat_compression`` a ``summary``).

Records that are not the user's words (Qwen Code 0.x, ``ChatRecord`` and
packages/core/src/utils/transcript-records.ts): ``type: user`` records with
``subtype`` ``notification``/``cron``/``background_task_completed`` (a background
task's note, ``systemPayload.displayText``) become ``system``/``meta`` entries named
by the subtype, never prompts; a text part that is wholly a UserPromptSubmit hook's
context block (``<qwen:user-prompt-submit-context>\n…\n</qwen:user-prompt-submit-context>``,
``isUserPromptSubmitContextPartText``) becomes a ``meta`` entry ``hook_context``. A
``system`` record ``custom_title`` (``systemPayload.customTitle``, from ``/rename``)
becomes the session's title (a ``meta`` entry named ``session``, the title convention
of ``sinks.duckdb``). A ``system`` record ``rewind`` (``/rewind``,
``rewindRecording``: its ``parentUuid`` re-roots the chain at the record before the
turn rewound to) marks every record of the active chain after that parent
``rewound`` (``Batch.status_changes``; the chain is kept in the watermark state, its
last ``CHAIN_MAX`` uuids).

Usage: ``usageMetadata`` (the Gemini API's GenerateContentResponseUsageMetadata) on
assistant records, mapped like Gemini CLI's tokens: ``input_tokens =
promptTokenCount - cachedContentTokenCount``, ``cache_read_tokens =
cachedContentTokenCount``, ``output_tokens = candidatesTokenCount``,
``reasoning_tokens = thoughtsTokenCount``; ``usage_key`` = the record's uuid. The corpus
holds no Qwen file; the fixture in tests/fixtures/qwen-code/ is built from that type.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ctxkeep.sources import gemini_cli
from ctxkeep.sources._util import as_int, compact_json, media_placeholder
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
from ctxkeep.sources.coverage import set_version, unknown
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "qwen-code"
PARSER_VERSION = 2  # 2: rewinds, custom titles, notifications and hook context
MODE: Mode = "append"

#: uuids of the active chain kept in the parser state (a rewind further back than
#: this marks only what is kept)
CHAIN_MAX = 5000
#: ``type: user`` subtypes that are not the user's words (``ChatRecord.subtype``)
_NOT_TYPED = frozenset({"notification", "cron", "background_task_completed"})
_HOOK_OPEN = "<qwen:user-prompt-submit-context>"
_HOOK_CLOSE = "</qwen:user-prompt-submit-context>"
#: the ``system`` subtypes of ``ChatRecord`` (QwenLM/qwen-code
#: packages/core/src/services/chatRecordingService.ts); others are named in the
#: coverage ledger as not understood
_KNOWN_SUBTYPES = frozenset(
    [
        "session_notes",
        "chat_compression",
        "slash_command",
        "ui_telemetry",
        "at_command",
        "attribution_snapshot",
        "notification",
        "background_task_completed",
        "cron",
        "mid_turn_user_message",
        "custom_title",
        "parent_session",
        "session_source",
        "session_execution_engine",
        "omni_recall",
        "session_model",
        "session_approval_mode",
        "rewind",
        "agent_bootstrap",
        "agent_launch_prompt",
        "agent_retry",
        "agent_session_ready",
        "file_history_snapshot",
        "user_text_elements",
        "session_artifact_event",
        "session_artifact_snapshot",
        "session_sources_snapshot",
        "branch_checkpoint",
        "goal_state",
        "goal_runtime",
        "goal_turn_end",
        "realtime_message",
        "turn_result",
    ]
)


def is_hook_context(text: str) -> bool:
    """True when ``text`` is wholly one UserPromptSubmit hook context block (Qwen
    Code's ``isUserPromptSubmitContextPartText``: the open tag and a newline first, a
    newline and the close tag last, neither tag inside)."""
    t = text.strip()
    if not (t.startswith(_HOOK_OPEN + "\n") and t.endswith("\n" + _HOOK_CLOSE)):
        return False
    body = t[len(_HOOK_OPEN) + 1 : -len(_HOOK_CLOSE) - 1]
    return _HOOK_OPEN not in body and _HOOK_CLOSE not in body


def mode_for(path: Path) -> FileMode:
    """``append`` for JSONL, ``rewrite`` for the old JSON documents."""
    return "append" if path.suffix == ".jsonl" else "rewrite"


def qwen_roots(ctx: DiscoveryContext) -> list[Path]:
    """``$QWEN_HOME`` (else ``~/.qwen``) and ``$QWEN_RUNTIME_DIR`` when set."""
    roots = [ctx.env_dir("QWEN_HOME", ctx.home / ".qwen")]
    if ctx.env.get("QWEN_RUNTIME_DIR"):
        roots.append(Path(ctx.env["QWEN_RUNTIME_DIR"]).expanduser())
    return roots


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``projects/*/chats/*.jsonl`` and legacy ``tmp/*/chats/session-*.json`` under
    the Qwen roots; a configured dir may also be a ``chats`` or ``projects`` dir."""
    d = Discovery(AGENT)
    roots = qwen_roots(ctx)
    extra = set(ctx.extra_dirs)
    for root in roots + list(ctx.extra_dirs):
        pats = ["projects/*/chats/*.jsonl", "tmp/*/chats/session-*.json", "tmp/*/chats/session-*.jsonl"]
        if root in extra:  # a configured dir may be a chats dir itself
            pats += ["*.jsonl", "*/chats/*.jsonl"]
        d.add_glob(root, pats, mode_for)
    d.explain_empty(roots[0], f"no projects/*/chats/*.jsonl under {roots[0]}")
    return d


def matches(path: Path) -> bool:
    """True for a Qwen Code chat JSONL given with ``--path``."""
    head = file_head(path, (".jsonl",), 4096)
    return b'"parentUuid"' in head and b'"parts"' in head and b'"sessionId"' in head


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one chat file (JSONL from its offset; an old JSON document whole)."""
    if file.path.suffix != ".jsonl":
        old_ids = list(
            (wm.state.get("ids") or []) if wm is not None and wm.parser_version == PARSER_VERSION else []
        )

        def parse_doc(raw, doc, state, idle):
            out = gemini_cli.parse_document(raw, doc, state, file, old_ids)
            for e in out:
                e["agent"] = AGENT
            for ch in state.get("_status_changes", []):
                ch["agent"] = AGENT
            return out

        return read_document(file, wm, PARSER_VERSION, parse_doc, batch_bytes)
    return _read_records(file, wm, batch_bytes)


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Map one ChatRecord to entry dicts: one per part (text, thought, function call or
    response); usage on the first entry of an assistant record."""
    sid = str(rec.get("sessionId") or state.get("sid") or Path(src).stem)
    state["sid"] = sid
    if rec.get("cwd"):
        state["cwd"] = rec["cwd"]
    uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
    rtype = rec.get("type")
    sub = rec.get("subtype") if isinstance(rec.get("subtype"), str) else None
    side = bool(rec.get("isSidechain"))
    set_version(state, rec.get("version"))
    if rtype not in ("user", "assistant", "tool_result", "system"):
        unknown(state, rtype)
    elif sub is not None and sub not in _KNOWN_SUBTYPES:
        unknown(state, f"{rtype}:{sub}")
    if not side and uuid:
        _follow_chain(rec, uuid, sub, sid, state)
    base = {
        "agent": AGENT,
        "session_id": f"{sid}/agent-{rec['agentId']}" if side and rec.get("agentId") else sid,
        "parent_session_id": sid if side and rec.get("agentId") else None,
        "native_id": uuid,
        "parent_id": rec.get("parentUuid"),
        "project_dir": rec.get("cwd") or state.get("cwd"),
        "ts": rec.get("timestamp") if isinstance(rec.get("timestamp"), str) else None,
        "model": rec.get("model") if isinstance(rec.get("model"), str) else None,
        "is_sidechain": side,
        "source_path": src,
        "source_offset": offset,
        "record_id": uuid or f"{sid}:{line_hash}",
        "message_id": uuid,
    }
    out: list[dict] = []
    msg_v = rec.get("message")
    msg = msg_v if isinstance(msg_v, dict) else None
    payload_v = rec.get("systemPayload")
    payload = payload_v if isinstance(payload_v, dict) else {}
    if rtype == "user" and sub in _NOT_TYPED:
        shown = payload.get("displayText")
        text = shown if isinstance(shown, str) else gemini_cli._parts_text((msg or {}).get("parts"))
        out.append(dict(base, role="system", kind="meta", tool_name=sub, text=text))
    elif rtype in ("user", "assistant", "tool_result") and msg is not None:
        role = "assistant" if rtype == "assistant" else "user"
        for p in msg.get("parts") or []:
            if not isinstance(p, dict):
                continue
            if isinstance(p.get("text"), str):
                if role == "user" and is_hook_context(p["text"]):
                    out.append(
                        dict(base, role="system", kind="meta", tool_name="hook_context", text=p["text"])
                    )
                    continue
                out.append(
                    dict(base, role=role, kind="thinking" if p.get("thought") else "message", text=p["text"])
                )
            elif isinstance(p.get("functionCall"), dict):
                fc = p["functionCall"]
                out.append(
                    dict(
                        base,
                        role="assistant",
                        kind="tool_call",
                        tool_name=fc.get("name"),
                        native_id=fc.get("id") or uuid,
                        text=compact_json(fc.get("args")),
                    )
                )
            elif isinstance(p.get("functionResponse"), dict):
                fr = p["functionResponse"]
                out.append(
                    dict(
                        base,
                        role="tool",
                        kind="tool_result",
                        tool_name=fr.get("name"),
                        native_id=fr.get("id") or uuid,
                        text=gemini_cli._function_response_text(fr),
                    )
                )
            elif isinstance(p.get("inlineData"), dict):
                inl = p["inlineData"]
                out.append(
                    dict(
                        base,
                        role=role,
                        kind="message",
                        text=media_placeholder("media", inl.get("mimeType"), len(inl.get("data") or "")),
                    )
                )
            else:
                out.append(dict(base, role=role, kind="meta", text=compact_json(p, 2000)))
        if rtype == "tool_result" and not out and isinstance(rec.get("toolCallResult"), dict):
            tcr = rec["toolCallResult"]
            disp = tcr.get("resultDisplay")
            out.append(
                dict(
                    base,
                    role="tool",
                    kind="tool_result",
                    native_id=tcr.get("callId") or uuid,
                    text=disp if isinstance(disp, str) else compact_json(disp, 4000),
                )
            )
        if not out:
            out.append(dict(base, role=role, kind="meta", text=""))
    elif rtype == "system" and sub == "custom_title" and isinstance(payload.get("customTitle"), str):
        # the session's title: a ``session`` meta entry (the title convention of sinks.duckdb)
        out.append(dict(base, role="system", kind="meta", tool_name="session", text=payload["customTitle"]))
    elif rtype == "system":
        sub = sub or "system"
        kind = "summary" if sub == "chat_compression" else "meta"
        text = ""
        if payload:
            if sub == "chat_compression" and isinstance(payload.get("compressedHistory"), list):
                text = "\n".join(
                    gemini_cli._parts_text(c.get("parts"))
                    for c in payload["compressedHistory"]
                    if isinstance(c, dict)
                )
            else:
                for k in ("displayText", "customTitle", "rawCommand", "content", "message"):
                    if isinstance(payload.get(k), str):
                        text = payload[k]
                        break
                else:
                    text = compact_json(payload, 2000)
        out.append(dict(base, role="system", kind=kind, tool_name=sub, text=text))
    else:
        out.append(dict(base, role="system", kind="meta", tool_name=str(rtype), text=compact_json(rec, 2000)))
    for i, e in enumerate(out):
        e["part"] = i
    um = rec.get("usageMetadata")
    if rtype == "assistant" and isinstance(um, dict):
        first = out[0]
        prompt = as_int(um.get("promptTokenCount")) or 0
        cached = as_int(um.get("cachedContentTokenCount")) or 0
        first["input_tokens"] = max(prompt - cached, 0)
        first["output_tokens"] = as_int(um.get("candidatesTokenCount")) or 0
        first["cache_read_tokens"] = cached
        first["cache_creation_tokens"] = 0
        first["reasoning_tokens"] = as_int(um.get("thoughtsTokenCount")) or 0
        first["usage_key"] = f"qwen:{base['record_id']}"
    return out


def _follow_chain(rec: dict, uuid: str, sub: str | None, sid: str, state: dict) -> None:
    """Keep the active chain's uuids in ``state["chain"]``; at a ``rewind`` record,
    mark the records of the chain after its ``parentUuid`` (all of them for a null
    parent) ``rewound`` (``state["_status_changes"]``, see ``Batch.status_changes``)."""
    chain = state.setdefault("chain", [])
    if sub == "rewind":
        parent = rec.get("parentUuid")
        if parent is None:
            cut = 0
        elif parent in chain:
            cut = len(chain) - chain[::-1].index(parent)
        else:
            cut = None  # further back than the chain kept: nothing is marked
        if cut is not None and chain[cut:]:
            state.setdefault("_status_changes", []).append(
                {"agent": AGENT, "session_id": sid, "message_ids": list(chain[cut:]), "status": "rewound"}
            )
            del chain[cut:]
    chain.append(uuid)
    if len(chain) > CHAIN_MAX:
        del chain[: len(chain) - CHAIN_MAX]


_read_records = record_reader(PARSER_VERSION, parse_record)
