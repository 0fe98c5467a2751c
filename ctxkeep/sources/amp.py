"""Amp (Sourcegraph's coding agent, ``amp``) threads.

Where (every platform): ``$AMP_DATA_DIR`` (a comma-separated list allowed) else
``$XDG_DATA_HOME/amp`` else ``~/.local/share/amp``, holding ``threads/T-<id>.json``:
one JSON document per thread, rewritten in place as the thread grows (the threads
live on ampcode.com; these files are the CLI's local mirror). Sources: wesm/agentsview
0.46 ``internal/parser/amp.go`` and ``amp_test.go`` (path, ``T-*.json``, the document
shape), ccusage's Rust Amp adapter as a public review of it quotes
(``adapters/amp/src/paths.rs``: ``AMP_DATA_DIR``, comma-separated, default
``~/.local/share/amp``; ``parser.rs``: per-message ``usage``), tokscale's client list
(``$XDG_DATA_HOME/amp/threads``, ``T-*.json``).

Format (thread ``v`` 1): ``{v, id: "T-…", created (epoch ms), title, messages[], env:
{initial: {trees: [{displayName, uri: "file:///…"}]}}, meta: {traces: [{name,
startTime, endTime}]}}``; a message is ``{role: user|assistant, messageId?, content:
[blocks], usage?, meta?: {sentAt (ms)}}`` with Anthropic-style blocks: ``text``,
``thinking``, ``tool_use {id, name, input, complete}``, ``tool_result {tool_use_id,
content | run: {status, result}}``. An assistant message's ``usage``: ``{model,
timestamp, inputTokens, outputTokens, cacheCreationInputTokens, cacheReadInputTokens,
totalTokens}`` (newer threads also keep a ``usageLedger.events`` billing ledger: not
read, the per-message usage carries the same tokens).

Mapping: one entry per block (``record_id`` ``<thread>:<messageId or index>``,
``part`` the block's index); the thread's ``title`` is a ``session`` meta entry (the
session's title); the project is the first tree's ``uri`` path (its ``displayName``
when it has no ``file://`` uri); a message's time is its usage ``timestamp`` or
``meta.sentAt``, else the thread's ``created``. Usage on a ``meta`` entry per message
(``usage_key`` ``amp:<thread>:<message>``, input = ``inputTokens`` (Anthropic's
uncached input), cache write/read as given). Messages gone from a rewritten thread
(an edit that truncated it) are marked ``rewound`` (``readers.document.track_ids``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

from ctxkeep.sources._util import as_int, blocks_text, compact_json, dict_at
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.readers.document import read_document, track_ids
from ctxkeep.timeutil import format_epoch

AGENT = "amp"
PARSER_VERSION = 1
MODE: Mode = "rewrite"

_THREAD_RE = re.compile(r"^T-[0-9A-Za-z-]+$")


def roots(ctx: DiscoveryContext) -> list[Path]:
    """Amp data dirs: ``$AMP_DATA_DIR`` entries, else ``$XDG_DATA_HOME/amp`` or
    ``~/.local/share/amp``."""
    env = ctx.env.get("AMP_DATA_DIR")
    if env:
        return [Path(p.strip()).expanduser() for p in env.split(",") if p.strip()]
    base = ctx.env.get("XDG_DATA_HOME")
    return [(Path(base).expanduser() if base else ctx.home / ".local" / "share") / "amp"]


def discover(ctx: DiscoveryContext) -> Discovery:
    """Find ``threads/T-*.json`` under the Amp data dirs; a configured dir may be a
    data dir or a ``threads`` dir."""
    d = Discovery(AGENT)
    rs = roots(ctx)
    for root in rs + list(ctx.extra_dirs):
        base = root if root.name == "threads" else root / "threads"
        d.add_glob(base, ["T-*.json"], MODE)
    d.explain_empty(rs[0], f"no threads/T-*.json under {rs[0]}")
    return d


def matches(path: Path) -> bool:
    """True for an Amp thread file (``T-<id>.json``) given with ``--path``."""
    return path.suffix == ".json" and _THREAD_RE.match(path.stem) is not None


def _ms(v) -> str | None:
    """ISO-8601 UTC of epoch milliseconds (None unless a positive number)."""
    n = as_int(v)
    return format_epoch(n / 1000) if n and n > 0 else None


def _project(doc: dict) -> str | None:
    env = dict_at(doc, "env")
    initial = dict_at(env, "initial")
    trees = initial.get("trees") if isinstance(initial.get("trees"), list) else []
    tree = trees[0] if trees and isinstance(trees[0], dict) else {}
    uri = tree.get("uri")
    if isinstance(uri, str) and uri.startswith("file://"):
        return unquote(urlparse(uri).path) or None
    name = tree.get("displayName")
    return name if isinstance(name, str) and name else None


def _result_text(b: dict) -> str:
    """A tool result's text: its ``content`` (text or blocks), else ``run.result``."""
    if b.get("content") is not None:
        c = b["content"]
        return (
            c if isinstance(c, str) else blocks_text(c, lambda x: str(x.get("text") or compact_json(x, 2000)))
        )
    run = dict_at(b, "run")
    res = run.get("result")
    text = res if isinstance(res, str) else compact_json(res) if res is not None else ""
    return ("[error] " + text) if run.get("status") in ("error", "failed") else text


def parse_thread(doc, src: str, fallback_id: str, state: dict, old_ids: list[str]) -> list[dict]:
    """Entry dicts of one thread document (see the module doc). Raises ValueError for
    a document that is not a thread (no ``messages`` list)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise ValueError("not an Amp thread (no messages list)")
    tid = str(doc["id"]) if isinstance(doc.get("id"), str) and _THREAD_RE.match(doc["id"]) else fallback_id
    created = _ms(doc.get("created"))
    base = {
        "agent": AGENT,
        "session_id": tid,
        "project_dir": _project(doc),
        "is_sidechain": False,
        "source_path": src,
        "source_offset": 0,
    }
    out: list[dict] = []
    if isinstance(doc.get("title"), str) and doc["title"]:
        out.append(
            dict(
                base,
                record_id=f"{tid}:title",
                part=0,
                ts=created,
                role="system",
                kind="meta",
                tool_name="session",
                text=doc["title"],
            )
        )
    ids = []
    for i, m in enumerate(doc["messages"]):
        if not isinstance(m, dict):
            continue
        mid = m.get("messageId") if isinstance(m.get("messageId"), str | int) else None
        mid = str(mid) if mid is not None else str(i)
        ids.append(mid)
        role = m.get("role") if m.get("role") in ("user", "assistant") else "system"
        usage = dict_at(m, "usage")
        meta = dict_at(m, "meta")
        ts = usage.get("timestamp") if isinstance(usage.get("timestamp"), str) else None
        b = dict(
            base,
            record_id=f"{tid}:{mid}",
            message_id=mid,
            native_id=mid,
            role=role,
            ts=ts or _ms(meta.get("sentAt")) or created,
        )
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for j, blk in enumerate(content if isinstance(content, list) else []):
            if not isinstance(blk, dict):
                continue
            t = blk.get("type")
            if t == "text":
                out.append(dict(b, part=j, kind="message", text=str(blk.get("text") or "")))
            elif t == "thinking":
                out.append(dict(b, part=j, kind="thinking", text=str(blk.get("thinking") or "")))
            elif t == "tool_use":
                out.append(
                    dict(
                        b,
                        part=j,
                        role="assistant",
                        kind="tool_call",
                        tool_name=blk.get("name"),
                        native_id=blk.get("id"),
                        text=compact_json(blk.get("input")),
                    )
                )
            elif t == "tool_result":
                out.append(
                    dict(
                        b,
                        part=j,
                        role="tool",
                        kind="tool_result",
                        native_id=blk.get("tool_use_id"),
                        text=_result_text(blk),
                    )
                )
            else:
                out.append(
                    dict(
                        b, part=j, role="system", kind="meta", tool_name=str(t), text=compact_json(blk, 2000)
                    )
                )
        if usage and role == "assistant":
            out.append(
                dict(
                    b,
                    record_id=f"{tid}:{mid}:usage",
                    part=0,
                    role="system",
                    kind="meta",
                    tool_name="usage",
                    text="",
                    model=usage.get("model") if isinstance(usage.get("model"), str) else None,
                    input_tokens=as_int(usage.get("inputTokens")) or 0,
                    output_tokens=as_int(usage.get("outputTokens")) or 0,
                    cache_creation_tokens=as_int(usage.get("cacheCreationInputTokens")) or 0,
                    cache_read_tokens=as_int(usage.get("cacheReadInputTokens")) or 0,
                    usage_key=f"amp:{tid}:{mid}",
                )
            )
    track_ids(state, AGENT, tid, old_ids, ids)
    return out


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one thread document whole when it changed."""
    src = str(file.path)
    old_ids = list(
        (wm.state.get("ids") or []) if wm is not None and wm.parser_version == PARSER_VERSION else []
    )

    def parse_doc(raw, doc, state, idle):
        return parse_thread(doc, src, file.path.stem, state, old_ids)

    return read_document(file, wm, PARSER_VERSION, parse_doc, batch_bytes)
