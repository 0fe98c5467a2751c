"""Taking what ingest read into the vault, in two steps around the writer's commit:

1. ``Capturer.prepare`` (in the thread that queues a group, beside the load of the group
   before): redact each capture's bytes (``redact_raw``: the secrets replaced in
   place by ``[REDACTED:<kind>]``, so JSON stays valid), cut a document into
   content-defined chunks (FastCDC, ``fastcdc``), compress the objects the vault lacks
   and write them as one durable pack (``packs.write_pack``).
2. ``record`` (in the writer's transaction, before the watermarks): the manifest rows.
   Objects are durable before the rows that name them commit, and the rows commit with
   the watermarks that say the bytes were read: a crash leaves at worst an orphan pack.

Generations (``vault_generations``): an append file (JSONL) is one generation of
segments in file order (``vault_segments``: file offset and length of the original
bytes, the SHA-256 of the redacted object, and ``skip``: redacted bytes of the object
before the segment's) as long as each capture continues where the last ended. A
capture is cut into pieces (``pieces_of``: FastCDC over its redacted bytes, ~256 KiB),
one object and one segment each, so the bytes two files share are stored once (a
Claude Code resume or fork writes the history before it into a new file); a
capture from inside the generation whose redacted bytes still match it (a re-read from
0 after a parser change, a replaced file with the same head) adds only what is past
its end, as a segment of the same object (``skip``); a file that shrank or whose bytes
differ starts a new generation. A document is one generation per version (its chunks'
SHA-256s in ``chunks``, ``recipe``), skipped when the version is the one held
(``doc_sha``: SHA-256 of the redacted version; a database session's rows document is
built on the version held, its ``doc_sha`` the SHA-256 of its chunk list:
``rows_capture``).

Every pack also carries the manifest record of its captures (``packs.PackBuilder.record``),
so the manifest can be rebuilt from the packs alone (``replay``: a lost ``store.db``);
``record`` decides from the redacted bytes and the manifest only, so the live commit
and a replay make the same rows.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ctxkeep.sinks.vault import recipe
from ctxkeep.sinks.vault.packs import PackBuilder, compress, write_pack
from ctxkeep.sinks.vault.rows_capture import BaseMissing, resolve_delta, seal_rows
from ctxkeep.sources.contract import RawCapture
from ctxkeep.sources.readers.sidecar import SHARED
from ctxkeep.timeutil import format_utc, now_iso
from ctxkeep.transforms import escapes, wrapped_tokens

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

#: FastCDC sizes for documents (bytes): small chunks, so that a document rewritten
#: after every message stores about its changed bytes per version
CDC_MIN, CDC_AVG, CDC_MAX = 512, 2048, 8192
#: FastCDC sizes for an append capture's pieces (bytes): each piece is an object of its
#: own, so bytes two files share (a Claude Code resume or fork writes the history before
#: it into a new file) are stored once; large, because each object is a zstd frame alone
#: and small frames compress worse (``docs/design.md``, "The vault")
SEG_MIN, SEG_AVG, SEG_MAX = 64 * 1024, 256 * 1024, 1024 * 1024


#: an opaque payload: a JSON string value (after ``:``, ``[`` or ``,``) of at least
#: ``OPAQUE_MIN`` base64/base64url characters and nothing else: an image's ``data``
#: (Claude Code, Gemini CLI ``inlineData``), Codex's ``encrypted_content``, a thinking
#: block's ``signature``. Its interior is not scanned for secrets (``redact_raw``).
OPAQUE_MIN = 1024
#: characters kept at each end of an opaque value for the scan: a key naming a secret
#: before it still sees a value (and then redacts all of it, as before)
OPAQUE_KEEP = 128
_B64 = r"[A-Za-z0-9+/=_\-]"
_OPAQUE_RX = re.compile(rf'[:\[,][ \t]*"({_B64}{{{OPAQUE_MIN},}})"')
#: what every line ``_OPAQUE_RX`` matches holds (a quote and 128 of its characters): the
#: Rust engine runs it over every line ~4x faster than ``_OPAQUE_RX``'s pattern, whose
#: counted repetition of 1,024 it runs slowly (0.011 against 0.045 CPU s per 40 MB of the
#: scaled tree's lines); ``_opaque_lines`` narrows the lines it passes only
_OPAQUE_HINT = rf'"{_B64}{{128}}'


#: the shortest line ``_OPAQUE_RX`` can match: a separator, a quote, ``OPAQUE_MIN`` base64
#: characters and the closing quote (ASCII: as many bytes)
_OPAQUE_LINE = OPAQUE_MIN + 3


def _opaque_lines(s: pl.Series, lines: list[str] | _Lines) -> tuple[list[int], list[str]]:
    """The positions of the lines of ``s`` (String, ``lines``' texts) holding an opaque
    value (``_OPAQUE_RX``), in order, and each one ``_narrowed``. The lines of
    ``_OPAQUE_LINE`` bytes or more that ``_OPAQUE_HINT`` passes (Polars) are narrowed
    in Python, and those with a cut are the opaque ones. Before, ``_OPAQUE_RX``'s
    pattern (ASCII: the same matches) ran in the Rust engine over the hinted lines
    first, and its counted repetition over MB-long base64 runs cost more than the hint
    over every line (per 81 MB of a 200 MB ingest's recorded lines, CPU s, the hint,
    that check and the narrowing: 0.147 -> 0.082; the same lines and views)."""
    long = (s.str.len_bytes() >= _OPAQUE_LINE).fill_null(False).arg_true()
    if not long.len():
        return [], []
    hint = long.filter(s.gather(long).str.contains(_OPAQUE_HINT).fill_null(False))
    opaque, narrowed = [], []
    for i in hint.to_list():
        view, cuts = _narrowed(lines[i])
        if cuts:
            opaque.append(i)
            narrowed.append(view)
    return opaque, narrowed


def _narrowed(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with the middle of each opaque value (``OPAQUE_MIN``) cut out (its first
    and last ``OPAQUE_KEEP`` characters kept), and the cuts as ``(offset in the
    narrowed text, characters removed)``, in order."""
    parts, cuts, last, shift = [], [], 0, 0
    for m in _OPAQUE_RX.finditer(text):
        a, b = m.span(1)
        head = a + OPAQUE_KEEP
        parts.append(text[last:head])
        cuts.append((head - shift, b - OPAQUE_KEEP - head))
        shift += b - OPAQUE_KEEP - head
        last = b - OPAQUE_KEEP
    parts.append(text[last:])
    return "".join(parts), cuts


#: the JSON escapes the scan decodes, and what they stand for
_ESCAPES = ("\\\\", '\\"', "\\n", "\\t", "\\r")
_UNESCAPE = escapes.UNESCAPE

#: what tells a line that may hold a ``\uXXXX`` escape (``_decoded`` leaves those to ``_view``)
_U_ESCAPE = "\\u"


def _decoded(s: pl.Series, lines: list[str] | _Lines) -> pl.Series:
    """The texts of ``s`` (the scan texts of ``lines``) with JSON's ``\\n``, ``\\t``,
    ``\\r``, ``\\"`` and ``\\\\`` escapes decoded (``\\/``, ``\\b``, ``\\f`` stay): one
    Aho-Corasick pass (``str.replace_many``, leftmost first, so an escaped backslash is one
    escape), as ``_view`` decodes them. A line holding ``\\u`` is ``_view``'s text instead
    (its ``\\uXXXX`` escapes decoded too, in Python): a line without one pays one
    ``memchr``-speed ``str.contains``."""
    out = s.str.replace_many(list(_ESCAPES), [_UNESCAPE[e[1]] for e in _ESCAPES])
    has_u = s.str.contains(_U_ESCAPE, literal=True).fill_null(False)  # narrowing keeps every backslash
    if has_u.any():
        idx = has_u.arg_true()
        out = out.scatter(idx, [_view(lines[i], True, where=False)[0] for i in idx.to_list()])
    return out


def _view(text: str, decode: bool, where: bool = True) -> tuple[str, list[int], list[int]]:
    """What the rules scan of ``text``: each opaque value narrowed (``_narrowed``) and,
    with ``decode``, JSON's escapes decoded (``escapes.view``: ``\\n``, ``\\t``, ``\\r``,
    ``\\"``, ``\\\\`` and ``\\uXXXX``, a surrogate pair as one character); with where
    each of its characters comes from: ``starts[i]``, ``ends[i]`` (the raw characters of
    view character ``i``: all of an escape's, so a span found in the view covers the
    escaped bytes whole)."""
    return escapes.view(text, _keep(text), decode, where)


def _keep(text: str) -> list[tuple[int, int]]:
    """The ranges of ``text`` the rules scan: all but the middle of each opaque value
    (``_narrowed``)."""
    _, cuts = _narrowed(text)
    keep, last, at = [], 0, 0
    for pos, n in cuts:  # ``pos`` in narrowed offsets: the kept head ends there
        raw_pos = pos + at
        keep.append((last, raw_pos))
        last, at = raw_pos + n, at + n
    keep.append((last, len(text)))
    return keep


def _json(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')


def _in_strings(line: str, span: tuple[int, int, str]) -> list[tuple[int, int, str]]:
    """``span`` cut to its parts inside JSON strings: a span that runs across a
    string's closing quote (a PEM rule matching ``BEGIN`` in one string and ``END`` in
    another, a rule whose class takes ``"``) becomes one span per string value it
    touches, the quotes, object keys and what lies between strings kept, so the line stays JSON and every
    byte the rule matched inside a string is still redacted. Whether ``span`` starts
    inside a string is told by the parity of the unescaped quotes before it. Unchanged
    when it holds no unescaped quote."""
    s, e, k = span
    quotes = [m.end() - 1 for m in _QUOTE.finditer(line, s, e)]
    if not quotes:
        return [span]
    inside = sum(1 for _ in _QUOTE.finditer(line, 0, s)) % 2 == 1
    out, start = [], s
    for q in [*quotes, e]:
        key = q < e and line[q + 1 : q + 16].lstrip()[:1] == ":"
        if inside and q > start and not key:  # object keys kept: the record's shape stays
            out.append((start, q, k))
        inside, start = not inside, q + 1
    return out


def redact_raw(data: bytes, whole: bool = False) -> tuple[bytes, Counter]:
    """``data`` with its secrets redacted (``transforms.redact``) and the values
    replaced per kind. JSONL is redacted line by line (no JSON string holds a raw
    newline); ``whole`` documents as one text (a PEM block in Markdown spans lines).
    Bytes that are not UTF-8 pass unchanged around the markers (``surrogateescape``).
    Clean bytes come back as the same object.

    The rules scan a view of each line (``_view``), and the spans they find there are
    moved back onto the line's own characters:

    - JSON's ``\\n``, ``\\t``, ``\\r``, ``\\"``, ``\\\\`` and ``\\uXXXX`` escapes
      decoded (``transforms.escapes``; ``\\uXXXX`` at any depth of JSON text in a
      string, a surrogate pair as one character: Go's ``encoding/json`` writes ``<`` as
      ``\\u003c``, so a secret beside one, or written with one, was kept) (JSONL,
      and a document that starts with ``{`` or ``[``), as the entries' texts are: in
      the escaped line a rule that allows whitespace between a key and its value did
      not match across ``\\n``, nor a ``curl -u "user:pass"`` rule across ``\\"``
      (111 of gitleaks' 6,059 true-positive samples written in a JSON string, e.g. its
      XML forms ``<xToken>\\n    value``, were redacted in entries, kept in the vault);
    - the interior of an opaque value (``OPAQUE_MIN``: an image, encrypted reasoning)
      left out: it is scanned narrowed to its two ends (``OPAQUE_KEEP``), and a span
      across a cut covers the whole value. The payload then restores intact: a rule
      matching by chance inside base64 changed an image or Codex's encrypted
      reasoning, which the agent can then no longer resume; and it was ~30 % of the
      bytes the vault scanned (``docs/design.md``, "Throughput").

    A span never splits an escape (a decoded one is replaced whole), so JSON stays
    valid; a span that would take a JSON line's closing quote (a rule whose class
    takes ``"``: gitleaks' ``sentry-org-token``; a private key whose ``BEGIN`` is in
    one string and ``END`` in another) is cut to its parts inside strings
    (``_in_strings``): every value it covered stays redacted."""
    return _redact_many([data], whole)[0]


def redact_raw_many(datas: list[bytes]) -> list[tuple[bytes, Counter]]:
    """``[redact_raw(d) for d in datas]`` of JSONL captures (line by line), in one pass
    of the redaction's automata over all their lines: Polars' and the gates' cost per
    call is fixed (regexes compiled, frames built: ~6 ms), and a scaled tree's
    batches are mostly small files (measured on the 50 MB scaled tree, CPU: 1.88 s
    per file, 1.05 s in 4 MiB chunks; ``docs/design.md``, "Throughput"). Each line is
    redacted alone either way, so the results are the same."""
    return _redact_many(datas)


def redact_raw_and_texts(
    datas: list[bytes], texts: list[str]
) -> tuple[list[tuple[bytes, Counter]], list[str]]:
    """``redact_raw_many(datas)`` and ``texts`` (entry texts: ``transforms.redact.
    redact_series`` of them, each the same object when it holds no secret), in one
    call of the redaction's automata over the lines and the texts together: its cost
    per call is fixed (~6 ms and more: Polars' gate regexes compiled, frames built),
    and a reader process redacted its entries' texts in calls of their own, a quarter
    of the size (``pipeline.stable_ids.rekey``; ``docs/design.md``, "Throughput").
    Each line and each text is redacted alone either way: the same results."""
    out: list[str] = []
    return _redact_many(datas, texts=texts, texts_out=out), out


def redact_texts(texts: list[str]) -> list[str]:
    """``texts`` redacted (``transforms.redact.redact_series``), a text that holds no
    secret as the same object."""
    import polars as pl

    from ctxkeep.transforms.redact import redact_series

    if not texts:
        return []
    s = pl.Series(texts, dtype=pl.String)
    return _changed(texts, s, redact_series(s))


def _changed(texts: list[str], s: pl.Series, r: pl.Series) -> list[str]:
    """``texts`` (``s``) with the values ``r`` changed replaced by ``r``'s."""
    if r is s:
        return texts
    out = list(texts)
    idx = (r != s).fill_null(False).arg_true()
    for i, v in zip(idx.to_list(), r.gather(idx).to_list(), strict=True):
        out[i] = v
    return out


def _redact_many(
    datas: list[bytes],
    whole: bool = False,
    texts: list[str] | None = None,
    texts_out: list[str] | None = None,
) -> list[tuple[bytes, Counter]]:
    """``redact_raw`` of each of ``datas`` (``whole``: one document, a list of one);
    ``texts`` redacted in the same call, into ``texts_out`` (``redact_raw_and_texts``)."""
    import polars as pl

    from ctxkeep.transforms.redact import redact_counts, redact_series, replace_spans, secret_spans

    results: list[tuple[bytes, Counter] | None] = [None] * len(datas)
    lines: list[str] | _Lines = []
    text_lines: list[str] = []
    ranges: list[tuple[int, int, int]] = []  # (data index, first line, end line)
    s: pl.Series | None = None
    # (a plain-text file holding a token's prefix: the decoding path, where
    # ``wrapped_tokens.across_lines`` joins a token cut across two lines; nufix18 F1)
    fast = None if whole or wrapped_tokens.plain_with_prefix(datas) else _byte_lines(datas)
    if fast is not None:
        lines, ranges, s, _ = fast
        datas = []  # (the loop below: nothing left to split)
    for j, data in enumerate(datas):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is None:  # not UTF-8: the exact rules in Python, which take lone surrogates
            counts: Counter = Counter()
            parts = [data] if whole else data.splitlines(keepends=True)
            out = []
            for p in parts:
                t = p.decode("utf-8", "surrogateescape")
                if "\\" in t:  # the escapes decoded for the rules, as below
                    view, starts, ends = _view(t, not whole or t.lstrip()[:1] in ("{", "["))
                    t, n = replace_spans(t, [(starts[a], ends[b - 1], k) for a, b, k in secret_spans(view)])
                    counts.update(n)
                t, n = redact_counts(t)
                counts.update(n)
                out.append(t.encode("utf-8", "surrogateescape"))
            new = b"".join(out)
            results[j] = (data if new == data else new), counts
            continue
        first = len(text_lines)
        text_lines += [text] if whole else text.splitlines(keepends=True)
        ranges.append((j, first, len(text_lines)))
    across: dict[int, Counter] = {}
    if fast is None:
        across = wrapped_tokens.across_lines(text_lines, ranges)  # nufix18 F1: tokens cut across lines
        lines = text_lines
    if not ranges:
        if texts and texts_out is not None:
            texts_out.extend(redact_texts(texts))
        return [r for r in results if r is not None]
    decode = not whole or lines[0].lstrip()[:1] in ("{", "[")
    if s is None:
        s = pl.Series(text_lines, dtype=pl.String)
    opaque, narrowed = _opaque_lines(s, lines)
    if opaque:  # (a new Series: ``scatter`` sets in place)
        s = s.clone().scatter(opaque, pl.Series(narrowed, dtype=pl.String))
    if decode:
        s = _decoded(s, lines)
    if texts and texts_out is not None:  # one call: the lines' views, then the texts
        ts = pl.Series(texts, dtype=pl.String)
        both = pl.concat([s, ts])
        r_both = redact_series(both)
        if r_both is both:
            texts_out.extend(texts)
            r = s
        else:
            texts_out.extend(_changed(texts, ts, r_both.slice(len(lines))))
            r = r_both.slice(0, len(lines))
            if not (r != s).fill_null(False).any():
                r = s
    else:
        r = redact_series(s)
    red: dict[int, str] = {}  # the lines with a secret, redacted
    line_counts: dict[int, Counter] = {}
    if r is not s:
        for i in (r != s).fill_null(False).arg_true().to_list():  # the lines with a secret
            red[i], n = _exact_line(lines[i], decode, whole)
            if n:
                line_counts[i] = n
    originals = fast[3] if fast is not None else datas
    # each flagged line's counts added to its data's (in line order), not every line
    # looked up: ~0.1 CPU s of Counter.update calls per 200 MB ingest's lines
    per: dict[int, Counter] = {}
    starts = [a for _, a, _ in ranges]
    for i in sorted(line_counts.keys() | across.keys()):
        got = per.setdefault(bisect.bisect_right(starts, i) - 1, Counter())
        if i in line_counts:
            got.update(line_counts[i])
        got.update(across.get(i, ()))
    for k, (j, a, b) in enumerate(ranges):
        counts = per.get(k, Counter())
        if not counts:
            results[j] = (originals[j], counts)
        elif isinstance(lines, _Lines):
            results[j] = (
                b"".join(red[i].encode("utf-8") if i in red else lines.raw[i] for i in range(a, b)),
                counts,
            )
        else:
            results[j] = ("".join(red.get(i, lines[i]) for i in range(a, b)).encode("utf-8"), counts)
    return [r for r in results if r is not None]


class _Lines:
    """JSONL lines kept as their bytes (``raw``), each decoded when asked for
    (``lines[i]``): ``_redact_many`` reads a few lines' text (the opaque, ``\\u``
    and flagged ones), Polars takes the bytes."""

    def __init__(self, raw: list[bytes]) -> None:
        self.raw = raw

    def __len__(self) -> int:
        return len(self.raw)

    def __getitem__(self, i: int) -> str:
        return self.raw[i].decode("utf-8")


#: the line breaks of ``str.splitlines`` that ``bytes.splitlines`` does not split at
#: (``\\v``, ``\\f``, ``\\x1c``-``\\x1e``, NEL, LINE and PARAGRAPH SEPARATOR;
#: Python's ``str.splitlines`` doc), as a Rust regex class
_STR_ONLY_BREAKS = r"[\x0b\x0c\x1c-\x1e\x{85}\x{2028}\x{2029}]"


def _byte_lines(
    datas: list[bytes],
) -> tuple[_Lines, list[tuple[int, int, int]], pl.Series, list[bytes]] | None:
    """``_redact_many``'s lines of JSONL ``datas`` without decoding them in Python:
    ``(lines, ranges, Series of the lines, datas)``, the lines split as
    ``data.decode().splitlines(keepends=True)`` splits them (the same lines, as
    bytes: no ``str.splitlines``-only break in the data) and checked UTF-8 by Polars.
    None when a data holds such a break or is not UTF-8 (the decoding path then).
    Measured per 36 MB of a scaled tree's lines (CPU s): decode, split and the
    Series' construction ~0.15 -> ~0.06."""
    import polars as pl

    raw: list[bytes] = []
    ranges = []
    for j, d in enumerate(datas):
        first = len(raw)
        raw += d.splitlines(keepends=True)
        ranges.append((j, first, len(raw)))
    try:
        s = pl.Series(raw, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.PolarsError:  # not UTF-8: the decoding path, data by data
        return None
    if s.str.contains(_STR_ONLY_BREAKS).any():
        return None
    return _Lines(raw), ranges, s, datas


def _exact_line(line: str, decode: bool, whole: bool) -> tuple[str, Counter]:
    """``line`` (UTF-8 text; ``decode``, ``whole``: ``_redact_many``'s) redacted by the
    exact rules (``transforms.redact.secret_spans`` of its view) and the values replaced
    per kind: ``_redact_many`` calls it for the lines its Polars gates flag
    (``redact_series`` changed their view), ``redact_raw_exact`` for every line."""
    from ctxkeep.transforms.redact import replace_spans, secret_spans

    # (where each view character comes from, worked out only around the spans found)
    loc = escapes.Located(line, _keep(line), decode)
    spans = [(loc.start(a), loc.end(b - 1), k) for a, b, k in secret_spans(loc.view)]
    if not spans:
        return line, Counter()
    red, n = replace_spans(line, spans)
    if decode and not whole and not _json(red) and _json(line):
        # a span ran across a string's closing quote: keep its parts inside strings
        # (counted once per value found), if the line is JSON then (else it all goes)
        cut, _ = replace_spans(line, [part for sp in spans for part in _in_strings(line, sp)])
        if _json(cut):
            red = cut
    return red, n


def redact_raw_exact(data: bytes) -> tuple[bytes, Counter]:
    """``redact_raw(data)`` of JSONL without Polars: every line goes through the exact
    rules (``_exact_line``), where ``redact_raw`` sends only the lines its Polars
    gates flag (a gate matches wherever its rule does: ``transforms.redact``), so the
    bytes are the same. For a few lines only (compress's check of the lines the store
    seems to lack, ``pipeline.stable_ids.redacted_hashes``): Polars' import and its
    gates' setup were ~0.15-0.3 s of ``compress --check``, the exact rules over a few
    KB take milliseconds; over many lines the gates are faster. Clean bytes come back
    as the same object; bytes that are not UTF-8 take ``redact_raw``'s path."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return redact_raw(data)
    counts: Counter = Counter()
    out = []
    for line in text.splitlines(keepends=True):
        red, n = _exact_line(line, True, False)
        out.append(red)
        counts.update(n)
    return (data, counts) if not counts else ("".join(out).encode("utf-8"), counts)


def pieces_of(data: bytes, red: bytes) -> list[tuple[int, int, int, int]]:
    """An append capture cut into pieces: FastCDC (``SEG_*`` sizes) over ``red`` (``data``
    redacted line by line), each cut moved back onto ``data``: ``(redacted start, end,
    original start, end)`` in order, covering both whole. A cut inside a line redaction
    changed moves to that line's end (where both agree again). One piece when ``red``
    is not longer than ``SEG_MIN`` (or when redaction changed the count of newlines);
    none when it is empty."""
    if not red:
        return []
    if len(red) <= SEG_MIN:
        return [(0, len(red), 0, len(data))]
    from fastcdc import fastcdc

    ends = [c.offset + c.length for c in fastcdc(red, min_size=SEG_MIN, avg_size=SEG_AVG, max_size=SEG_MAX)]
    if red is data or red == data:
        return [(a, b, a, b) for a, b in zip([0, *ends[:-1]], ends, strict=True)]
    # redaction keeps every newline: the n-th line of each holds the same record
    rl, dl = red.split(b"\n"), data.split(b"\n")
    if len(rl) != len(dl):  # (a rule that took a newline) one piece: offsets stay exact
        return [(0, len(red), 0, len(data))]
    r_end, d_end, same = [], [], []
    rp = dp = 0
    for x, y in zip(rl, dl, strict=True):
        rp += len(x) + 1
        dp += len(y) + 1
        r_end.append(rp)
        d_end.append(dp)
        same.append(x == y)
    r_end[-1], d_end[-1] = len(red), len(data)  # (no newline after the last line)
    out: list[tuple[int, int, int, int]] = []
    ra = da = 0
    for c in ends:
        i = bisect.bisect_left(r_end, c)  # the line holding byte c - 1
        if c == r_end[i]:
            d = d_end[i]
        elif same[i]:
            d = d_end[i] - (r_end[i] - c)
        else:
            c, d = r_end[i], d_end[i]
        if c > ra:
            out.append((ra, c, da, d))
            ra, da = c, d
    return out


def chunks_of(data: bytes) -> list[bytes]:
    """``data`` cut into content-defined chunks (FastCDC, ``CDC_*`` sizes)."""
    if len(data) <= CDC_MIN:
        return [data] if data else []
    from fastcdc import fastcdc

    return [
        data[c.offset : c.offset + c.length]
        for c in fastcdc(data, min_size=CDC_MIN, avg_size=CDC_AVG, max_size=CDC_MAX, fat=False)
    ]


@dataclass
class Prepared:
    """One capture made ready: where it was read (``path``, ``agent``, ``mode``,
    ``offset``, ``length`` of the original bytes, stat facts, discovery ``meta``), the
    SHA-256 of its redacted bytes (``sha``: an append segment's object, or the whole
    document) and their size (``stored``), a document's chunk hashes, the values
    redacted per kind. ``red``: the redacted bytes (None after a replay: read from the
    pack when needed)."""

    path: str
    agent: str
    mode: str
    offset: int
    length: int
    dev: int
    ino: int
    size: int
    mtime_ns: int
    meta: dict
    sha: bytes
    stored: int
    chunks: list[bytes]
    redactions: dict[str, int]
    red: bytes | None = field(default=None, repr=False)
    #: ``RawCapture.extra`` (compress's archived ids and moves)
    extra: dict = field(default_factory=dict)
    #: a rows document's running state (``rows_capture``; None for other captures)
    rows_state: dict | None = None
    #: a rows document's chunk list as a delta against the version it was built on
    #: (``rows_capture.SealedRows.delta``): the record keeps it instead of ``chunks``
    rows_delta: dict | None = None
    #: an append capture cut into pieces (``pieces_of``): ``(object SHA-256, original
    #: bytes, redacted bytes)`` each, one segment each; empty: one segment, object ``sha``
    pieces: list[tuple[bytes, int, int]] = field(default_factory=list)

    def as_record(self) -> dict:
        """The pack's record of this capture (JSON-ready; no bytes, no secret)."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("red", "sha", "chunks", "pieces")}
        chunks = [] if self.rows_delta else [c.hex() for c in self.chunks]
        d |= {"sha": self.sha.hex(), "chunks": chunks}
        if self.pieces:
            d["pieces"] = [[h.hex(), n, r] for h, n, r in self.pieces]
        return d

    @classmethod
    def from_record(cls, d: dict) -> Prepared:
        """A capture from a pack's record (``as_record``; a record before pieces: one
        segment)."""
        return cls(
            **{k: v for k, v in d.items() if k not in ("sha", "chunks", "pieces")},
            sha=bytes.fromhex(d["sha"]),
            chunks=[bytes.fromhex(c) for c in d["chunks"]],
            pieces=[(bytes.fromhex(h), n, r) for h, n, r in d.get("pieces", [])],
        )


@dataclass
class PreparedGroup:
    """A group's captures and the pack that holds their new objects
    (``(name, bytes)`` or None) with the objects' ``(sha, offset, stored, raw)``."""

    items: list[Prepared] = field(default_factory=list)
    pack: tuple[str, int] | None = None
    objects: list[tuple[bytes, int, int, int]] = field(default_factory=list)
    #: when the captures were made: the pack record's ``"t"`` (ns since 1970, UTC);
    #: 0 unknown (a record before it): the time it is recorded
    t: int = 0


@dataclass
class Sealed:
    """A capture's bytes made ready for a pack where they were read (``seal``): the
    size of the original bytes (``length``), the SHA-256 (``sha``) and size
    (``stored``) of the redacted bytes (an append capture cut into pieces: the SHA-256
    of its pieces' SHA-256s), a document's chunk hashes, the values redacted per kind,
    ``objects``: ``(sha, zstd frame, raw size)`` of the segment's object or of each
    chunk or piece, compressed (``packs.compress``), and an append capture's
    ``pieces``. Picklable: a reader process sends it instead of the raw bytes (about a
    third of their size)."""

    length: int
    sha: bytes
    stored: int
    chunks: list[bytes]
    redactions: dict[str, int]
    objects: list[tuple[bytes, bytes, int]]
    #: an append capture's pieces (``Prepared.pieces``)
    pieces: list[tuple[bytes, int, int]] = field(default_factory=list)
    #: a database's whole rows document sealed where it was read (``seal(rows=True)``):
    #: its ``rows_capture.SealedRows.state``
    rows_state: dict | None = None


def _seal(
    raw: RawCapture,
    held: Callable[[bytes], bool] = lambda h: False,
    held_of: Callable[[list[bytes]], set[bytes]] | None = None,
) -> tuple[Sealed, bytes]:
    """``raw`` redacted (``redact_raw``), hashed, a document cut into chunks, and the
    objects ``held`` does not name compressed (``held_of``: the held ones of a list of
    SHA-256s at once, asked first for a document's chunks); with the redacted bytes."""
    if raw.redacted is not None:  # redacted by the pipeline (``stable_ids.rekey``)
        red, counts = raw.redacted[0], Counter(raw.redacted[1])
    else:
        # a database's rows document (``sources.readers.rows``) is JSONL: line by line
        whole = raw.mode == "document" and not raw.meta.get("vault_rows")
        red, counts = redact_raw(raw.data, whole=whole)
    chunks: list[bytes] = []
    objects: list[tuple[bytes, bytes, int]] = []
    pieces: list[tuple[bytes, int, int]] = []
    parts: list = []
    cuts = pieces_of(raw.data, red) if raw.mode == "append" else []
    if len(cuts) > 1:  # pieces hashed once: the capture's SHA-256 is their list's
        view = memoryview(red)
        parts = [view[a:b] for a, b, _, _ in cuts]
        pieces = [
            (hashlib.sha256(c).digest(), de - da, b - a)
            for c, (a, b, da, de) in zip(parts, cuts, strict=True)
        ]
        chunks = [h for h, _, _ in pieces]
        sha = hashlib.sha256(b"".join(chunks)).digest()
    else:
        sha = hashlib.sha256(red).digest()
        if raw.mode == "document":
            parts = chunks_of(red)
            chunks = [hashlib.sha256(c).digest() for c in parts]
        else:
            parts, chunks = [red], [sha]
    if held_of is not None and len(chunks) > 1:  # one query for them all
        known = held_of(chunks)
        held = known.__contains__
    done: set[bytes] = set()
    for h, c in zip(chunks, parts, strict=True):
        if h not in done and not held(h):
            done.add(h)
            objects.append((h, compress(c), len(c)))
    doc = raw.mode == "document"
    return Sealed(len(raw.data), sha, len(red), chunks if doc else [], dict(counts), objects, pieces), red


def _redact_documents(raws: list[RawCapture]) -> None:
    """Redact the whole documents among ``raws`` that nothing redacted yet (not sealed,
    not a database's rows) in one ``_redact_many`` call per kind of view (JSON, whose
    escapes the rules see decoded, and the rest), each kept on its ``raw.redacted``
    as ``stable_ids.rekey`` keeps an append capture's, so ``_seal`` redacts none again.
    Each document is redacted alone in the call (``redact_series`` is per text), so
    the bytes are ``redact_raw(data, whole=True)``'s; the call's fixed cost (~6 ms of
    Polars set-up, whatever the size) is paid once per group, not once per document
    (the corpus's first ingest: 7 documents of 0.7-118 KB, 0.085 CPU s in 7 calls)."""
    kinds: dict[bool, list[RawCapture]] = {}
    for raw in raws:
        if raw.sealed is not None or raw.redacted is not None or raw.mode != "document":
            continue
        if raw.meta.get("vault_rows"):
            continue
        try:  # ``_redact_many`` decides the view of a call by its first UTF-8 text
            json_view = raw.data.decode("utf-8").lstrip()[:1] in ("{", "[")
        except UnicodeDecodeError:  # redacted apart in the call (the exact rules in Python)
            json_view = True
        kinds.setdefault(json_view, []).append(raw)
    for group in kinds.values():
        if len(group) < 2:  # one document: ``_seal`` redacts it as it is
            continue
        for raw, (red, counts) in zip(group, _redact_many([r.data for r in group], whole=True), strict=True):
            raw.redacted = (red, dict(counts))


def seal(raw: RawCapture, rows: bool = False) -> RawCapture:
    """``raw`` with its vault work done (``RawCapture.sealed``: redaction, hashes,
    chunks, compression) and its bytes dropped: what a reader process sends to the
    ingest process, whose ``Capturer.prepare`` then only writes the pack. The same
    pack and manifest rows as when the ingest process prepares ``raw`` itself (an
    object the vault holds is compressed here all the same, then left out). A
    database's rows document is left to the ingest process (``rows_capture.seal_rows``
    builds it on the version the vault holds there, scanning only its new lines),
    except with ``rows`` a whole one (no ``rows_base``: built on nothing, so its lines,
    chunks and state are the same wherever it is sealed; the vault's held lines only
    spare their redaction there): the reader started with a first ingest's command
    (``pipeline.prestart``), where the rows documents (Crush's, OpenCode's databases,
    ~0.12 CPU s on the corpus) came last and were sealed after every other transform
    (issue 26). One that ``seal_rows`` refuses is left as it is. So is a sidecar
    several sessions share (``readers.sidecar.SHARED``, a few KB): the ingest process
    takes out what it holds of tombstoned sessions first (``sidecar.captured_without``)."""
    if raw.meta.get(SHARED):
        return raw
    if raw.meta.get("vault_rows"):
        if not rows or raw.meta.get("rows_base") is not None:
            return raw
        try:
            got = seal_rows(raw, None, None, lambda h: False, lambda hs: set(), redact_raw_many, chunks_of)
        except Exception:  # BaseMissing (an empty document, a layout that does not fit): as before
            return raw
        sealed = Sealed(
            got.length, got.sha, got.stored, got.chunks, got.redactions, got.objects, rows_state=got.state
        )
        return dataclasses.replace(raw, data=b"", redacted=None, sealed=sealed)
    sealed, _ = _seal(raw)
    return dataclasses.replace(raw, data=b"", redacted=None, sealed=sealed)


class Capturer:
    """Prepares captures for the vault of ``home`` (``conn``: a connection to its
    store, read to skip objects the vault holds)."""

    def __init__(self, home: Path, conn) -> None:
        self.home, self.conn = Path(home), conn
        #: objects written by this capturer (a group in flight is not committed yet)
        self.written: set[bytes] = set()

    def _held(self, sha: bytes) -> bool:
        if sha in self.written:
            return True
        if self.conn is None:
            return False
        try:
            return (
                self.conn.execute("SELECT 1 FROM vault_objects WHERE sha = ?", (sha,)).fetchone() is not None
            )
        except Exception:  # a store before v11 (read-only plan) or busy: write it again
            return False

    def _held_of(self, shas: list[bytes]) -> set[bytes]:
        """The SHA-256s of ``shas`` the vault holds (``_held`` of each, in one query per
        500): a version of a large document is a hundred thousand chunks."""
        got = {h for h in shas if h in self.written}
        if self.conn is None:
            return got
        todo = list({h for h in shas if h not in got})
        try:
            for i in range(0, len(todo), 500):
                part = todo[i : i + 500]
                got.update(
                    r[0]
                    for r in self.conn.execute(
                        f"SELECT sha FROM vault_objects WHERE sha IN ({','.join('?' * len(part))})", part
                    )
                )
        except Exception:  # a store before v11 (read-only plan) or busy: as ``_held``
            pass
        return got

    def prepare(
        self, raws: list[RawCapture], blobs: dict[bytes, bytes] | None = None
    ) -> PreparedGroup | None:
        """Redact, chunk, compress and write (one pack with its record, durable) the
        captures ``raws``, with ``blobs`` (``SHA-256 → bytes``, already redacted: the
        media compress moves out, named by a capture's ``extra["media"]``). Returns
        None when there are none. Raises OSError when the pack cannot be written (the
        group is then not stored: nothing is lost, the watermark stays)."""
        if not raws:
            return None
        out = PreparedGroup()
        b = PackBuilder()
        _redact_documents(raws)
        for sha, data in (blobs or {}).items():
            if not self._held(sha):
                b.add(sha, data)
        for raw in raws:
            red = None
            sealed = raw.sealed
            rows_state = rows_delta = None
            if sealed is None and raw.redacted is None and raw.meta.get("vault_rows"):
                try:  # a database session's rows: built on the version held (``rows_capture``)
                    got = seal_rows(
                        raw, self.conn, self.home, self._held, self._held_of, redact_raw_many, chunks_of
                    )
                except BaseMissing as e:  # not taken now: the plan has the reader send it whole
                    log.warning("vault: %s not captured (%s)", raw.path, e)
                    continue
                sealed = Sealed(got.length, got.sha, got.stored, got.chunks, got.redactions, got.objects)
                rows_state, rows_delta = got.state, got.delta
            elif sealed is None:  # read in this process: sealed here, objects held skipped
                sealed, red = _seal(raw, self._held, self._held_of)
            else:  # sealed by a reader process (a whole rows document: with its state)
                rows_state = sealed.rows_state
            held = self._held_of([h for h, _, _ in sealed.objects])
            for h, z, n in sealed.objects:
                if h not in held:
                    b.add_frame(h, z, n)
            out.items.append(
                Prepared(
                    raw.path,
                    raw.agent,
                    raw.mode,
                    raw.offset,
                    sealed.length,
                    raw.dev,
                    raw.ino,
                    raw.size,
                    raw.mtime_ns,
                    dict(raw.meta),
                    sealed.sha,
                    sealed.stored,
                    sealed.chunks,
                    dict(sealed.redactions),
                    red,
                    dict(raw.extra),
                    rows_state,
                    rows_delta,
                    list(sealed.pieces),
                )
            )
        if not out.items and not b.objects:
            return None
        out.t = time.time_ns()
        b.record = {"v": 1, "t": out.t, "captures": [p.as_record() for p in out.items]}
        out.pack = write_pack(self.home, b)
        out.objects = b.objects
        self.written.update(o[0] for o in b.objects)
        return out


def _insert_objects(conn, g: PreparedGroup, stamp: str) -> None:
    if g.pack is None:
        return
    name, size = g.pack
    conn.execute(
        "INSERT OR IGNORE INTO vault_packs(name, bytes, created_at) VALUES(?,?,?)", (name, size, stamp)
    )
    pack_id = conn.execute("SELECT pack_id FROM vault_packs WHERE name = ?", (name,)).fetchone()[0]
    conn.executemany(
        "INSERT OR IGNORE INTO vault_objects(sha, pack_id, offset, stored, raw) VALUES(?,?,?,?,?)",
        [(sha, pack_id, off, st, rw) for sha, off, st, rw in g.objects],
    )


def _file_id(conn, p: Prepared) -> int:
    row = conn.execute("SELECT vfile_id FROM vault_files WHERE path = ?", (p.path,)).fetchone()
    if row:
        return row[0]
    return conn.execute(
        "INSERT INTO vault_files(path, agent, mode, meta) VALUES(?,?,?,?)",
        (p.path, p.agent, p.mode, json.dumps(p.meta, default=str, sort_keys=True)),
    ).lastrowid


def _chunk_list(conn, vfile_id: int, p: Prepared) -> bytes:
    """``p``'s chunk list as stored: a delta against the file's newest version
    (``recipe``)."""
    prev = conn.execute(
        "SELECT gen_id, chunks FROM vault_generations WHERE vfile_id = ? AND chunks IS NOT NULL "
        "ORDER BY gen DESC LIMIT 1",
        (vfile_id,),
    ).fetchone()
    if prev is None:
        return recipe.encode(p.chunks, None, None, 0)
    try:
        base = recipe.decode(prev[1], lambda gid: _stored_list(conn, gid))
    except ValueError:
        return recipe.encode(p.chunks, None, None, 0)
    return recipe.encode(p.chunks, base, prev[0], recipe.depth(prev[1]))


def _stored_list(conn, gen_id: int) -> bytes | None:
    row = conn.execute("SELECT chunks FROM vault_generations WHERE gen_id = ?", (gen_id,)).fetchone()
    return row[0] if row else None


def _new_generation(conn, vfile_id: int, p: Prepared, stamp: str, floor: int = 0) -> int:
    """A new generation of ``p``'s file, numbered after its newest (and after ``floor``:
    the generations a retention pruned, ``prune.dropped``, in a replay)."""
    gen = conn.execute(
        "SELECT max(coalesce(max(gen), 0), ?) + 1 FROM vault_generations WHERE vfile_id = ?",
        (floor, vfile_id),
    ).fetchone()[0]
    doc = p.mode == "document"
    return conn.execute(
        "INSERT INTO vault_generations(vfile_id, gen, start, length, stored, dev, ino, size, mtime_ns, "
        "created_at, updated_at, redactions, doc_sha, chunks, rows_state) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            vfile_id,
            gen,
            p.offset,
            p.length if doc else 0,
            p.stored if doc else 0,
            p.dev,
            p.ino,
            p.size,
            p.mtime_ns,
            stamp,
            stamp,
            json.dumps(p.redactions, sort_keys=True) if doc else "{}",
            p.sha if doc else None,
            _chunk_list(conn, vfile_id, p) if doc else None,
            json.dumps(p.rows_state, sort_keys=True) if p.rows_state is not None else None,
        ),
    ).lastrowid


def _append_segment(conn, gen_id: int, p: Prepared, stamp: str, skip: int = 0, skip_orig: int = 0) -> None:
    """Add ``p`` (from ``skip`` redacted / ``skip_orig`` original bytes on) as the next
    segments of generation ``gen_id``: one per piece (``Prepared.pieces``; a piece
    ``skip`` begins inside is skipped into), or one of object ``sha``."""
    seq = conn.execute(
        "SELECT coalesce(max(seq), -1) + 1 FROM vault_segments WHERE gen_id = ?", (gen_id,)
    ).fetchone()[0]
    rows: list[tuple[int, int, int, int, bytes, int]] = []
    at = at_red = 0  # where the piece starts in the capture (original, redacted bytes)
    for sha, n, r in p.pieces or [(p.sha, p.length, p.stored)]:
        if at + n > skip_orig:
            cut, cut_red = max(0, skip_orig - at), max(0, skip - at_red)
            rows.append((gen_id, seq + len(rows), p.offset + at + cut, n - cut, sha, cut_red))
        at += n
        at_red += r
    conn.executemany(
        "INSERT INTO vault_segments(gen_id, seq, offset, length, sha, skip) VALUES(?,?,?,?,?,?)", rows
    )
    old = json.loads(
        conn.execute("SELECT redactions FROM vault_generations WHERE gen_id = ?", (gen_id,)).fetchone()[0]
        or "{}"
    )
    merged = Counter(old)
    if not skip_orig:
        merged.update(p.redactions)
    conn.execute(
        "UPDATE vault_generations SET length = length + ?, stored = stored + ?, dev = ?, ino = ?, size = ?, "
        "mtime_ns = ?, updated_at = ?, redactions = ? WHERE gen_id = ?",
        (
            p.length - skip_orig,
            p.stored - skip,
            p.dev,
            p.ino,
            p.size,
            p.mtime_ns,
            stamp,
            json.dumps(dict(merged), sort_keys=True),
            gen_id,
        ),
    )


#: ``load(sha) -> bytes``: an object's redacted bytes, checked (``manifest.read_sha``)
Load = Callable[[bytes], bytes]


def _held_prefix(conn, gen_id: int, p: Prepared, red: bytes, load: Load) -> tuple[int, int] | None:
    """How much of ``p`` (from its offset) generation ``gen_id`` holds already, as
    ``(original bytes, redacted bytes)``: its segments from ``p``'s offset on, compared
    by their redacted bytes with ``red``; None when ``p`` starts inside a segment or a
    segment differs."""
    segs = conn.execute(
        "SELECT offset, length, sha, skip FROM vault_segments WHERE gen_id = ? AND offset + length > ? "
        "ORDER BY seq",
        (gen_id, p.offset),
    ).fetchall()
    held = held_red = 0
    for off, length, sha, skip in segs:
        if off != p.offset + held:
            return None
        data = load(sha)[skip:]
        if held + length > p.length:  # ``p`` ends inside this segment: its bytes begin it
            return (p.length, len(red)) if data.startswith(red[held_red:]) else None
        if red[held_red : held_red + len(data)] != data:
            return None
        held += length
        held_red += len(data)
    return held, held_red


def record(
    conn, home: Path, g: PreparedGroup | None, load: Load | None = None, floors: dict[str, int] | None = None
) -> None:
    """The manifest rows of a prepared (or replayed) group, in the caller's
    transaction (the one that stores the group's watermarks): the pack and its
    objects, files, generations, segments (see the module doc for when a generation
    starts). ``load`` reads an object (default: from the vault of ``home``);
    ``floors`` (a replay): per path hash, the generations a retention pruned, which a
    new generation of the file is numbered after. The pack's and the generations'
    times are the group's ``t`` (its pack record's: a replay gives each generation the
    time it was captured, not the time of the rebuild)."""
    if g is None:
        return
    from ctxkeep.sinks.vault.manifest import read_sha

    load = load or (lambda sha: read_sha(conn, home, sha))
    stamp = _stamp_of(g.t) if g.t else now_iso()
    _insert_objects(conn, g, stamp)
    for p in g.items:
        floor = 0
        if floors:
            from ctxkeep.sinks.vault.forget import path_hash

            floor = floors.get(path_hash(p.path), 0)
        _record_one(conn, p, stamp, load, floor)
        if p.extra.get("media"):
            _record_media(conn, p)


def _stamp_of(t_ns: int) -> str:
    """A pack record's time (ns since 1970, UTC) as stored-time text (``UTC_FORMAT``),
    to the microsecond, exactly (no float)."""
    import datetime as dt

    return format_utc(dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=t_ns // 1000))


def _record_media(conn, p: Prepared) -> None:
    """The ``vault_media`` rows of a capture compress made (``extra["media"]``: ``[[entry
    id, seq, media type, object SHA-256 hex, text flag], …]``), on the file's newest
    generation (the one the capture started)."""
    gen_id = conn.execute(
        "SELECT g.gen_id FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id "
        "WHERE f.path = ? ORDER BY g.gen DESC LIMIT 1",
        (p.path,),
    ).fetchone()[0]
    conn.executemany(
        "INSERT OR REPLACE INTO vault_media(gen_id, entry_id, seq, media_type, sha, text) VALUES(?,?,?,?,?,?)",
        [(gen_id, e, seq, mt, bytes.fromhex(sha), int(bool(t))) for e, seq, mt, sha, t in p.extra["media"]],
    )


def _record_one(conn, p: Prepared, stamp: str, load: Load, floor: int = 0) -> None:
    """The manifest rows of one capture (``record``)."""
    vfile_id = _file_id(conn, p)
    cur = conn.execute(
        "SELECT gen_id, start, length, doc_sha FROM vault_generations WHERE vfile_id = ? "
        "ORDER BY gen DESC LIMIT 1",
        (vfile_id,),
    ).fetchone()
    if p.mode == "document":
        if p.rows_delta and not p.chunks:  # a replayed record: its list from its base's
            got = resolve_delta(conn, p.path, p.rows_delta)
            if got is None:
                log.warning("vault: %s: the version a replayed capture was built on is gone", p.path)
                return
            p.chunks = got
        if cur is not None and cur[3] == p.sha:
            if p.rows_state is not None:  # the reader's token of it now (``rows_capture``)
                conn.execute(
                    "UPDATE vault_generations SET rows_state = ? WHERE gen_id = ?",
                    (json.dumps(p.rows_state, sort_keys=True), cur[0]),
                )
            return  # the version held (a re-read after a parser change)
        _new_generation(conn, vfile_id, p, stamp, floor)
        return
    if cur is None:
        _append_segment(conn, _new_generation(conn, vfile_id, p, stamp, floor), p, stamp)
        return
    gen_id, start, length, _ = cur
    end = start + length
    if p.offset == end:
        _append_segment(conn, gen_id, p, stamp)
        return
    held = None
    if start <= p.offset < end and p.size >= end:  # (a file now shorter: a new generation)
        red = p.red if p.red is not None else b"".join(load(h) for h, _, _ in p.pieces or [(p.sha, 0, 0)])
        held = _held_prefix(conn, gen_id, p, red, load)
    if held is None:  # shrank, replaced, or bytes that differ: a new generation
        _append_segment(conn, _new_generation(conn, vfile_id, p, stamp, floor), p, stamp)
        return
    if held[0] >= p.length:
        return  # every byte held already
    _append_segment(conn, gen_id, p, stamp, skip=held[1], skip_orig=held[0])


def _unnamed_groups(
    conn, home: Path
) -> tuple[list[tuple[str, Path, PreparedGroup | None]], dict[str, int], bool]:
    """The packs on disk the manifest does not name, in the order they were written
    (their records' time, then name), each with the group a replay records (None: the
    pack has no readable record): its captures less those of files a purge forgot
    (``forget.forgotten``) and of generations a retention pruned (``prune``). Also the
    pruned files' generation floors (``record``'s ``floors``) and whether any capture
    was left out for those reasons."""
    from ctxkeep.sinks.vault import prune
    from ctxkeep.sinks.vault.forget import forgotten, path_hash
    from ctxkeep.sinks.vault.packs import pack_names, read_record

    gone = forgotten(home)  # files a purge removed: never brought back
    known = {r[0] for r in conn.execute("SELECT name FROM vault_packs")}
    recs, bare = [], []
    for name, path in pack_names(home):
        if name in known:
            continue
        got = read_record(path)
        if got is None:
            bare.append((name, path, None))
        else:
            recs.append((got[0].get("t", 0), name, path, got))
    recs.sort(key=lambda r: (r[0], r[1]))
    # captures of generations a retention pruned (``prune``: every capture of the file
    # up to its cut) stay out, and the kept generations keep their numbers
    cuts = prune.cuts(home)
    drop, floors = prune.dropped(
        [
            ((name, j), {k: v for k, v in c.items() if k != "chunks"})
            for _, name, _, (rec, _) in recs
            for j, c in enumerate(rec.get("captures", []))
            if path_hash(c.get("path", "")) in cuts
        ],
        cuts,
    )
    out: list[tuple[str, Path, PreparedGroup | None]] = []
    for _, name, path, (rec, objects) in recs:
        caps = [
            Prepared.from_record(c)
            for j, c in enumerate(rec.get("captures", []))
            if path_hash(c["path"]) not in gone and (name, j) not in drop
        ]
        # the generations and the pack get the time the record holds: when they were captured
        out.append((name, path, PreparedGroup(caps, (name, path.stat().st_size), objects, rec.get("t", 0))))
    return out + bare, floors, bool(gone or drop)


def replay(conn, home: Path, progress=None) -> int:
    """Rebuild the manifest from the packs' records (a lost or emptied ``store.db``, a
    store backup older than the vault), in the caller's transaction: every pack the
    manifest does not name, in the order they were written, its objects and captures
    recorded as at ingest. Returns the packs replayed. Packs without a
    record are skipped (named by ``vault verify --full``)."""
    from ctxkeep.sinks.vault.forget import used_objects

    groups, floors, left_out = _unnamed_groups(conn, home)
    recs = [g for _, _, g in groups if g is not None]
    for i, g in enumerate(recs, 1):
        record(conn, home, g, floors=floors)
        if progress:
            progress(i, len(recs))
    if (
        left_out and recs
    ):  # objects only forgotten or pruned captures used: their rows go (``forget.sweep`` the bytes)
        used = used_objects(conn)
        conn.executemany(
            "DELETE FROM vault_objects WHERE sha = ?",
            [(r[0],) for r in conn.execute("SELECT sha FROM vault_objects").fetchall() if r[0] not in used],
        )
    return len(recs)


#: what a replay of a pack can add that the store would miss without it: the files,
#: their generations (and how far they reach), segments and media rows
_HELD_SQL = (
    "SELECT (SELECT count(*) FROM vault_files), (SELECT count(*) FROM vault_generations), "
    "(SELECT coalesce(sum(length), 0) FROM vault_generations), (SELECT count(*) FROM vault_segments), "
    "(SELECT count(*) FROM vault_media)"
)


def orphan_verdicts(conn, home: Path) -> list[tuple[Path, bool, str]]:
    """Each pack on disk the manifest does not name (an orphan), with whether it may be
    removed and why: ``(path, removable, why)``. A pack may go when a replay of it
    (``replay``'s rows, tried alone in a savepoint of ``conn`` and rolled back) adds no
    file, generation, byte of a generation, segment or media row: what it holds is
    held already (a run killed between a pack and its commit, then read again; a
    purge's rewrite killed before the old pack's removal) or was purged. A pack whose
    replay would add rows holds captures the store lacks (a store restored from an
    older backup: ``doctor --repair`` replays it) and stays; so does a pack without a
    readable record (nothing can tell what it holds). The caller holds the store lock:
    a running ingest's pack is named only at its group's commit, or reuses an orphan
    with the same bytes (``packs.write_pack``), so an orphan is only safe to judge and
    remove while no run can commit. ``conn`` must be writable (the savepoint); nothing
    is changed."""
    groups, floors, _ = _unnamed_groups(conn, home)
    out: list[tuple[Path, bool, str]] = []
    for _, path, g in groups:
        if g is None:
            out.append((path, False, "no readable record: left in place"))
            continue
        before = conn.execute(_HELD_SQL).fetchone()
        conn.execute("SAVEPOINT orphan_trial")
        try:
            record(conn, home, g, floors=floors)
            after = conn.execute(_HELD_SQL).fetchone()
        finally:
            conn.execute("ROLLBACK TO orphan_trial")
            conn.execute("RELEASE orphan_trial")
        if after == before:
            out.append((path, True, "everything it holds is held already (or was purged)"))
        else:
            out.append((path, False, "holds captures the store lacks: `ctxkeep doctor --repair` replays it"))
    return out


__all__ = [
    "CDC_AVG",
    "CDC_MAX",
    "CDC_MIN",
    "Capturer",
    "Prepared",
    "PreparedGroup",
    "Sealed",
    "chunks_of",
    "orphan_verdicts",
    "record",
    "redact_raw",
    "redact_raw_and_texts",
    "redact_raw_many",
    "redact_texts",
    "replay",
    "seal",
]
