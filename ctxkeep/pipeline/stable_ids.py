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

The batches' entry texts are redacted in the same call (``vault.redact_raw_and_texts``;
the vault off: ``vault.redact_texts``), each kept on its entry (``redact.TEXT_REDACTED``),
so ``normalize.normalized_rows`` redacts none again: one call of the redaction's
automata per ``read_files`` flush (16 MiB in a reader process) where there were two
kinds, the texts' in calls a quarter of the size (per chunk of 4 MiB). Each line and
each text is redacted alone, so the entry rows are the same byte for byte
(``tests/pipeline/test_one_call_redaction.py``); a text repeated in the flush (a
resumed session's history: 7,641 distinct of 13,327 texts in 40 MB of the 200 MB
scaled tree) is scanned once. Measured on those 40 MB (read, redaction and
``normalized_rows`` as a reader process runs them, CPU s, min of 3, load 17-20): vault
on 1.62 → 1.46, off 0.90 → 0.76. Skipping the texts
a line's scan proves clean instead (a text found between quotes in a scanned line, no
anchor or suspect keyword in it: byte-identical by construction) was measured and
dropped: it covers the texts the prefilters pass cheaply (~0.08 s saved), and finding
them cost ~0.2 s (``docs/design.md``, "Throughput").
"""

from __future__ import annotations

import hashlib
import os

from ctxkeep.sinks import vault
from ctxkeep.sources.contract import Batch
from ctxkeep.transforms.redact import TEXT_REDACTED

#: ``rekey`` redacts the batches' entry texts too, in the call that redacts their raw
#: lines (``vault.redact_raw_and_texts``); ``CTXKEEP_ONE_CALL=0``: each chunk's texts
#: are redacted by ``normalize.normalized_rows`` in a call of their own, as before (a
#: benchmark's baseline: ``tests/bench/bench_vault.py``)
ONE_CALL = os.environ.get("CTXKEEP_ONE_CALL", "1") != "0"

_HEX = 64  # a SHA-256 in hex
#: the bytes of lines ``redacted_hashes`` redacts by the exact rules alone (above: the
#: Polars gates, whose import and setup cost ~0.15-0.3 s once, are the faster way)
EXACT_BYTES = 256 * 1024


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
    (``vault.redact_raw_and_texts``: one pass of the automata over all their lines),
    with the entries' texts (each kept on its entry as ``redact.TEXT_REDACTED``; with
    ``ONE_CALL``). The vault off: the texts alone; only append segments are rekeyed."""
    ents = (
        [e for b in batches for e in b.entries if isinstance(e.get("text"), str) and e["text"]]
        if ONE_CALL
        else []
    )
    texts = [e["text"] for e in ents]
    uniq = list(dict.fromkeys(texts))  # a text repeated (a resumed session's history) scanned once
    on = vault.enabled()
    todo = [
        (b, b.raw)
        for b in (batches if on else [])
        if b.raw is not None and b.raw.mode == "append" and b.raw.redacted is None
    ]
    datas = [raw.data for _, raw in todo]
    if not datas and not texts:
        return
    try:
        reds, red_u = vault.redact_raw_and_texts(datas, uniq) if on else ([], vault.redact_texts(uniq))
    except (UnicodeError, ValueError):  # a text Polars refuses (never met): the texts left to normalize
        if not texts:
            raise
        reds, red_u, ents = vault.redact_raw_many(datas), uniq, []
    changed = {u: r for u, r in zip(uniq, red_u, strict=False) if r is not u}
    for e, t in zip(ents, texts, strict=False):
        e[TEXT_REDACTED] = (t, changed.get(t, t))
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
    hashes an ingest gave them (``rekey``). Up to ``EXACT_BYTES`` of bodies are
    redacted by the exact rules alone (``vault.redact_raw_exact``: the same bytes,
    without Polars' import and gates: compress's check asks for a few lines)."""
    if not bodies or not vault.enabled():
        return {}
    data = b"".join(b + b"\n" for b in bodies)
    red, _ = vault.redact_raw_exact(data) if len(data) <= EXACT_BYTES else vault.redact_raw(data)
    if red is data or red == data:
        return {}
    return {x: hashlib.sha256(y).hexdigest() for x, y in zip(bodies, _lines(red), strict=False) if x != y}


__all__ = ["redacted_hashes", "rekey"]
