"""The vault's opaque lines (``capture._opaque_lines``, session 22): the lines holding an
opaque value are found by narrowing the long lines the hint passes in Python, not by
the 1,024-character pattern in the Rust engine; both must pick the same lines and give
the same views, at the length boundaries and for every separator the pattern takes."""

from __future__ import annotations

import random

import polars as pl

from ctxkeep.sinks.vault import capture
from ctxkeep.sinks.vault.capture import OPAQUE_KEEP, OPAQUE_MIN, _narrowed, _opaque_lines

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=_-"
#: the pattern the Rust engine ran before (``_OPAQUE_RX``'s, without its group)
_RUST_OPAQUE = rf'[:\[,][ \t]*"{capture._B64}{{{OPAQUE_MIN},}}"'


def _b64(n: int, rng: random.Random) -> str:
    return "".join(rng.choice(_B64) for _ in range(n))


def _lines(rng: random.Random) -> list[str]:
    out = []
    for n in (127, 128, 1022, 1023, 1024, 1025, 4096):
        v = _b64(n, rng)
        for before in (':"', ': "', ':\t"', '["', ',"', ', \t "', '="', ' "', ':x"'):
            for after in ('"', '"}', "", "!", '\\"'):
                out.append(f'{{"k"{before}{v}{after}}}\n')
    # two values, one long enough; a long value ahead of non-ASCII text; a long line
    # of plain text (no hint); a value with a character outside base64 in it
    out.append('{"a":"' + _b64(200, rng) + '","b":"' + _b64(1500, rng) + '"}\n')
    out.append('{"data":"' + _b64(2000, rng) + '","text":"héllo ✓ 日本"}\n')
    out.append('{"text":"' + "lorem ipsum " * 300 + '"}\n')
    out.append('{"data":"' + _b64(700, rng) + "." + _b64(700, rng) + '"}\n')
    out.append("")
    return out


def test_the_opaque_lines_are_those_the_rust_pattern_matched_with_the_same_views():
    rng = random.Random(22)
    lines = _lines(rng)
    pieces = len(lines)
    for _ in range(300):  # random joins of the pieces above
        a, b = rng.sample(lines, 2)
        lines.append(a.rstrip("\n") + b)
    s = pl.Series(lines, dtype=pl.String)
    want = s.str.contains(_RUST_OPAQUE).arg_true().to_list()
    got, views = _opaque_lines(s, lines)
    assert got == want
    assert len(want) > 100  # (the boundaries above give both outcomes)
    assert views == [_narrowed(lines[i])[0] for i in want]
    for i, v in zip(got, views, strict=True):
        assert len(v) < len(lines[i])
        assert _narrowed(lines[i])[1]  # each view has a cut of its own
    # a value of exactly OPAQUE_MIN characters is opaque, one fewer is not
    plain = [i for i, ln in enumerate(lines[:pieces]) if ln.startswith('{"k":"') and ln.endswith('"}\n')]
    sizes = {len(lines[i]) - len('{"k":""}\n'): i in got for i in plain}
    assert sizes[OPAQUE_MIN] is True and sizes[OPAQUE_MIN - 1] is False
    assert OPAQUE_KEEP * 2 < OPAQUE_MIN


def test_no_long_line_no_opaque_line():
    lines = ['{"k":"' + "A" * 1000 + '"}\n', '{"k":"v"}\n']
    assert _opaque_lines(pl.Series(lines, dtype=pl.String), lines) == ([], [])
