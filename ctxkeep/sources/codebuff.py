"""Codebuff and Freebuff (the ``codebuff`` / ``freebuff`` CLIs, formerly Manicode) chats.

Where: ``$CODEBUFF_DIR`` else ``~/.config/manicode/projects`` (all platforms, under the
user's home; agentsview 0.46 ``internal/parser/types.go`` AgentCodebuff, env
``CODEBUFF_DIR``): ``<projects>/<project>/chats/<timestamp>/`` holding
``chat-messages.json`` (the chat, a JSON array rewritten as it grows: mode
``rewrite``), ``run-state.json`` and ``chat-meta.json`` (agentsview 0.46
``internal/parser/codebuff.go``; the folder name is the start time,
``2006-01-02T15-04-05.999Z``). Freebuff writes the same layout; its sessions are told
apart by ``run-state.json``'s ``agentType`` containing ``free`` (``types.go`` comment on
AgentCodebuff). They are stored under this one agent, their agent type named in a
``meta`` entry (``tool_name`` ``agent_type``) and as the usage row's model.

Format facts (``codebuff.go`` parseCodebuffMessages, parseCodebuffAIMessage and
``codebuff_test.go``): a message ``{id, variant (user | ai | error), content,
timestamp (RFC 3339, or a local ``03:04 PM`` time on the session's date that rolls to the
next day when the hour goes back), blocks}``; user blocks may be ``image``
``{filename}``; ai blocks: ``text`` ``{textType (text | reasoning), content}``,
``tool`` ``{toolName, toolCallId, input, output}``, ``agent`` (a spawned sub-agent:
``{agentType, agentName, agentId, status, params, initialPrompt, content}``),
``mode-divider`` ``{mode}``, ``plan`` ``{content}``, ``ask-user`` ``{questions
[{question}]}``, ``image``. ``run-state.json``: ``sessionState {mainAgentState
{agentType, contextTokenCount, creditsUsed}, fileContext {cwd}}``.

Entries: session id ``<project>:<timestamp folder>``; a message's ``record_id``
``<session>:<message id or index>``, one entry per block (reasoning ``thinking``, a
tool block a ``tool_call`` and, with an ``output``, a ``tool_result``; a sub-agent an
``agent`` call named by its ``agentType`` with its ``content`` as result; dividers,
plans and questions ``meta``; an ``error`` message ``meta``). Usage: no tokens per
message (``types.go`` NoPerMessageTokenData); ``creditsUsed`` (1 credit = 1 cent, as
agentsview prices it) becomes one session row with ``cost_usd`` (``usage_key``
``codebuff:<session>``) and null tokens: "not recorded by the agent", as Crush's
(``schema.TOKENS_UNRECORDED_WHY``; agentsview's usage event for it carries a cost and
no token counts, agentsview ``internal/parser/codebuff.go`` @ b85eae5; ``contextTokenCount`` is the last step's
context, not usage). Parser 1 stored 0 tokens, shown as 0 in ``sessions`` and reports.
Not read (no corpus session holds it; agentsview reads no per-message tokens): ccusage's
Codebuff adapter (ryoppippi/ccusage ``apps/ccusage/src/adapter/codebuff/parser.ts`` @
60c5387) also takes per-message tokens and credits from an assistant message's
``metadata.usage`` / ``metadata.codebuff.usage`` or its ``runState`` message history,
where a chat has them (its tests' handmade chats); such a chat's tokens are "not
recorded" here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from ctxkeep.sources._util import as_float, compact_json, dict_at, json_object, nonempty, tool_call_entry
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers import sidecar
from ctxkeep.sources.readers.document import read_document

AGENT = "codebuff"
#: 2: a session's tokens null ("not recorded by the agent"), were 0
PARSER_VERSION = 2
MODE: Mode = "rewrite"

_FOLDER = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2})-(\d{2})-(\d{2})(?:\.\d+)?Z?)?")
_CLOCK = re.compile(r"\s*(\d{1,2}):(\d{2})\s*([AaPp][Mm])\s*")


def root(ctx: DiscoveryContext) -> Path:
    """``$CODEBUFF_DIR`` when set, else ``~/.config/manicode/projects``."""
    return ctx.env_dir("CODEBUFF_DIR", ctx.home / ".config" / "manicode" / "projects")


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``<project>/chats/<timestamp>/chat-messages.json`` files."""
    d = Discovery(AGENT)
    base = root(ctx)
    for r in [base, *ctx.extra_dirs]:
        d.searched.append(r)
        d.add_glob(r, ["*/chats/*/chat-messages.json"], MODE)
    sidecar.add_all(d, sidecars_of)
    d.explain_empty(base, f"no */chats/*/chat-messages.json under {base}")
    return d


def matches(path: Path) -> bool:
    """A ``chat-messages.json`` in a ``chats/<timestamp>`` folder."""
    return path.name == "chat-messages.json" and path.parent.parent.name == "chats"


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).isoformat().replace("+00:00", "Z")


def session_start(folder: str) -> datetime | None:
    """The start time a session folder's name holds (UTC), or None."""
    m = _FOLDER.fullmatch(folder)
    if not m:
        return None
    y, mo, d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    try:
        return datetime(y, mo, d, h, mi, s, tzinfo=UTC)
    except ValueError:
        return None


class _Clock:
    """Times of one chat's messages: RFC 3339 as given; a local ``03:04 PM`` on the
    current day, which moves to the next day when the hour goes back."""

    def __init__(self, start: datetime | None) -> None:
        self.day: date | None = start.astimezone().date() if start else None
        self.hour = start.astimezone().hour if start else -1

    def at(self, raw: Any) -> str | None:
        s = nonempty(raw)
        if not s:
            return None
        m = _CLOCK.fullmatch(s)
        if not m:
            try:
                dt = datetime.fromisoformat(s.replace("Z", "+00:00"))
            except ValueError:
                return None
            dt = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
            self.day, self.hour = dt.astimezone().date(), -1
            return _iso(dt)
        if self.day is None:
            return None
        h = int(m.group(1)) % 12 + (12 if m.group(3).lower() == "pm" else 0)
        if self.hour >= 0 and h < self.hour:
            self.day += timedelta(days=1)
        self.hour = h
        try:
            local = datetime(self.day.year, self.day.month, self.day.day, h, int(m.group(2))).astimezone()
        except ValueError:
            return None
        return _iso(local)


def _ai_entries(blocks: list, e: dict) -> list[dict]:
    out: list[dict] = []
    for b in blocks:
        if not isinstance(b, dict):
            continue
        t = b.get("type")
        if t == "text":
            text = nonempty(b.get("content"))
            if text:
                kind = "thinking" if b.get("textType") == "reasoning" else "message"
                out.append(dict(e, role="assistant", kind=kind, text=text))
        elif t == "tool":
            cid, name, inp = nonempty(b.get("toolCallId")), nonempty(b.get("toolName")), b.get("input")
            out.append(tool_call_entry(e, cid, name, inp))
            if "output" in b:
                o = b["output"]
                out.append(
                    dict(
                        e,
                        role="tool",
                        kind="tool_result",
                        native_id=cid,
                        tool_name=name,
                        text=o if isinstance(o, str) else compact_json(o, 8000),
                    )
                )
        elif t == "agent":
            aid, name = nonempty(b.get("agentId")), nonempty(b.get("agentType"))
            spec = {k: b[k] for k in ("agentName", "params", "initialPrompt") if b.get(k) is not None}
            spec["status"] = nonempty(b.get("status")) or "spawned"
            out.append(
                dict(
                    e,
                    role="assistant",
                    kind="tool_call",
                    native_id=aid,
                    tool_name=name or "agent",
                    text=compact_json(spec),
                )
            )
            if nonempty(b.get("content")):
                out.append(
                    dict(
                        e,
                        role="tool",
                        kind="tool_result",
                        native_id=aid,
                        tool_name=name or "agent",
                        text=b["content"],
                    )
                )
        elif t == "mode-divider":
            out.append(dict(e, role="system", kind="meta", tool_name="mode", text=str(b.get("mode") or "")))
        elif t == "plan":
            out.append(
                dict(e, role="system", kind="meta", tool_name="plan", text=str(b.get("content") or ""))
            )
        elif t == "ask-user":
            qs = [q.get("question") for q in b.get("questions") or [] if isinstance(q, dict)]
            out.append(
                dict(
                    e,
                    role="assistant",
                    kind="message",
                    text="\n".join(f"[asked] {q}" for q in qs if isinstance(q, str)),
                )
            )
        elif t == "image":
            out.append(
                dict(e, role="assistant", kind="message", text=f"[image {b.get('filename') or 'attached'}]")
            )
        else:
            out.append(
                dict(e, role="system", kind="meta", tool_name=f"block:{t}", text=compact_json(b, 2000))
            )
    return out


def parse_chat(doc: Any, path: Path) -> list[dict]:
    """Entry dicts of one ``chat-messages.json`` (module doc). Raises ValueError for a
    document that is not a list."""
    if not isinstance(doc, list):
        raise ValueError("chat-messages.json is not a JSON array")
    folder = path.parent
    sid = f"{folder.parent.parent.name}:{folder.name}"
    run = dict_at(json_object(folder / "run-state.json"), "sessionState")
    main = dict_at(run, "mainAgentState")
    cwd = nonempty(dict_at(run, "fileContext").get("cwd"))
    agent_type = nonempty(main.get("agentType"))
    start = session_start(folder.name)
    clock = _Clock(start)
    started = _iso(start) if start else None
    src = str(path)
    out: list[dict] = []
    last = started
    for i, m in enumerate(doc):
        if not isinstance(m, dict):
            continue
        last = clock.at(m.get("timestamp")) or last
        mid = nonempty(m.get("id"))
        e = {
            "agent": AGENT,
            "session_id": sid,
            "native_id": mid,
            "project_dir": cwd,
            "ts": last,
            "source_path": src,
            "source_offset": i,
            "record_id": f"{sid}:{mid or i}",
        }
        variant = m.get("variant")
        content = str(m.get("content") or "")
        if variant == "user":
            images = [
                f"[image {b.get('filename') or 'attached'}]"
                for b in m.get("blocks") or []
                if isinstance(b, dict) and b.get("type") == "image"
            ]
            got = [
                dict(
                    e, role="user", kind="message", text="\n".join(x for x in [content.strip(), *images] if x)
                )
            ]
        elif variant == "ai":
            blocks = m.get("blocks")
            got = _ai_entries(blocks, e) if isinstance(blocks, list) else []
            if not got and content.strip():
                got = [dict(e, role="assistant", kind="message", text=content.strip())]
        elif variant == "error":
            got = [dict(e, role="system", kind="meta", tool_name="error", text=content)]
        else:
            got = [
                dict(
                    e,
                    role="system",
                    kind="meta",
                    tool_name=str(variant or "unknown"),
                    text=compact_json(m, 2000),
                )
            ]
        for j, x in enumerate(got):
            x["part"] = j
        out += got
    meta = {
        "agent": AGENT,
        "session_id": sid,
        "project_dir": cwd,
        "ts": started or last,
        "role": "system",
        "kind": "meta",
        "part": 0,
        "source_path": src,
        "source_offset": 0,
    }
    if agent_type:
        out.append(
            dict(meta, tool_name="agent_type", text=agent_type, record_id=f"{sid}:agent_type:{agent_type}")
        )
    credits = as_float(main.get("creditsUsed"))
    if agent_type and credits and credits > 0:
        out.append(
            dict(
                meta,
                ts=last or started,
                tool_name="usage",
                model=agent_type,
                text=f"usage {agent_type}",
                record_id=f"{sid}:usage:{credits}",
                # no tokens: not recorded by the agent (null, never summed nor priced)
                input_tokens=None,
                output_tokens=None,
                cache_read_tokens=None,
                cache_creation_tokens=None,
                cost_usd=credits / 100,
                usage_key=f"codebuff:{sid}",
            )
        )
    return out


#: the files beside ``chat-messages.json`` the vault keeps with it (``readers.sidecar``)
SIDECARS = {"run-state.json": "run-state", "chat-meta.json": "session-meta"}


def sidecars_of(path: Path) -> list[SourceFile]:
    """The sidecars of ``chat-messages.json`` at ``path`` (``SIDECARS``) on disk."""
    return sidecar.beside(AGENT, path, SIDECARS) if path.name == "chat-messages.json" else []


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one chat whole when its ``chat-messages.json`` changed; a sidecar
    (``SIDECARS``) whole, for the vault, with no entries."""
    if sidecar.is_sidecar(file):
        return sidecar.read_sidecar(file, wm, PARSER_VERSION, batch_bytes)
    return _read_chat(file, wm, batch_bytes)


def _read_chat(
    file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    """Read one chat whole when its ``chat-messages.json`` changed."""
    path = file.path
    return read_document(
        file, wm, PARSER_VERSION, lambda raw, doc, state, idle: parse_chat(doc, path), batch_bytes
    )
