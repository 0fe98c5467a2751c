"""A JSON line's text as the secret rules should see it: its string escapes decoded,
with where each character came from, so a span found in the decoded text maps back
onto the raw bytes whole (``view``; used by the vault's raw-line redaction,
``sinks.vault.capture.redact_raw``, and by a quarantined line's, ``redact.redact_bytes``).

JSON lets a writer spell any character as ``\\uXXXX`` (RFC 8259, section 7), and
writers do: Go's ``encoding/json`` escapes ``<``, ``>``, ``&``, U+2028 and U+2029 by
default (``json.Marshal``'s doc comment in ``src/encoding/json/encode.go``, go commit
d92bc7a; ``Encoder.SetEscapeHTML(false)`` turns it off; Crush's and opencode-go's SQLite databases
in ``/work/shared/corpus/home/code/`` hold ``\\u003c``, ``\\u003e``, ``\\u0026``),
Python's ``json.dumps`` every non-ASCII character (``ensure_ascii=True``, surrogate pairs
past U+FFFF), Node's ``JSON.stringify`` (Claude Code, Gemini CLI, OpenCode) and
serde_json (Codex) control characters (the corpus' Claude Code files hold
``\\u001b``). A secret so written is one string to a JSON parser (the entries) and
not one to a rule run on the raw line.
"""

from __future__ import annotations

import re
from bisect import bisect_right

#: the one-character escapes decoded, and what they stand for
UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}

#: an escape in a JSON string: ``\\uXXXX`` (a surrogate pair as one; the backslash run
#: before ``u`` of any length, so a ``\\uXXXX`` of JSON text inside a string, written
#: ``\\\\uXXXX``, is decoded too; a lone surrogate is not decoded), or a backslash and
#: the character after it
ESCAPE_RX = re.compile(
    r"\\+u(?:(d[89ab][0-9a-f]{2})\\+u(d[c-f][0-9a-f]{2})|([0-9a-c][0-9a-f]{3}|d[0-7][0-9a-f]{2}|[ef][0-9a-f]{3}))"
    r"|\\.",
    re.IGNORECASE | re.DOTALL,
)

#: ``ESCAPE_RX``'s ``\\uXXXX`` branch alone (``_decoded_text``)
U_ESCAPE_RX = re.compile(ESCAPE_RX.pattern.rsplit("|", 1)[0], re.IGNORECASE)


def _simple(seg: str) -> str:
    """``seg`` (no ``\\uXXXX`` escape that ``ESCAPE_RX`` decodes) with its one-character
    escapes decoded, at C speed: each escaped backslash first (``str.replace`` takes
    leftmost pairs, as the scan does) set aside as a NUL (a character JSON text never
    holds raw; a text that does is split there instead), then ``\\"``, ``\\n``,
    ``\\t``, ``\\r`` (each backslash left is followed by another character, so these do
    not overlap and none makes a new escape), then the NULs back as backslashes."""
    if "\\" not in seg:
        return seg
    if "\0" in seg:
        return "\\".join(_one_char(p) for p in seg.split("\\\\"))
    return _one_char(seg.replace("\\\\", "\0")).replace("\0", "\\")


def _one_char(p: str) -> str:
    return p.replace('\\"', '"').replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")


#: ``\\uXXXX`` escape (as written) → what ``_decoded_text`` puts in its place
_U_CHARS: dict[str, str] = {}


#: decoded characters ``_decoded_text`` cannot hold as they are
_HELD = frozenset("\x01\x02")


class _Held(Exception):
    """A ``\\uXXXX`` escape of U+0001 or U+0002 (``_decoded_text`` then decodes between escapes)."""


def _u_char(m: re.Match) -> str:
    got = _U_CHARS.get(m.group())
    if got is None:
        hi, lo, one = m.groups()
        ch = chr(0x10000 + ((int(hi, 16) - 0xD800) << 10) + int(lo, 16) - 0xDC00) if hi else chr(int(one, 16))
        if ch in _HELD:
            raise _Held
        got = {"\\": "\x02", "\0": "\x01"}.get(ch, ch)
        if len(_U_CHARS) < 65536:
            _U_CHARS[m.group()] = got
    return got


def _decoded_text(text: str, a: int, b: int) -> str:
    """``view``'s text of ``text[a:b]`` decoded, without where its characters come from,
    at C speed but for a dict look-up per ``\\uXXXX`` escape: those first
    (``U_ESCAPE_RX``), then the others (``_simple``). The same text as the scan of
    ``ESCAPE_RX``: a ``\\uXXXX`` match starts at the first backslash of its run (the scan
    enters a run at its start, and a run before a valid ``uXXXX`` is taken whole by
    either), so the character before it is not a backslash; a decoded backslash or NUL
    (``\\u005c``, ``\\u0000``) is held as U+0002 / U+0001 while ``_simple`` runs, so no
    decoded character is read again (a text holding those raw, which JSON text never
    does, is decoded between its escapes instead)."""
    seg = text[a:b]
    if "\\" not in seg:
        return seg
    if "\x01" not in seg and "\x02" not in seg:
        try:
            return _simple(U_ESCAPE_RX.sub(_u_char, seg)).replace("\x02", "\\").replace("\x01", "\0")
        except _Held:
            pass
    out: list[str] = []
    j = a
    for m in U_ESCAPE_RX.finditer(text, a, b):
        out.append(_simple(text[j : m.start()]))
        hi, lo, one = m.groups()
        out.append(
            chr(0x10000 + ((int(hi, 16) - 0xD800) << 10) + int(lo, 16) - 0xDC00) if hi else chr(int(one, 16))
        )
        j = m.end()
    out.append(_simple(text[j:b]))
    return "".join(out)


def view(
    text: str, keep: list[tuple[int, int]] | None = None, decode: bool = True, where: bool = True
) -> tuple[str, list[int], list[int]]:
    """The characters of ``text`` in the ranges ``keep`` (``[start, end)`` offsets, in
    order; default all of it) joined, with ``decode`` JSON's escapes decoded
    (``ESCAPE_RX``: ``\\n``, ``\\t``, ``\\r``, ``\\"``, ``\\\\`` and ``\\uXXXX``, a
    surrogate pair as one character; ``\\/``, ``\\b``, ``\\f`` and a lone surrogate's
    escape stay as written). Returns ``(view, starts, ends)``: view character ``i``
    comes from ``text[starts[i]:ends[i]]`` (all of an escape's characters); without
    ``where`` both lists are empty (the text alone, decoded by ``_decoded_text``: ~50×
    cheaper on a line dense with escapes, e.g. a rows document's JSON within JSON)."""
    if decode and not where:
        return (
            "".join(_decoded_text(text, a, b) for a, b in ([(0, len(text))] if keep is None else keep)),
            [],
            [],
        )
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []

    def plain(a: int, b: int) -> None:
        out.append(text[a:b])
        if where:
            starts.extend(range(a, b))
            ends.extend(range(a + 1, b + 1))

    for a, b in [(0, len(text))] if keep is None else keep:
        if not decode or "\\" not in text[a:b]:
            plain(a, b)
            continue
        j = a
        for m in ESCAPE_RX.finditer(text, a, b):
            s, e = m.span()
            plain(j, s)
            j = e
            hi, lo, one = m.groups()
            if hi:
                ch = chr(0x10000 + ((int(hi, 16) - 0xD800) << 10) + int(lo, 16) - 0xDC00)
            elif one:
                ch = chr(int(one, 16))
            elif text[s + 1] in UNESCAPE:
                ch = UNESCAPE[text[s + 1]]
            else:  # another escape: both characters as they are
                plain(s, e)
                continue
            out.append(ch)
            if where:
                starts.append(s)
                ends.append(e)
        plain(j, b)
    return "".join(out), starts, ends


#: raw characters per block of a ``Located`` view (at least; a block ends where seven
#: characters hold no backslash, so that no escape spans the cut)
BLOCK = 512
_PLAIN7 = re.compile(r"[^\\]{7}")


class Located:
    """``view(text, keep, decode)`` with where its characters come from worked out only
    for the blocks asked about (``start``, ``end``): the text decoded block by block at
    ``_decoded_text``'s speed, then the escape-by-escape scan run on the block of each
    position asked (a line with a secret asks for its spans' ends only). Each block is
    cut where the seven raw characters before the cut and the one after hold no backslash:
    an escape is a backslash run and at most five more characters (``uXXXX``), so none
    spans a cut, and the scan reads each block as it reads the whole."""

    def __init__(self, text: str, keep: list[tuple[int, int]] | None = None, decode: bool = True) -> None:
        self.text, self.decode = text, decode
        self.blocks: list[tuple[int, int, int]] = []  # (raw start, raw end, view offset)
        parts: list[str] = []
        off = 0
        for a, b in [(0, len(text))] if keep is None else keep:
            i = a
            while i < b:
                j = b
                if b - i > BLOCK:
                    m = _PLAIN7.search(text, i + BLOCK, b)
                    if m is not None and m.end() < b:
                        j = m.end() - 1
                seg = _decoded_text(text, i, j) if decode else text[i:j]
                if seg:
                    self.blocks.append((i, j, off))
                    parts.append(seg)
                    off += len(seg)
                i = j
        #: the view (``view(…)[0]``)
        self.view = "".join(parts)
        self._offs = [blk[2] for blk in self.blocks]
        self._where: dict[int, tuple[list[int], list[int]]] = {}

    def _at(self, p: int) -> tuple[int, list[int], list[int]]:
        k = bisect_right(self._offs, p) - 1
        w = self._where.get(k)
        if w is None:
            a, b, _ = self.blocks[k]
            _, s, e = view(self.text, [(a, b)], self.decode)
            w = self._where[k] = (s, e)
        return p - self.blocks[k][2], w[0], w[1]

    def start(self, p: int) -> int:
        """``view(…)[1][p]``: the raw offset where view character ``p`` starts."""
        i, s, _ = self._at(p)
        return s[i]

    def end(self, p: int) -> int:
        """``view(…)[2][p]``: the raw offset where view character ``p`` ends."""
        i, _, e = self._at(p)
        return e[i]
