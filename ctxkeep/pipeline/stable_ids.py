"""Entry ids that a reparse from the vault gives again: line hashes of the redacted line.

A JSONL source whose records carry no id of their own names an entry by the SHA-256 of
its line (``readers.jsonl``: ``line_hash``; Codex's ``record_id`` is ``origin:hash``,
Claude Code's when a line has no ``uuid``). The vault keeps the line redacted
(``sinks.vault.capture.redact_raw``), so ``maintenance.reparse`` reads — and hashes —
the redacted line: before this module, every entry of a line that held a secret got
another id on reparse than on ingest (issue 27: "the same store but two Codex lines").

So, with the vault on, an ingest hashes what the vault keeps: ``rekey`` redacts a
batch's raw bytes once (``redact_raw_many``, the capture's own redaction: the result rides on
``RawCapture.redacted`` and the capture does not redact again) and, for each line the
redaction changed, gives the batch's entries the redacted line's hash in place of the
raw line's. A reparse reads redacted lines, which redaction leaves as they are, so
both paths hash the same bytes. ``redacted_hashes`` does the same for the lines
``compress`` parses. With the vault off (``CTXKEEP_VAULT=0``, ``[vault] enabled =
false``) ids hash the raw line, as before the vault (no reparse can be asked then).
"""

from __future__ import annotations

import hashlib

from ctxkeep.sinks import vault
from ctxkeep.sources.contract import Batch

_HEX = 64  # a SHA-256 in hex


def _lines(data: bytes) -> list[bytes]:
    out = data.split(b"\n")
    if out and out[-1] == b"":
        out.pop()
    return [ln[:-1] if ln.endswith(b"\r") else ln for ln in out]


def _remap(data: bytes, red: bytes) -> dict[str, str]:
    """``raw line hash → redacted line hash`` for the lines of ``data`` that redaction
    changed (``red``: ``data`` redacted line by line, the same number of lines)."""
    if red is data or red == data:
        return {}
    out = {}
    a, b = _lines(data), _lines(red)
    if len(a) != len(b):  # (never: redaction keeps newlines) the ids stay the raw ones
        return {}
    for x, y in zip(a, b, strict=True):
        if x != y:
            out[hashlib.sha256(x).hexdigest()] = hashlib.sha256(y).hexdigest()
    return out


def rekey(batches: list[Batch]) -> None:
    """Give the entries of ``batches`` of lines that held a secret the redacted line's
    hash in their ``record_id`` (a ``record_id`` that ends with the raw line's SHA-256
    hex), and keep the redaction on each ``batch.raw.redacted`` for the vault's
    capture. The batches' raw bytes are redacted in one call
    (``vault.redact_raw_many``: one pass of the automata over all their lines).
    Nothing when the vault is off; only append segments."""
    if not vault.enabled():
        return
    todo = [
        (b, b.raw) for b in batches if b.raw is not None and b.raw.mode == "append" and b.raw.redacted is None
    ]
    reds = vault.redact_raw_many([raw.data for _, raw in todo])
    for (batch, raw), (red, counts) in zip(todo, reds, strict=True):
        raw.redacted = (red, dict(counts))
        remap = _remap(raw.data, red)
        if not remap:
            continue
        for e in batch.entries:
            rid = e.get("record_id")
            if isinstance(rid, str) and len(rid) >= _HEX:
                new = remap.get(rid[-_HEX:])
                if new is not None:
                    e["record_id"] = rid[:-_HEX] + new


def redacted_hashes(bodies: list[bytes]) -> dict[bytes, str]:
    """``line body → SHA-256 hex of the redacted line`` for the bodies (lines without
    their newline) that redaction changes, when the vault is on (else ``{}``): the line
    hashes an ingest gave them (``rekey``)."""
    if not bodies or not vault.enabled():
        return {}
    data = b"".join(b + b"\n" for b in bodies)
    red, _ = vault.redact_raw(data)
    if red is data or red == data:
        return {}
    return {x: hashlib.sha256(y).hexdigest() for x, y in zip(bodies, _lines(red), strict=False) if x != y}


__all__ = ["redacted_hashes", "rekey"]
