"""A group's whole documents are redacted in one call per kind of view
(``capture._redact_documents``): each document's bytes and counts are
``redact_raw(data, whole=True)``'s, whatever it shares the call with (JSON documents,
whose escapes the rules see decoded, Markdown, bytes that are not UTF-8), and the pack
``Capturer.prepare`` writes holds the same objects."""

from __future__ import annotations

import json

from ctxkeep.sinks.vault import capture
from ctxkeep.sinks.vault.capture import redact_raw
from ctxkeep.sources.contract import RawCapture
from fixtures.secrets import positives


def _raw(name: str, data: bytes, mode: str = "document", **meta) -> RawCapture:
    return RawCapture(f"/tmp/{name}", "gemini-cli", mode, 0, data, 1, 2, len(data), 3, meta)  # type: ignore[arg-type]


def _documents() -> list[RawCapture]:
    cases = positives(11)
    texts = [c.text for c in cases]
    half = len(texts) // 2
    # a JSON session (escaped newlines and quotes around the values), a second one
    # whose value sits beside a \u escape, Markdown (a PEM block across lines), a
    # clean JSON document, bytes that are not UTF-8, and one starting with spaces
    js = json.dumps({"messages": [{"content": "key:\n" + t} for t in texts[:half]]}, indent=1).encode()
    ju = json.dumps({"m": "\u003c" + texts[half] + "\u003e"}, ensure_ascii=False).encode()
    md = ("# notes\n\n" + "\n\n".join(texts[half:]) + "\n").encode()
    clean = json.dumps({"messages": [{"content": "nothing here"}]}).encode()
    latin = b"# caf\xe9\n" + texts[0].encode() + b"\n"
    spaced = b"   \n" + js
    pem = ("notes\n" + texts[-1] + "\n").encode()
    # Markdown holding JSON-like escapes around the values: redacted in a JSON view
    # (escapes decoded) a span would take the ``\\n`` after a JWT
    escaped = ("# n\n" + "".join(f"see:\\n{t}\\n\n" for t in texts)).encode()
    return [
        _raw("a.json", js),
        _raw("b.json", ju),
        _raw("c.md", md),
        _raw("d.json", clean),
        _raw("e.md", latin),
        _raw("f.json", spaced),
        _raw("g.md", pem),
        _raw("h.md", escaped),
    ]


def test_documents_redacted_together_are_each_redacted_as_alone():
    raws = _documents()
    want = [redact_raw(r.data, whole=True) for r in raws]
    assert sum(sum(c.values()) for _, c in want) > 20  # the planted values are found
    capture._redact_documents(raws)
    for r, (red, counts) in zip(raws, want, strict=True):
        assert r.redacted is not None, r.path
        assert r.redacted[0] == red and r.redacted[1] == dict(counts), r.path
    assert raws[3].redacted[0] == raws[3].data  # a clean document unchanged


def test_append_captures_rows_documents_and_a_lone_document_are_left_alone():
    js = _documents()[0].data
    raws = [
        _raw("log.jsonl", b'{"a": 1}\n', mode="append"),
        _raw("rows", b'{"t": "x"}\n', vault_rows=True),
        _raw("one.json", js),
        _raw("one.md", b"# one\n"),
    ]
    capture._redact_documents(raws)
    assert [r.redacted for r in raws] == [None, None, None, None]


def test_prepare_writes_the_same_objects_with_or_without_the_batch(tmp_path, monkeypatch):
    batched = capture.Capturer(tmp_path / "a", None).prepare(_documents())
    monkeypatch.setattr(capture, "_redact_documents", lambda raws: None)
    alone = capture.Capturer(tmp_path / "b", None).prepare(_documents())
    assert batched is not None and alone is not None
    assert [(p.sha, p.stored, p.chunks, p.redactions) for p in batched.items] == [
        (p.sha, p.stored, p.chunks, p.redactions) for p in alone.items
    ]
    assert sorted(o[0] for o in batched.objects) == sorted(o[0] for o in alone.objects)
