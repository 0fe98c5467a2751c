"""``transforms.terminal_codes.strip_formatting_codes``: a terminal's formatting
sequences are dropped for display, control strings and everything else kept
(newuser19 F3)."""

from __future__ import annotations

import pytest

from ctxkeep.transforms.terminal_codes import strip_formatting_codes

#: the tool result newuser19 found in the corpus (Claude Code, an npm create prompt)
NPM_PROMPT = (
    "\x1b[?25l\x1b[2K\x1b[1G\x1b[36m?\x1b[39m \x1b[1mWould you like your code inside a `src/` "
    "directory?\x1b[22m \x1b[90m›\x1b[39m No \x1b[90m/\x1b[39m \x1b[36m\x1b[4mYes\x1b[39m\x1b[24m"
)


def test_the_corpus_prompt_reads_as_text():
    assert (
        strip_formatting_codes(NPM_PROMPT)
        == "? Would you like your code inside a `src/` directory? › No / Yes"
    )


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2Jcleared\x1b[H", "cleared"),  # erase, cursor home
        ("\x1b(Bplain\x1b7saved\x1b8", "plainsaved"),  # charset, save/restore cursor
        ("\x9b31mred\x9b0m", "red"),  # 8-bit CSI
        ("\x1b[38;2;255;0;0mrgb\x1b[m", "rgb"),
        # control strings carry content: kept (cli.safe_text shows them escaped)
        ("\x1b]0;my title\x07after", "\x1b]0;my title\x07after"),
        ("a\x1b]52;c;ZXZpbA==\x1b\\b", "a\x1b]52;c;ZXZpbA==\x1b\\b"),
        ("x\x1bP1$r0m\x1b\\y", "x\x1bP1$r0m\x1b\\y"),
        ("line 1\nline 2\tcol", "line 1\nline 2\tcol"),  # newline, tab untouched
        ("lone \x1b\nat end \x1b", "lone \x1b\nat end \x1b"),  # a lone ESC is left
        ("bell \x07 and nul \x00", "bell \x07 and nul \x00"),  # other controls left
        ("中文 \x1b[1m粗体\x1b[0m", "中文 粗体"),
        ("[1m not a sequence without ESC", "[1m not a sequence without ESC"),
    ],
)
def test_sequences(raw, shown):
    assert strip_formatting_codes(raw) == shown


def test_no_copy_without_sequences():
    s = "plain text " * 10
    assert strip_formatting_codes(s) is s
