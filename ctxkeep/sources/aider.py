"""Aider chat and input histories (project-local files).

Where: ``.aider.chat.history.md`` and ``.aider.input.history`` in project roots. Roots
are: the dirs configured for ``aider`` in ctxkeep's config; the files named by Aider's
own settings (``chat-history-file:`` / ``input-history-file:`` in
``~/.aider.conf.yml``, env ``AIDER_CHAT_HISTORY_FILE`` / ``AIDER_INPUT_HISTORY_FILE``);
and a bounded scan of the home directory (``_homescan``: depth, dir-count and time
bounds; hidden dirs, ``node_modules``, virtual environments and caches skipped).

Chat history format (Aider ``io.py``, real v0.86.1 file in the corpus): Markdown
appended to (never rewritten). ``# aider chat started at YYYY-MM-DD HH:MM:SS`` starts a
session (local time of the machine that ran Aider: converted to UTC with this machine's
time zone); ``#### `` lines are the user's input (timed by the same input in
``.aider.input.history`` when it is there, else by the session start; the blocks
after an input share its time); ``> `` lines (two trailing spaces)
are tool and status output; every other line is the assistant's reply. A ``> Tokens:
N sent[, N cache write][, N cache hit], N received. Cost: …`` line is the usage of one
request, with counts rounded as Aider prints them (``1.2k``, ``12k``, ``1.5M``):
``input_tokens`` = sent, ``cache_creation_tokens`` = cache write,
``cache_read_tokens`` = cache hit, ``output_tokens`` = received (as Aider logs them;
whether "sent" includes the cached part depends on the provider). The model is the
session's ``> Main model: X`` / ``> Model: X`` line; its ``> Aider vX.Y.Z`` line (printed
at each start) is the coverage ledger's agent version of the session's entries (one
history file holds sessions of several Aider versions).

The file is read whole when it changed (it is small next to JSONL transcripts). Ids
come from the content, never the path, so a moved or renamed project folder (or home)
holds the same sessions (parser v3; before, a hash of the path made every move a
second copy, newuser15 F10): a chat session is ``aider-`` + SHA-256 of the history's
bytes before it through its header line (an append-only file: those bytes never
change); the file's first session, whose header alone could be another project's
(two projects started in the same second), through its first prompt line (``####``),
or, without a prompt, through the end of the session once another header follows;
until one of those is written its blocks wait (startup lines only). An entry is
``<session>:<byte offset of the block>``, a usage row ``aider:<session>:<offset>``,
so re-reads do not double. Two histories byte-identical through the first prompt are
one session (a copy of the same file). The last block
of the file may still grow (Aider appends status lines and replies in pieces), so it is
held back until the file has been idle for ``base.IDLE_SECONDS``.

Input history (prompt_toolkit ``FileHistory``): ``# <timestamp>`` then the input's
lines each prefixed with ``+``. Stored as ``meta`` entries (tool_name
``input_history``) of a session ``aider-input:<16 hex of SHA-256 of the file through
its first input's time line>`` (microseconds: the same at any path, another project's
only by chance): they repeat the ``####`` lines of the chat history but carry exact
timestamps.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxkeep.sources import _homescan
from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    DiscoveryContext,
    Mode,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.coverage import ENTRY_VERSION_KEY
from ctxkeep.sources.readers.document import read_document
from ctxkeep.sources.readers.jsonl import open_file
from ctxkeep.timeutil import format_utc

AGENT = "aider"
PARSER_VERSION = 3  # 2: each session's Aider version to the ledger; 3: ids from the content, not the path
MODE: Mode = "rewrite"
CHAT = ".aider.chat.history.md"
INPUT = ".aider.input.history"

_HEADER = "# aider chat started at "
_TOKENS_RE = re.compile(
    r"Tokens: ([\d.,]+[kKmM]?) sent(?:, ([\d.,]+[kKmM]?) cache write)?(?:, ([\d.,]+[kKmM]?) cache hit)?"
    r", ([\d.,]+[kKmM]?) received"
)
_MODEL_RE = re.compile(r"^(?:Main model|Model): (\S+)")
_VERSION_RE = re.compile(r"^Aider v(\d[0-9A-Za-z.+_-]*)")


def _conf_files(ctx: DiscoveryContext) -> list[Path]:
    out = []
    for var in ("AIDER_CHAT_HISTORY_FILE", "AIDER_INPUT_HISTORY_FILE"):
        if ctx.env.get(var):
            out.append(Path(ctx.env[var]).expanduser())
    conf = ctx.home / ".aider.conf.yml"
    try:
        for line in conf.read_text("utf-8", "replace").splitlines():
            m = re.match(r"\s*(chat-history-file|input-history-file)\s*:\s*['\"]?([^'\"#]+)", line)
            if m:
                p = Path(m.group(2).strip()).expanduser()
                out.append(p if p.is_absolute() else ctx.home / p)
    except OSError:
        pass
    return out


def discover(ctx: DiscoveryContext) -> Discovery:
    """Configured roots, Aider's configured history files, then the bounded home scan."""
    d = Discovery(AGENT)
    found: list[Path] = []
    for root in ctx.extra_dirs:
        d.searched.append(root)
        for name in (CHAT, INPUT):
            if (root / name).is_file():
                found.append(root / name)
        if root.is_dir():
            found.extend(p for p in root.glob(f"*/{CHAT}"))
            found.extend(p for p in root.glob(f"*/{INPUT}"))
    for p in _conf_files(ctx):
        d.searched.append(p)
        if p.is_file():
            found.append(p)
    scan = _homescan.scan_home(ctx.home)
    d.searched.append(ctx.home)
    found.extend(scan.aider)
    for p in found:
        d.add(p, MODE, {"project_dir": str(p.parent)})
    if not d.files:
        d.reason = (
            f"no {CHAT} in configured dirs or under {ctx.home} "
            f"(scanned {scan.dirs} dirs{'; ' + scan.truncated if scan.truncated else ''})"
        )
    return d


def matches(path: Path) -> bool:
    """True for Aider's history files (by name; Aider lets users rename them)."""
    return path.name in (CHAT, INPUT) or path.name.endswith(".aider.chat.history.md")


def _tokens(s: str | None) -> int | None:
    if not s:
        return None
    s = s.replace(",", "")
    mult = 1
    if s[-1] in "kK":
        mult, s = 1000, s[:-1]
    elif s[-1] in "mM":
        mult, s = 1_000_000, s[:-1]
    try:
        return int(round(float(s) * mult))
    except ValueError:
        return None


def _local_to_utc(text: str) -> str | None:
    """``YYYY-MM-DD HH:MM:SS[.ffffff]`` in this machine's local time → ISO UTC."""
    text = text.strip()
    try:
        t = (
            dt.datetime.strptime(text[:26], "%Y-%m-%d %H:%M:%S.%f")
            if len(text) > 19 and text[19] == "."
            else dt.datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S")
        )
    except ValueError:
        return None
    return format_utc(t)


def parse_chat(
    raw: bytes, src: str, project: str | None, idle: bool, state: dict, legacy: bool = False
) -> list[dict]:
    """Entries of a chat history: one per block (user input lines, status lines,
    assistant text), plus usage on ``Tokens:`` lines. Holds back the file's last block
    unless ``idle`` (then ``state["complete"] = False``). ``legacy``: the path ids of
    parser v2 (``read``)."""
    if legacy:
        return _legacy_ids(parse_chat(raw, src, project, idle, state), src, state)
    blocks: list[dict] = []  # {type, start, lines, session, ts, model}
    cur: dict[str, Any] | None = None
    sess: dict[str, Any] = {"id": None, "ts": None, "model": None, "start": 0}
    sessions = [sess]
    pos = 0
    for line_b in raw.splitlines(keepends=True):
        start = pos
        pos += len(line_b)
        line = line_b.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith(_HEADER):
            stamp = line[len(_HEADER) :].strip()
            if sess["id"] is None and len(sessions) > 1:
                sess["id"] = _content_id(raw[:start])  # the first session, complete without a prompt
            # the first session waits for its first prompt (``_content_id``); a later one
            # is named by every byte up to the end of its header line (final: appended)
            sess = {
                "id": _content_id(raw[:pos]) if len(sessions) > 1 else None,
                "ts": _local_to_utc(stamp),
                "model": None,
                "start": start,
            }
            sessions.append(sess)
            cur = None
            blocks.append({"type": "header", "start": start, "lines": [stamp], "session": sess})
            continue
        if line.startswith("#### ") and sess["id"] is None and len(sessions) > 1 and line_b.endswith(b"\n"):
            sess["id"] = _content_id(raw[:pos])  # the first session: through its first prompt

        if not line.strip():
            if cur is not None and cur["type"] == "assistant":
                cur["lines"].append("")
            elif cur is not None:
                cur = None
            continue
        if line.startswith("#### "):
            t, text = "user", line[5:]
        elif line.startswith(">"):
            t, text = "tool", line[1:].lstrip(" ")
            text = text.rstrip()
            m = _MODEL_RE.match(text)
            if m and sess["model"] is None:
                sess["model"] = m.group(1)
            v = _VERSION_RE.match(text)
            if v and not sess.get("version"):
                sess["version"] = v.group(1)
        else:
            t, text = "assistant", line
        if t == "tool" and text.startswith("Tokens:"):
            blocks.append({"type": "usage", "start": start, "lines": [text], "session": sess})
            cur = None
            continue
        if cur is None or cur["type"] != t:
            cur = {"type": t, "start": start, "lines": [], "session": sess}
            blocks.append(cur)
        cur["lines"].append(text.rstrip() if t != "assistant" else text)
    if not idle and blocks and blocks[-1]["type"] != "header":
        blocks.pop()
        state["complete"] = False
    # the text before the first header (not Aider's own: a hand-made or foreign file) is
    # named by its first line; the first session without a prompt yet and no session
    # after it waits (its bytes so far could be another project's: same start second)
    if sessions[0]["id"] is None:
        first = raw.split(b"\n", 1)[0]
        sessions[0]["id"] = _content_id(b"preamble\n" + first)
    if any(b["session"]["id"] is None for b in blocks):
        blocks = [b for b in blocks if b["session"]["id"] is not None]
    inputs = _input_times(Path(src).with_name(INPUT)) if Path(src).name == CHAT else []
    ip = 0
    cur_ts = None
    out: list[dict] = []
    for b in blocks:
        s = b["session"]
        if b["type"] == "header":
            cur_ts = s["ts"]
        elif b["type"] == "user" and inputs:
            # the time the input was typed, from .aider.input.history (same text, in order)
            want = _norm("\n".join(b["lines"]))
            for j in range(ip, min(ip + 50, len(inputs))):
                if inputs[j][1] == want:
                    cur_ts, ip = inputs[j][0] or cur_ts, j + 1
                    break
        base = {
            "agent": AGENT,
            "session_id": s["id"],
            "project_dir": project,
            "ts": cur_ts or s["ts"],
            "model": s["model"],
            "source_path": src,
            "source_offset": b["start"],
            "record_id": f"{s['id']}:{b['start']}",
            "part": 0,
            "native_id": str(b["start"]),
        }
        if s.get("version"):  # the ledger's agent version of this session's entries
            base[ENTRY_VERSION_KEY] = s["version"]
        text = "\n".join(b["lines"]).strip("\n")
        if b["type"] == "header":
            out.append(
                dict(
                    base,
                    role="system",
                    kind="meta",
                    tool_name="session_start",
                    text=f"aider chat started at {text}",
                )
            )
        elif b["type"] == "user":
            out.append(dict(base, role="user", kind="message", text=text))
        elif b["type"] == "assistant":
            out.append(dict(base, role="assistant", kind="message", text=text))
        elif b["type"] == "tool":
            out.append(dict(base, role="tool", kind="tool_result", tool_name="aider", text=text))
        elif b["type"] == "usage":
            m = _TOKENS_RE.search(text)
            e = dict(base, role="system", kind="meta", tool_name="usage", text=text)
            if m:
                e.update(
                    input_tokens=_tokens(m.group(1)) or 0,
                    cache_creation_tokens=_tokens(m.group(2)) or 0,
                    cache_read_tokens=_tokens(m.group(3)) or 0,
                    output_tokens=_tokens(m.group(4)) or 0,
                    usage_key=f"aider:{s['id']}:{b['start']}",
                )
            out.append(e)
    return out


def _content_id(prefix: bytes) -> str:
    """A chat session's id from the history bytes before it (with its header line), the
    same at any path: ``aider-`` + 16 hex of SHA-256 (``parse_chat``)."""
    return "aider-" + hashlib.sha256(prefix).hexdigest()[:16]


def _norm(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines())


def _input_times(path: Path) -> list[tuple[str | None, str]]:
    """``(UTC ts, normalized text)`` of each input in an ``.aider.input.history``."""
    opened = open_file(path)  # (``readers.jsonl.VIEW`` applies: a reparse from the vault)
    if opened is None:
        return []
    with opened[0] as f:
        raw = f.read()
    return [(e["ts"], _norm(e["text"])) for e in parse_input(raw, str(path), None, True, {})]


def _legacy_ids(entries: list[dict], src: str, state: dict) -> list[dict]:
    """``entries`` under parser v2's path ids (``read``): a chat session
    ``aider-<8 hex of SHA-256 of the path>-<header offset>`` (``-preamble`` before the
    first header), the input history ``aider-input:<project>``, an entry
    ``<path>:<offset>``, a usage row ``aider:<path>:<offset>``. Sets
    ``state["ids"] = "path"`` so the file keeps them."""
    state["ids"] = "path"
    fid = hashlib.sha256(src.encode()).hexdigest()[:8]
    heads = sorted(e["source_offset"] for e in entries if e.get("tool_name") == "session_start")
    for e in entries:
        off = e["source_offset"]
        if e.get("tool_name") == "input_history":
            e["session_id"] = f"aider-input:{e['project_dir'] or src}"
        else:
            before = [h for h in heads if h <= off]
            e["session_id"] = f"aider-{fid}-{before[-1] if before else 'preamble'}"
        e["record_id"] = f"{src}:{off}"
        if e.get("usage_key"):
            e["usage_key"] = f"aider:{src}:{off}"
    return entries


def parse_input(
    raw: bytes, src: str, project: str | None, idle: bool, state: dict, legacy: bool = False
) -> list[dict]:
    """Entries of ``.aider.input.history``: one ``meta`` entry per input (``legacy``:
    parser v2's path ids, ``read``)."""
    if legacy:
        return _legacy_ids(parse_input(raw, src, project, idle, state), src, state)
    out: list[dict] = []
    cur: dict[str, Any] | None = None
    pos = 0
    sid = ""
    for line_b in raw.splitlines(keepends=True):
        start = pos
        pos += len(line_b)
        line = line_b.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith("# "):
            if not sid:  # named by the bytes through its first input's time (microseconds)
                sid = "aider-input:" + hashlib.sha256(raw[:pos]).hexdigest()[:16]
            cur = {"start": start, "ts": _local_to_utc(line[2:]), "lines": []}
            out.append(cur)
        elif line.startswith("+") and cur is not None:
            cur["lines"].append(line[1:])
    entries = [
        {
            "agent": AGENT,
            "session_id": sid,
            "project_dir": project,
            "ts": c["ts"],
            "role": "user",
            "kind": "meta",
            "tool_name": "input_history",
            "text": "\n".join(c["lines"]),
            "source_path": src,
            "source_offset": c["start"],
            "record_id": f"{sid}:{c['start']}",
            "part": 0,
        }
        for c in out
    ]
    if not idle and entries:
        entries.pop()
        state["complete"] = False
    return entries


def _legacy(wm: Watermark | None) -> bool:
    """True for a file this store read under parser v2's path ids (``read``)."""
    return wm is not None and (wm.parser_version < 3 or (wm.state or {}).get("ids") == "path")


def read(file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES) -> Iterator[Batch]:
    """Read one history file whole when it changed (see module doc).

    A file this store read before parser v3 (its watermark older, or marked
    ``ids = "path"``) keeps parser v2's path ids (``_legacy_ids``): its entries are
    stored under them, and content ids would store every one again. Moved, such a
    file is read under content ids (once more, then never again);
    ``ctxkeep reparse --agent aider`` derives a store's Aider files under content
    ids from the vault."""
    src = str(file.path)
    project = file.meta.get("project_dir") or str(file.path.parent)
    fn = parse_input if file.path.name.endswith(INPUT) else parse_chat
    legacy = _legacy(wm)

    def parse_doc(raw, doc, state, idle):
        return fn(raw, src, project, idle, state, legacy)

    return read_document(file, wm, PARSER_VERSION, parse_doc, batch_bytes, json_doc=False)
