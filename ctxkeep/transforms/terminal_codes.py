"""A terminal's formatting sequences in stored text, dropped for display:
``strip_formatting_codes``.

Agents store a command's output as the terminal received it: a tool result of
``npm create`` holds ``ESC[?25l ESC[2K ESC[1G ESC[36m?`` around its prompt (the
corpus' Claude Code session fe5e, a ``tool_result``; newuser19 F3). Printed raw such
a sequence drives the user's terminal; escaped (``\\x1b[36m``, what ``cli.safe_text``
does to every control character) it makes half a search snippet noise. The
sequences that only format (colour, cursor moves, erasing, modes, character sets)
are dropped for display; the store keeps the text as the agent wrote it, and
``--json`` returns it so.

Dropped, from ECMA-48 (5th edition, 1991) sections 5.3-5.4 as xterm reads them
(ctlseqs, "C1 (8-Bit) Control Characters", "Functions using CSI"):

- CSI: ``ESC [`` or the 8-bit CSI U+009B, then parameter bytes 0x30-0x3F,
  intermediate bytes 0x20-0x2F and one final byte 0x40-0x7E (``ESC[1;36m``,
  ``ESC[2K``, ``ESC[?25l``, ``ESC[2J``);
- ``ESC`` with intermediate bytes 0x20-0x2F and a final byte 0x30-0x7E
  (``ESC ( B``: a character set);
- two-byte escapes ``ESC`` + 0x30-0x7E (``ESC 7``/``ESC 8`` save and restore the
  cursor, ``ESC M``, ``ESC =``), but for ``ESC [``, the string terminator ``ESC \\``
  and the openers of a control
  string (``ESC ]`` OSC, ``ESC P`` DCS, ``ESC X`` SOS, ``ESC ^`` PM, ``ESC _`` APC).

Kept (and so shown escaped by ``cli.safe_text``): control strings, which carry
content a reader should see: a window title ``ESC]0;…``, a clipboard write
``ESC]52;c;…`` (newuser18's trial wanted those visible), a hyperlink's URL; and every
lone control character. Pure; no I/O."""

from __future__ import annotations

import re

#: the dropped forms of the module's docstring
_FORMATTING_RE = re.compile(
    r"(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]"  # CSI
    r"|\x1b[\x20-\x2f]+[\x30-\x7e]"  # ESC, intermediates, final
    r"|\x1b[\x30-\x4f\x51-\x57\x59-\x5a\x60-\x7e]"  # two-byte: not [ \\ ] P X ^ _
)


def strip_formatting_codes(text: str) -> str:
    """``text`` without the formatting sequences of the module's docstring (CSI,
    character sets, two-byte escapes); control strings (OSC, DCS, …) and every other
    character kept. ``text`` itself when it holds no ESC or CSI (no copy)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _FORMATTING_RE.sub("", text)
