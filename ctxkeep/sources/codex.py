"""OpenAI Codex CLI rollouts.

Where: ``$CODEX_HOME`` or ``~/.codex``: ``sessions/YYYY/MM/DD/rollout-*.jsonl`` and
``archived_sessions/**/rollout-*.jsonl``.

Format facts (real rollouts in ``shared/corpus``, Codex 0.34–0.70, plus a synthetic
0.146 fixture): each line is ``{timestamp, type, payload}`` with ``type``:

- ``session_meta`` (``payload.id`` the session; ``cwd``, ``cli_version``,
  ``originator``; a rollout may hold several: sub-agent threads and forks, marked by
  ``forked_from_id``/``parent_thread_id``);
- ``turn_context`` (``cwd``, ``model``; absent before ~0.40);
- ``response_item`` with ``payload.type`` ``message`` (content blocks
  ``input_text``/``output_text``), ``reasoning`` (``summary[].text``; the
  ``encrypted_content`` is never stored), ``function_call`` (``arguments`` is a JSON
  *string*), ``function_call_output``, ``custom_tool_call``(``_output``),
  ``local_shell_call``, ``web_search_call`` …;
- ``event_msg``: ``token_count`` (``info.total_token_usage`` is cumulative per session,
  ``info`` may be null; from 0.146 it counts ``cache_write_input_tokens`` too, a part
  of ``input_tokens``: stored as the cache write, ``_TOTAL_KEYS``; ccusage's Codex
  reader, apps/codex/src/data-loader.ts, reads no such field and keeps it in its
  input), ``user_message``/``agent_message``/``agent_reasoning``
  (repeat the response_items: not stored twice), and many UI events;
- ``compacted`` (``payload.message``: the summary that replaced the history).

Older generations, read too (issue 25; peers' readers and tests describe them):

- the pre-envelope rollout (codex-cli before the Rust ``{timestamp, type, payload}``
  envelope, ≤ ~Sept 2025): line 1 is a bare header ``{id, timestamp, instructions,
  git}`` (no ``type``), then bare response items (``{"type": "message", "role", "content"}``,
  ``reasoning``, ``function_call`` …, no per-line timestamp) and ``{"record_type":
  "state"}`` bookkeeping lines (nothing to store); the working directory only appears
  in the ``<environment_context>``'s ``<cwd>`` of the first user message. Sources: the
  header/state/bare-item shapes as parsers of the format list them (a TypeScript
  reader's "Legacy (early codex-cli, pre-rollout-event)" variant; a Rust reader's
  ``test_state_marker_skipped`` and bare ``{"type":"message","id":null,...}`` test line;
  a Go test's legacy ``rollout-2025-09-02T17-17-41-cccc.jsonl``), all found with the
  ``search`` tool;
- a ``response_item`` whose ``payload`` has no ``type``: its kind is told from its keys
  (``role`` + ``content`` a message, ``name`` + ``arguments`` a function call,
  ``call_id`` + ``output`` its output, ``summary`` a reasoning item);
- ``token_count`` ``info.model`` (named by issue 25 from peers' test data; not in the
  corpus): the model of that usage, and of what follows until a ``turn_context``
  names one.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at
from ctxkeep.sources.contract import Discovery, DiscoveryContext, Mode, SourceFile
from ctxkeep.sources.coverage import set_version, unknown
from ctxkeep.sources.readers.jsonl import file_head, record_reader

AGENT = "codex"
#: 3: pre-envelope rollouts, no payload.type, info.model, exit codes as errors;
#: 4: cache writes (``cache_write_input_tokens``)
PARSER_VERSION = 4
MODE: Mode = "append"

_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
#: event_msg types that repeat a response_item in the same rollout
_DUPLICATE_EVENTS = {"user_message", "agent_message", "agent_reasoning", "agent_reasoning_raw_content"}
#: the line types and response item types whose meaning is known (the corpus' real
#: rollouts 0.34-0.70 and Codex's protocol, codex-rs/protocol/src/models.rs
#: ``ResponseItem``): others are stored as ``meta`` entries and named in the coverage
#: ledger as not understood. Event types (``event_msg``) are UI events by design: all
#: are stored as ``meta``
_KNOWN_TYPES = frozenset({"session_meta", "turn_context", "response_item", "event_msg", "compacted"})
_KNOWN_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
        "tool_search_call",
        "tool_search_output",
        "image_generation_call",
        "agent_message",
        "ghost_snapshot",
    }
)
_CONTEXT_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<permissions",
    "<INSTRUCTIONS>",
)


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find rollouts under ``$CODEX_HOME`` (or ``~/.codex``) and configured dirs."""
    d = Discovery(AGENT)
    root = ctx.env_dir("CODEX_HOME", ctx.home / ".codex")
    for base in [root / "sessions", root / "archived_sessions"] + list(ctx.extra_dirs):
        archived = {"archived": base.name == "archived_sessions"}

        def meta(p: Path, a: dict = archived) -> dict:
            return dict(a)

        d.add_glob(base, ["**/rollout-*.jsonl"], MODE, meta)
    d.explain_empty(root, f"no rollout-*.jsonl under {root}/sessions")
    return d


def matches(path: Path) -> bool:
    """True when an explicit ``--path`` file looks like a Codex rollout (either
    envelope generation)."""
    head = file_head(path, (".jsonl",), 4096)
    return (
        b'"type":"session_meta"' in head
        or b'"type":"response_item"' in head
        or b'"record_type":"state"' in head
        or (path.name.startswith("rollout-") and b'"instructions"' in head)
    )


_CWD_RE = re.compile(r"<cwd>\s*([^<\n]+?)\s*</cwd>")


def _infer_item_type(p: dict) -> str | None:
    """The ``type`` of a response item written without one, told from its keys."""
    if "role" in p and "content" in p:
        return "message"
    if "name" in p and "arguments" in p:
        return "function_call"
    if "call_id" in p and "output" in p:
        return "function_call_output"
    if "summary" in p or "encrypted_content" in p:
        return "reasoning"
    return None


def init_state(file: SourceFile) -> dict:
    """The parser state at offset 0 of ``file``: the session id from the rollout's
    file name (the last UUID in it), else the file stem."""
    m = _UUID_RE.findall(file.path.name)
    return {"sid": m[-1] if m else file.path.stem}


def _text_blocks(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out = []
    for b in content:
        if isinstance(b, dict):
            if isinstance(b.get("text"), str):
                out.append(b["text"])
            elif b.get("type") in ("input_image", "image"):
                url = b.get("image_url") or ""
                out.append(f"[image {len(url) * 3 // 4:,} bytes]" if url else "[image]")
    return "\n".join(out)


def _decode_arguments(args):
    """A function_call's ``arguments`` JSON string decoded; shell commands as text."""
    val = args
    if isinstance(args, str):
        try:
            val = orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    if isinstance(val, dict) and "command" in val:
        cmd = val["command"]
        text = " ".join(map(str, cmd)) if isinstance(cmd, list) else str(cmd)
        rest = {k: v for k, v in val.items() if k != "command"}
        return text + ("\n" + compact_json(rest) if rest else "")
    return compact_json(val) if not isinstance(val, str) else val


#: a shell result's non-zero exit, as Codex writes it at the head of a plain-text
#: output: ``Exit code: 2\nWall time: …\nOutput:`` (0.5x+ unified exec), and
#: ``failed in sandbox LinuxSeccomp with execution error: … exit code: 2, stdout: …``
#: (a sandboxed command that failed; 0.5x)
_EXIT_HEAD = re.compile(r"(?:Exit code: |failed in sandbox [^\n]{0,200}?exit code: )(-?\d+)")


def _decode_output(out) -> tuple[str, bool]:
    """A tool result's text and whether it failed: ``(text, failed)``.

    ``failed`` is a non-zero exit code: ``metadata.exit_code`` of the JSON string older
    rollouts write (``{"output": "...", "metadata": {"exit_code": 127,
    "duration_seconds": 0.1}}``, Codex 0.34–0.46 in shared/corpus), or the
    ``_EXIT_HEAD`` line of a plain-text output. A failed result is stored with the
    ``[error] `` prefix every source uses for a failed tool result (Claude Code
    ``is_error``), which the readers (``report tools``, ``show``'s error flag,
    resume's last failure) go by."""
    if isinstance(out, str):
        if out.startswith("{") and '"output"' in out:
            try:
                val = orjson.loads(out)
                if isinstance(val, dict) and isinstance(val.get("output"), str):
                    meta = val.get("metadata")
                    code = meta.get("exit_code") if isinstance(meta, dict) else None
                    return val["output"], isinstance(code, int) and not isinstance(code, bool) and code != 0
            except orjson.JSONDecodeError:
                pass
        m = _EXIT_HEAD.match(out)
        return out, bool(m and int(m.group(1)) != 0)
    if isinstance(out, list):
        return _text_blocks(out), False
    if isinstance(out, dict):
        if isinstance(out.get("content"), str):
            return out["content"], False
        return compact_json(out), False
    return ("" if out is None else str(out)), False


def parse_record(rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]:
    """Map one rollout line to entry dicts (keys of ``SOURCE_SCHEMA``).

    ``state`` carries the session id (first ``session_meta``), the origin of replayed
    records (latest ``session_meta``), cwd, model and the last cumulative token totals.
    Usage comes from ``token_count`` events as the delta between cumulative totals;
    its ``usage_key`` names the origin session and the cumulative total, so a total
    re-emitted unchanged, or replayed from a parent rollout, counts once.
    """
    rtype = rec.get("type")
    p = dict_at(rec, "payload")
    if "payload" not in rec:  # the pre-envelope generation
        if rec.get("record_type") == "state":
            return []  # bookkeeping: nothing to store
        if rtype is None and "id" in rec and "timestamp" in rec:
            rtype, p = "session_meta", rec  # the bare header line
        elif rtype in _KNOWN_ITEMS:
            rtype, p = "response_item", rec  # a bare response item
    if rtype == "response_item" and "type" not in p:
        inferred = _infer_item_type(p)
        if inferred:
            p = dict(p, type=inferred)
    ts = rec.get("timestamp")
    if isinstance(ts, str) and ts[:2].isdigit():
        state["ts"] = ts
    else:
        ts = state.get("ts")
    if rtype not in _KNOWN_TYPES:
        unknown(state, rtype)
    elif rtype == "response_item" and p.get("type") not in _KNOWN_ITEMS:
        unknown(state, f"response_item:{p.get('type')}")
    if rtype == "session_meta":
        set_version(state, p.get("cli_version"))
        mid = p.get("id") or p.get("session_id")
        if isinstance(mid, str) and mid:
            if not state.get("meta_seen"):
                state["sid"] = mid
            state["origin"] = mid
            state["meta_seen"] = True
        if isinstance(p.get("cwd"), str):
            state["cwd"] = p["cwd"]
    elif rtype == "turn_context":
        if isinstance(p.get("cwd"), str):
            state["cwd"] = p["cwd"]
        if isinstance(p.get("model"), str):
            state["model"] = p["model"]
    sid = state.get("sid")
    origin = state.get("origin") or sid
    base = {
        "agent": AGENT,
        "session_id": sid,
        "parent_session_id": origin if origin != sid else None,
        "project_dir": state.get("cwd"),
        "ts": ts,
        "model": state.get("model"),
        "is_sidechain": False,
        "source_path": src,
        "source_offset": offset,
        "record_id": f"{origin}:{line_hash}",
        "part": 0,
    }
    if rtype == "response_item":
        if not state.get("cwd") and p.get("type") == "message" and p.get("role") == "user":
            m = _CWD_RE.search(_text_blocks(p.get("content")))
            if m:  # the pre-envelope generation names its cwd only here
                state["cwd"] = base["project_dir"] = m.group(1)
        return [_response_item(p, base)]
    if rtype == "event_msg":
        et = p.get("type")
        if et in _DUPLICATE_EVENTS:
            return []
        if et == "token_count":
            return [_token_count(p, base, state, origin)]
        text_v = p.get("message")
        text = text_v if isinstance(text_v, str) else ""
        return [dict(base, role="system", kind="meta", tool_name=et, text=text)]
    if rtype == "compacted":
        return [dict(base, role="system", kind="summary", text=str(p.get("message") or ""))]
    if rtype == "session_meta":
        cli = p.get("cli_version")
        text = f"Codex session {p.get('id')} in {p.get('cwd')} (cli {cli}, {p.get('originator')})"
        return [dict(base, role="system", kind="meta", tool_name=rtype, native_id=p.get("id"), text=text)]
    return [dict(base, role="system", kind="meta", tool_name=rtype, text="")]


def _response_item(p: dict, base: dict) -> dict:
    it = p.get("type")
    if it == "message":
        role = p.get("role") or "assistant"
        role = "system" if role == "developer" else role
        text = _text_blocks(p.get("content"))
        kind = "meta" if text.lstrip().startswith(_CONTEXT_PREFIXES) else "message"
        return dict(base, role=role, kind=kind, native_id=p.get("id"), text=text)
    if it == "reasoning":
        parts = [s.get("text", "") for s in (p.get("summary") or []) if isinstance(s, dict)]
        if not any(parts):
            parts = [c.get("text", "") for c in (p.get("content") or []) if isinstance(c, dict)]
        return dict(
            base,
            role="assistant",
            kind="thinking",
            native_id=p.get("id"),
            text="\n".join(x for x in parts if isinstance(x, str)),
        )
    if it in ("function_call", "custom_tool_call"):
        args = p.get("arguments") if it == "function_call" else p.get("input")
        return dict(
            base,
            role="assistant",
            kind="tool_call",
            tool_name=p.get("name"),
            native_id=p.get("call_id") or p.get("id"),
            text=_decode_arguments(args),
        )
    if it in ("function_call_output", "custom_tool_call_output", "tool_search_output"):
        text, failed = _decode_output(p.get("output"))
        return dict(
            base,
            role="tool",
            kind="tool_result",
            native_id=p.get("call_id"),
            text="[error] " + text if failed else text,
        )
    if it in ("local_shell_call", "web_search_call", "tool_search_call", "image_generation_call"):
        action = p.get("action") or {k: v for k, v in p.items() if k not in ("type", "result")}
        return dict(
            base,
            role="assistant",
            kind="tool_call",
            tool_name=it,
            native_id=p.get("call_id") or p.get("id"),
            text=_decode_arguments(action),
        )
    if it == "agent_message":
        return dict(
            base,
            role="assistant",
            kind="message",
            text=_text_blocks(p.get("content")) or str(p.get("message") or ""),
        )
    return dict(base, role="system", kind="meta", tool_name=it, text="")


_TOTAL_KEYS = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
    # Codex 0.146.0 (the corpus's rollout-2026-07-01T00-00-00-fixture-small.jsonl, where it
    # is 0): the input tokens written to the prompt cache, a part of ``input_tokens`` as
    # the cached read is (``total_tokens`` = input + output there; readers of the
    # rollouts take it out of the uncached input the same way). openai/codex's
    # codex-rs/protocol/src/protocol.rs as the ``search`` index holds it (commit
    # edb4efee49ae) predates the field, so its shape is from the rollout; older
    # rollouts lack it (0). Kept out of the usage key (``_token_count``)
    "cache_write_input_tokens",
)
#: the counters a usage key names (parser 3's: a re-read keeps every stored key)
_KEY_COUNTERS = 5


def _token_count(p: dict, base: dict, state: dict, origin: str | None) -> dict:
    e = dict(base, role="system", kind="meta", tool_name="token_count", text="")
    info = p.get("info")
    if isinstance(info, dict) and isinstance(info.get("model"), str) and info["model"]:
        e["model"] = info["model"]
        state.setdefault("model", info["model"])
    if not isinstance(info, dict) or not isinstance(info.get("total_token_usage"), dict):
        return e
    tot = info["total_token_usage"]
    cur = [as_int(tot.get(k)) or 0 for k in _TOTAL_KEYS]
    # cumulative totals are per thread: a rollout holding several session_meta lines
    # (sub-agent threads, a fork's replayed parent) keeps one running total per origin
    totals = state.get("totals")
    if not isinstance(totals, dict):
        totals = state["totals"] = {}
    last = list(totals.get(origin) or [])
    last += [0] * (len(_TOTAL_KEYS) - len(last))  # (a state of parser 3: five counters)
    totals[origin] = cur
    delta = [c - p for c, p in zip(cur, last, strict=False)]
    if any(x < 0 for x in delta):  # totals restarted: take this turn's own usage
        lt = info.get("last_token_usage") or {}
        delta = [as_int(lt.get(k)) or 0 for k in _TOTAL_KEYS]
    if not any(delta):
        return e  # a total re-emitted unchanged (or an all-zero count) adds nothing
    inp, cached, out, reasoning, _total, written = delta
    written = max(min(written, inp - cached), 0)
    e.update(
        input_tokens=max(inp - cached - written, 0),
        cache_read_tokens=cached,
        output_tokens=out,
        reasoning_tokens=reasoning,
        cache_creation_tokens=written,
        usage_key=f"codex:{origin}:" + ":".join(map(str, cur[:_KEY_COUNTERS])),
    )
    return e


#: new lines of one rollout into entry dicts (``parse_record``)
read = record_reader(PARSER_VERSION, parse_record, init_state)
