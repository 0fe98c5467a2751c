"""The vault's raw-line redaction splits JSONL as bytes (``capture._byte_lines``: no
decode and ``str.splitlines`` in Python) into the lines the decoding path splits, and
gives the same bytes and counts; data with a line break only ``str.splitlines`` knows,
or not UTF-8, takes the decoding path."""

from __future__ import annotations

import json
import random

import polars as pl

from ctxkeep.sinks.vault import capture
from fixtures.secrets import planted_session, positives


def test_the_break_class_is_exactly_str_splitlines_breaks_beside_newline_and_return():
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    hit = pl.Series(chars, dtype=pl.String).str.contains(capture._STR_ONLY_BREAKS).to_list()
    want = [len(f"a{c}b".splitlines()) == 2 and c not in "\r\n" for c in chars]
    assert hit == want and sum(hit) == 8


def _datas() -> list[bytes]:
    rng = random.Random(18)
    cases = positives(18)
    out = [planted_session(cases), b"", b"\n\n", b'{"a": 1}', b'{"a": "x"}\r\n{"b": "y"}\r{"c": 1}\n']
    for _ in range(40):
        lines = []
        for _ in range(rng.randint(1, 12)):
            text = " ".join(rng.choice(cases).text for _ in range(rng.randint(0, 3)))
            text += rng.choice(["", "é", "\u2027", "\U0001f600", "\\", '"', "\t"])
            lines.append(json.dumps({"text": text}, ensure_ascii=rng.random() < 0.5))
        out.append(("\n".join(lines) + rng.choice(["", "\n", "\r\n"])).encode())
    return out


def test_byte_lines_give_the_decoding_paths_bytes_and_counts(monkeypatch):
    datas = _datas()
    got = capture.redact_raw_many(datas)
    lines, ranges, _, _ = capture._byte_lines(datas)
    assert [lines[i] for i in range(len(lines))] == [
        ln for d in datas for ln in d.decode().splitlines(keepends=True)
    ]
    monkeypatch.setattr(capture, "_byte_lines", lambda datas: None)
    want = capture.redact_raw_many(datas)
    assert got == want
    assert sum(sum(n.values()) for _, n in got) > 50
    assert all(out is d for d, (out, n) in zip(datas, got, strict=True) if not n)  # clean: the same object


def test_a_str_only_break_or_bytes_not_utf8_take_the_decoding_path():
    secret = positives(18)[0].text.encode()
    for odd in (b"\xe2\x80\xa8", b"\x0c", b"\xc2\x85"):
        data = b'{"a": "x' + odd + secret + b'"}\n'
        assert capture._byte_lines([b'{"b": 1}\n', data]) is None
        out, n = capture.redact_raw_many([data])[0]
        assert secret not in out and sum(n.values()) >= 1
    bad = b'{"a": "\xff' + secret + b'"}\n'
    assert capture._byte_lines([bad]) is None
    out, n = capture.redact_raw_many([bad, b'{"b": 1}\n'])[0]
    assert secret not in out and out.startswith(b'{"a": "\xff')
