"""OpenHands (All-Hands-AI/OpenHands CLI and agent SDK) conversations.

Where (every platform): ``$OH_CONVERSATIONS_PATH`` else ``~/.openhands/conversations``
(a cloud sync's copies under ``~/.openhands/cloud/conversations`` too), one folder per
conversation: ``<id>/base_state.json`` (rewritten) and ``<id>/events/*.json`` (one
small JSON file per event, added as the conversation goes). Sources: wesm/agentsview
0.46 ``internal/parser/openhands.go`` (the folder, the event kinds and fields), public
tools' notes and fixtures (``~/.openhands/conversations/``, ``OH_CONVERSATIONS_PATH``;
``base_state.json`` ``stats.usage_to_metrics.agent.token_usages[]``).

One conversation is the unit (like a session of sst/opencode's JSON tree): the
discovered file is its ``base_state.json`` (mode ``rewrite``); its change test (``unchanged``) is a
fingerprint of the names, sizes and mtimes of ``base_state.json`` and ``events/*.json``;
a changed conversation is read again whole and its entries dedup by stable ids
(``<conversation>:<event id>``). The vault keeps ``base_state.json`` as a document;
the event files are not captured (a reparse from the vault needs them on disk).

``base_state.json``: ``{id, agent: {llm: {model}}, workspace: {working_dir | cwd |
path …}, stats: {usage_to_metrics: {agent: {model_name, accumulated_cost,
token_usages: [{model, prompt_tokens, completion_tokens, cache_read_tokens,
cache_write_tokens, reasoning_tokens, response_id}]}}}}``. An event: ``{id, timestamp
(ISO, no zone: UTC assumed), source, kind}`` with ``kind``:

- ``MessageEvent``: ``llm_message {role: user|assistant, content (text or [{type:
  text, text}])}``, ``thinking_blocks[{thinking}]`` or ``reasoning_content``,
  ``llm_response_id``;
- ``ActionEvent``: ``tool_name`` (or ``tool_call.name``), ``tool_call {id?, arguments
  (JSON text)}``, ``action`` (the parsed arguments), ``thought`` (text parts),
  ``tool_call_id``, ``llm_response_id``;
- ``ObservationEvent``: ``observation {content | command, detail; metadata.working_dir}``,
  ``tool_call_id``, ``tool_name``.

Other kinds (system prompts, state updates, pauses …) become ``meta`` entries named
by their kind, and the coverage ledger names them as not understood. Usage: one row per
``token_usages`` item (``usage_key`` ``openhands:<conversation>:<response_id>``; input =
``prompt_tokens - cache_read_tokens``), timed by the event that carries its
``llm_response_id``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import orjson

from ctxkeep.sources._util import as_int, compact_json, dict_at
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    RawCapture,
    SourceFile,
    Watermark,
    quarantine_row,
)
from ctxkeep.sources.coverage import Tally
from ctxkeep.sources.readers.jsonl import open_file

AGENT = "openhands"
PARSER_VERSION = 1
MODE: Mode = "rewrite"  # base_state.json, rewritten in place; the change test covers the events

_KINDS = frozenset({"MessageEvent", "ActionEvent", "ObservationEvent"})
_CWD_KEYS = ("working_dir", "cwd", "path", "mount_path", "root", "repo_path", "repo_root")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """``$OH_CONVERSATIONS_PATH`` else ``~/.openhands/conversations``, and the cloud
    sync's ``~/.openhands/cloud/conversations``."""
    main = ctx.env_dir("OH_CONVERSATIONS_PATH", ctx.home / ".openhands" / "conversations")
    return [main, ctx.home / ".openhands" / "cloud" / "conversations"]


def discover(ctx: DiscoveryContext) -> Discovery:
    """One file per conversation folder holding ``events/``: its ``base_state.json``."""
    d = Discovery(AGENT)
    rs = roots(ctx)
    for base in rs + list(ctx.extra_dirs):
        d.searched.append(base)
        if not base.is_dir():
            continue
        for p in sorted(base.glob("*/base_state.json")):
            if (p.parent / "events").is_dir():
                d.add(p, MODE)
    d.explain_empty(rs[0], f"no */base_state.json with events/ under {rs[0]}")
    return d


def matches(path: Path) -> bool:
    """True for a conversation's ``base_state.json`` (an ``events`` folder beside it)."""
    return path.name == "base_state.json" and (path.parent / "events").is_dir()


def _event_files(file: SourceFile) -> list[Path]:
    try:
        return sorted((file.path.parent / "events").glob("*.json"))
    except OSError:
        return []


def fingerprint(file: SourceFile) -> str:
    """SHA-256 over (name, size, mtime_ns) of ``base_state.json`` and every event file."""
    h = hashlib.sha256()
    for p in [file.path, *_event_files(file)]:
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p.name}\x1f{st.st_size}\x1f{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def unchanged(file: SourceFile, wm: Watermark | None) -> bool:
    """The conversation's fingerprint is the one stored."""
    if wm is None or wm.parser_version != PARSER_VERSION:
        return False
    try:
        return wm.state.get("fp") == fingerprint(file)
    except OSError:
        return False


def _load(path: Path, quarantine: list, keep: list | None = None) -> dict | None:
    opened = open_file(path)
    if opened is None:
        return None
    f, _st = opened
    with f:
        raw = f.read(16 * 1024 * 1024 + 1)
    if keep is not None:
        keep.append(raw)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        quarantine.append(quarantine_row(path, 0, raw, f"malformed JSON: {e}"))
        return None
    if not isinstance(obj, dict):
        quarantine.append(quarantine_row(path, 0, raw, f"not a JSON object ({type(obj).__name__})"))
        return None
    return obj


def _ts(v) -> str | None:
    """ISO text as OpenHands writes it (naive: UTC assumed) with a ``Z``."""
    if not isinstance(v, str) or not v[:2].isdigit():
        return None
    return v if v.endswith("Z") or "+" in v[10:] else v + "Z"


def _text(content) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "\n".join(str(b.get("text") or "") for b in content if isinstance(b, dict) and "text" in b)


def _thinking(ev: dict) -> str:
    tb = ev.get("thinking_blocks")
    blocks: list = tb if isinstance(tb, list) else []
    parts = [str(b.get("thinking") or "").strip() for b in blocks if isinstance(b, dict)]
    text = "\n\n".join(p for p in parts if p)
    return text or (ev["reasoning_content"].strip() if isinstance(ev.get("reasoning_content"), str) else "")


def _cwd(base_state: dict) -> str | None:
    ws = dict_at(base_state, "workspace")
    for k in _CWD_KEYS:
        v = ws.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def event_entries(ev: dict, base: dict, tally: Tally, raw: bytes) -> list[dict]:
    """Entry dicts of one event (see the module doc); counted in ``tally``."""
    kind = ev.get("kind")
    out: list[dict] = []
    if kind == "MessageEvent":
        msg = dict_at(ev, "llm_message")
        role = msg.get("role") if msg.get("role") in ("user", "assistant", "system") else "system"
        th = _thinking(ev)
        if th:
            out.append(dict(base, role="assistant", kind="thinking", text=th))
        out.append(
            dict(
                base,
                role=role,
                kind="message" if role != "system" else "meta",
                tool_name=None if role != "system" else "system",
                text=_text(msg.get("content")),
            )
        )
    elif kind == "ActionEvent":
        call = dict_at(ev, "tool_call")
        name = ev.get("tool_name") or call.get("name")
        args = call.get("arguments")
        text = args.strip() if isinstance(args, str) and args.strip() else compact_json(ev.get("action"))
        thought = _text(ev.get("thought"))
        th = _thinking(ev)
        if th:
            out.append(dict(base, role="assistant", kind="thinking", text=th))
        if thought:
            out.append(dict(base, role="assistant", kind="message", text=thought))
        out.append(
            dict(
                base,
                role="assistant",
                kind="tool_call",
                tool_name=name,
                native_id=ev.get("tool_call_id") or call.get("id"),
                text=text,
            )
        )
    elif kind == "ObservationEvent":
        obs = dict_at(ev, "observation")
        if "content" in obs:
            text = _text(obs["content"]) if not isinstance(obs["content"], str) else obs["content"]
        else:
            text = "\n".join(str(obs[k]) for k in ("command", "detail") if isinstance(obs.get(k), str))
        if obs.get("is_error") or obs.get("error"):
            text = "[error] " + text
        out.append(
            dict(
                base,
                role="tool",
                kind="tool_result",
                tool_name=ev.get("tool_name"),
                native_id=ev.get("tool_call_id"),
                text=text,
            )
        )
    else:
        rest = {k: v for k, v in ev.items() if k not in ("id", "timestamp", "kind")}
        out.append(dict(base, role="system", kind="meta", tool_name=str(kind), text=compact_json(rest, 2000)))
    for i, e in enumerate(out):
        e["part"] = i
    tally.record(None, len(out), [] if kind in _KINDS else [str(kind)], raw)
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one conversation whole: its events' entries and the usage of
    ``base_state.json``, one batch with the fingerprint's watermark."""
    try:
        st = os.stat(file.path)
    except OSError:
        return
    fp = fingerprint(file)
    quarantine: list[dict] = []
    tally = Tally(reset=True)
    kept: list[bytes] = []
    state = _load(file.path, quarantine, kept) or {}
    sid = state.get("id") if isinstance(state.get("id"), str) and state["id"] else file.path.parent.name
    agent = dict_at(state, "agent")
    llm = dict_at(agent, "llm")
    model = llm.get("model") if isinstance(llm.get("model"), str) else None
    cwd = _cwd(state)
    src = str(file.path)
    entries: list[dict] = []
    response_ts: dict[str, str] = {}
    nbytes = st.st_size
    for p in _event_files(file):
        before = len(quarantine)
        ev = _load(p, quarantine)
        if ev is None:
            if len(quarantine) > before:
                tally.quarantined(None)
            continue
        try:
            nbytes += p.stat().st_size
        except OSError:
            pass
        ts = _ts(ev.get("timestamp"))
        if isinstance(ev.get("llm_response_id"), str) and ts:
            response_ts.setdefault(ev["llm_response_id"], ts)
        base = {
            "agent": AGENT,
            "session_id": sid,
            "native_id": ev.get("id") if isinstance(ev.get("id"), str) else None,
            "project_dir": cwd,
            "ts": ts,
            "model": model,
            "is_sidechain": False,
            "source_path": str(p),
            "source_offset": 0,
            "record_id": f"{sid}:{ev.get('id') or p.stem}",
        }
        if cwd is None:
            obs = dict_at(ev, "observation")
            meta = dict_at(obs, "metadata")
            if isinstance(meta.get("working_dir"), str):
                cwd = base["project_dir"] = meta["working_dir"]
        entries += event_entries(ev, base, tally, orjson.dumps(ev))
    stats = dict_at(state, "stats")
    metrics = dict_at(stats, "usage_to_metrics")
    for who, m in metrics.items():
        tu = m.get("token_usages") if isinstance(m, dict) else None
        usages: list = tu if isinstance(tu, list) else []
        for i, u in enumerate(usages):
            if not isinstance(u, dict):
                continue
            rid = str(u["response_id"]) if isinstance(u.get("response_id"), str) else f"{who}:{i}"
            prompt, cached = as_int(u.get("prompt_tokens")) or 0, as_int(u.get("cache_read_tokens")) or 0
            entries.append(
                {
                    "agent": AGENT,
                    "session_id": sid,
                    "project_dir": cwd,
                    "ts": response_ts.get(rid),
                    "model": u.get("model") if isinstance(u.get("model"), str) else model,
                    "is_sidechain": False,
                    "source_path": src,
                    "source_offset": 0,
                    "record_id": f"{sid}:usage:{rid}",
                    "part": 0,
                    "role": "system",
                    "kind": "meta",
                    "tool_name": "usage",
                    "text": "",
                    "input_tokens": max(prompt - cached, 0),
                    "output_tokens": as_int(u.get("completion_tokens")) or 0,
                    "cache_read_tokens": cached,
                    "cache_creation_tokens": as_int(u.get("cache_write_tokens")) or 0,
                    "reasoning_tokens": as_int(u.get("reasoning_tokens")) or 0,
                    "usage_key": f"openhands:{sid}:{rid}",
                }
            )
    wm = Watermark(
        path=src,
        agent=AGENT,
        dev=st.st_dev,
        ino=st.st_ino,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        offset=0,
        parser_version=PARSER_VERSION,
        state={"fp": fp},
    )
    # the vault keeps this version of base_state.json (the event files are not captured)
    raw = RawCapture.of(file, "document", 0, kept[0], st) if kept else None
    yield Batch(
        entries, quarantine, wm, bytes_read=nbytes, lines=len(_event_files(file)), coverage=tally, raw=raw
    )
