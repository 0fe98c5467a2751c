"""The vault's redaction of raw bytes (``sinks.vault.capture.redact_raw``): the same
spans as the exact rules line by line, except inside an opaque payload (a long base64
JSON value: an image, Codex's encrypted reasoning), whose interior is not scanned and
restores intact; a secret-named key's long value is still redacted whole."""

from __future__ import annotations

import json
import random

from ctxkeep.sinks.vault.capture import OPAQUE_KEEP, OPAQUE_MIN, redact_raw
from ctxkeep.transforms.redact import redact_counts
from fixtures.secrets import B64, planted_session, positives


def _image(n: int = 6000, seed: int = 3) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(B64) for _ in range(n)) + "=="


def test_lines_without_opaque_values_are_redacted_exactly_as_the_rules_do():
    data = planted_session(positives(11))
    out, counts = redact_raw(data)
    want = [redact_counts(ln.decode()) for ln in data.splitlines(keepends=True)]
    assert out == "".join(t for t, _ in want).encode()
    assert sum(counts.values()) == sum(sum(n.values()) for _, n in want) > 10


def test_an_image_restores_intact_beside_a_secret_in_the_same_line():
    cases = positives(11)
    # a provider token inside the base64 (the chance match that used to change the image)
    img = _image()[:3000] + "+AKIA" + "Q" * 16 + "/" + _image()[3000:]
    text = "keys:\n" + "\n".join(c.text for c in cases)
    line = json.dumps(
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": img}},
                    {"type": "text", "text": text},
                ]
            },
        }
    )
    out, counts = redact_raw((line + "\n").encode())
    doc = json.loads(out)
    assert doc["message"]["content"][0]["source"]["data"] == img
    kept = doc["message"]["content"][1]["text"]
    assert kept == redact_counts(text)[0] and "[REDACTED:" in kept
    leaked = [s for c in cases for s in c.secrets if s and s in out.decode()]
    assert leaked == []
    assert sum(counts.values()) == sum(redact_counts(text)[1].values())


def test_a_clean_line_with_an_opaque_value_comes_back_as_the_same_bytes():
    data = (json.dumps({"type": "reasoning", "encrypted_content": "gAAAAA" + _image(4000)}) + "\n").encode()
    out, counts = redact_raw(data)
    assert out is data and not counts


def test_a_secret_named_key_with_a_long_value_is_redacted_whole():
    value = _image(OPAQUE_MIN + 3 * OPAQUE_KEEP, seed=5)
    data = (json.dumps({"name": "deploy", "input": {"api_key": value, "region": "eu"}}) + "\n").encode()
    out, counts = redact_raw(data)
    doc = json.loads(out)
    assert doc["input"]["api_key"].startswith("[REDACTED:") and doc["input"]["region"] == "eu"
    assert value[OPAQUE_KEEP:-OPAQUE_KEEP] not in out.decode() and sum(counts.values()) == 1
    # as the exact rules over the whole line redact it
    assert out == redact_counts(data.decode())[0].encode()


def test_a_document_keeps_its_inline_image_and_loses_its_secret():
    cases = positives(7)
    img = _image(2500, seed=9) + "+AKIA" + "Q" * 16 + "/" + _image(2500, seed=10)
    doc = {
        "messages": [
            {"parts": [{"inlineData": {"mimeType": "image/png", "data": img}}]},
            {"parts": [{"text": "\n".join(c.text for c in cases)}]},
        ]
    }
    data = json.dumps(doc, indent=2).encode()
    out, _ = redact_raw(data, whole=True)
    back = json.loads(out)
    assert back["messages"][0]["parts"][0]["inlineData"]["data"] == img
    assert [s for c in cases for s in c.secrets if s and s in out.decode()] == []


def test_gitleaks_samples_inside_json_strings_lose_what_their_texts_lose():
    """Each of gitleaks' true-positive samples written as a message's JSON string: the
    vault's line, decoded, holds none of the values redacting the sample's own text
    removes (before the escapes were decoded for the scan, 111 survived: the XML forms
    ``<xToken>\\n    value`` and ``curl -u "user:pass"``). Left: a secret that ends the
    string, where the line's closing quote and brace differ from the text's end for a
    rule's trailing context."""
    import base64
    from pathlib import Path

    from ctxkeep.transforms.redact import secret_spans

    table = json.loads((Path(__file__).parents[1] / "fixtures/secrets/gitleaks_samples.json").read_text())
    texts = [
        base64.b64decode(tp["b64"]).decode("utf-8", "replace")
        for r in table["rules"].values()
        for tp in r["tp"]
    ]
    lines = [json.dumps({"type": "user", "message": {"content": t}}) + "\n" for t in texts]
    out, counts = redact_raw("".join(lines).encode())
    leaks, ends = [], []
    for t, ln in zip(texts, out.decode().splitlines(), strict=True):
        kept = json.loads(ln)["message"]["content"]  # JSON still (sentry-org-token's class takes '"')
        gone = [t[s:e] for s, e, _ in secret_spans(t)]
        for v in gone:
            if v and v in kept:
                (ends if t.rstrip().endswith(v) else leaks).append((t[:60], v))
    assert len(texts) > 6000 and sum(counts.values()) >= len(texts)
    assert leaks == [] and len(ends) <= 2, (leaks, ends)


def test_a_private_key_begun_in_one_string_and_ended_in_another_leaves_nothing_between():
    """A private-key rule matches from a ``BEGIN`` in one JSON string (a thinking
    block) to an ``END`` in another (a tool input): its span crosses the strings'
    quotes. The line stays JSON, and every value inside the span is still redacted
    (cutting the span at the first quote kept 16 planted values of the planted home's
    Claude session in the vault)."""
    body = "\\n".join("MIIEowIBAAKCAQEA" + "x" * 48 for _ in range(4))
    rec = {
        "type": "assistant",
        "message": {
            "content": [
                {"type": "thinking", "thinking": "a key: -----BEGIN RSA PRIVATE KEY-----\n" + body},
                {
                    "type": "tool_use",
                    "name": "Write",
                    "input": {
                        "content": "aws_access_key_id = AKIAQWB5PDKHX6PYGPAN\n"
                        + body
                        + "\n-----END RSA PRIVATE KEY-----"
                    },
                },
            ]
        },
    }
    line = (json.dumps(rec, separators=(",", ":")) + "\n").encode()
    out, counts = redact_raw(line)
    assert json.loads(out)["type"] == "assistant"
    assert b"AKIAQWB5PDKHX6PYGPAN" not in out and b"MIIEowIBAAKCAQEA" not in out
    # the keys between the strings are kept (the record's shape); the values the span
    # covered go with it
    assert b'"name":"[REDACTED:private-key]","input":{"content":"[REDACTED:private-key]"}' in out
    assert counts["private-key"] >= 1


def test_punctuation_password_in_a_jsonl_line_is_redacted():
    pw = "a!b@c$d()e*_,/:;=?@ff[]22"
    text = f"services:\n  db:\n    environment:\n      - POSTGRES_PASSWORD={pw}\n      PGPASSWORD: {pw}\n"
    line = json.dumps({"type": "tool_result", "content": text}).encode() + b"\n"
    out, counts = redact_raw(line)
    assert b"a!b@c" not in out and b"ff[]22" not in out
    assert counts["password"] == 2
    back = json.loads(out)["content"]
    assert "POSTGRES_PASSWORD=[REDACTED:password]" in back
    assert "PGPASSWORD: [REDACTED:password]" in back


def test_many_captures_redacted_together_equal_each_redacted_alone():
    """``redact_raw_many`` (the pipeline's one call over a chunk of batches) gives each
    capture what ``redact_raw`` gives it alone: a capture without a final newline does
    not join the next one's first line, a clean capture comes back as the same object,
    a capture that is not UTF-8 takes the exact rules in Python, and the counts stay
    per capture."""
    from ctxkeep.sinks.vault.capture import redact_raw_many

    secret = planted_session(positives(7))
    clean = b'{"type":"user","message":{"content":"hello","usage":{"input_tokens":12}}}\n'
    # a line cut before its newline, then a capture whose first line holds the secret's key
    torn = b'{"type":"user","message":{"content":"the password'
    tail = b'": "hunter2-Xq9"}}\n' + secret
    latin = b'{"type":"user","message":{"content":"caf\xe9 password=Zx81-qpLm-77"}}\n'
    datas = [secret, clean, torn, tail, latin, b"", clean + secret]
    got = redact_raw_many(datas)
    want = [redact_raw(d) for d in datas]
    assert got == want
    assert got[1][0] is clean and not got[1][1]
    assert got[2][0] == torn  # alone, "the password" has no value: nothing to redact
    # redacted alone, as ingest reads it: joined to the torn line before it, the value
    # would have been redacted under the other capture's key
    assert got[3][0].startswith(b'": "hunter2-Xq9"}}') and b"Zx81-qpLm-77" not in got[4][0]
    assert sum(got[0][1].values()) > 6 and got[6][1] == got[0][1]


def test_secrets_written_with_unicode_escapes_are_redacted_over_the_escaped_bytes():
    from fixtures.secrets.unicode_escapes import CLEAN_LINES, GHP, session, u_all

    data, secrets = session()
    out, counts = redact_raw(data)
    lines, back = data.splitlines(keepends=True), out.splitlines(keepends=True)
    assert len(back) == len(lines)
    for ln, red in zip(lines[:-CLEAN_LINES], back[:-CLEAN_LINES], strict=True):
        assert b"[REDACTED:" in red, ln
        json.loads(red)  # still JSON: no escape split
    # the clean lines (escapes, surrogate pairs, no secret) come back byte-identical
    assert back[-CLEAN_LINES:] == lines[-CLEAN_LINES:]
    text = out.decode()
    assert not any(s in text or u_all(s) in text for s in secrets)
    assert sum(counts.values()) >= len(lines) - CLEAN_LINES
    # a line with only a lone surrogate escape and nothing to redact is the same object
    clean = b'{"type":"user","text":"a \\ud800 b \\u0041"}\n'
    assert redact_raw(clean)[0] is clean
    assert GHP not in redact_raw(('{"t":"' + u_all(GHP) + '"}\n').encode())[0].decode()


def test_a_quarantined_line_with_unicode_escaped_secrets_is_redacted():
    from ctxkeep.transforms.redact import redact_bytes
    from fixtures.secrets.unicode_escapes import GHP, PASSWORD, u_one

    raw = ('{"x":"password\\u003d' + PASSWORD + " and " + u_one(GHP, 6) + '",,}').encode()
    red = redact_bytes(raw).decode()
    assert PASSWORD not in red and GHP[7:] not in red and red.count("[REDACTED:") == 2, red


def test_a_line_that_is_not_utf8_with_unicode_escaped_secrets_is_redacted():
    from fixtures.secrets.unicode_escapes import GHP, PASSWORD, u_one

    data = b'{"x":"\xff password\\u003d' + PASSWORD.encode() + b" " + u_one(GHP, 6).encode() + b'"}\n'
    out, counts = redact_raw(data)
    assert out.startswith(b'{"x":"\xff ') and sum(counts.values()) == 2, out
    assert PASSWORD.encode() not in out and GHP[7:].encode() not in out


def test_the_exact_path_without_polars_gives_redact_raws_bytes():
    """``redact_raw_exact`` (every line through the exact rules, no Polars: compress's
    check of the few lines the store seems to lack, ``stable_ids.redacted_hashes``)
    gives ``redact_raw``'s bytes and counts: planted secrets, an image beside a secret,
    secrets written with ``\\uXXXX`` escapes, a key begun in one string and ended in
    another, every gitleaks true-positive sample in a JSON string, clean lines (the same
    object), a line that is not UTF-8."""
    import base64
    from pathlib import Path

    from ctxkeep.sinks.vault.capture import redact_raw_exact
    from fixtures.secrets.unicode_escapes import session

    table = json.loads((Path(__file__).parents[1] / "fixtures/secrets/gitleaks_samples.json").read_text())
    samples = [
        base64.b64decode(tp["b64"]).decode("utf-8", "replace")
        for r in table["rules"].values()
        for tp in r["tp"]
    ]
    image = json.dumps(
        {"content": [{"data": _image()[:3000] + "+AKIA" + "Q" * 16 + "/" + _image()[3000:]}, {"text": "hi"}]}
    )
    key = "\\n".join("MIIEowIBAAKCAQEA" + "x" * 48 for _ in range(4))
    split_key = json.dumps(
        {"a": "-----BEGIN RSA PRIVATE KEY-----\n" + key, "b": key + "\n-----END RSA PRIVATE KEY-----"}
    )
    datas = [
        planted_session(positives(11)),
        planted_session(positives(5)),
        session()[0],
        (image + "\n" + split_key + "\n").encode(),
        "".join(json.dumps({"type": "user", "message": {"content": t}}) + "\n" for t in samples).encode(),
        b'{"type":"user","message":{"content":"caf\xe9 password=Zx81-qpLm-77"}}\n',
    ]
    for data in datas:
        got, want = redact_raw_exact(data), redact_raw(data)
        assert got == want and sum(got[1].values()) > 0
    clean = b'{"type":"user","message":{"content":"hello"}}\n{"type":"user","text":"a \\ud800 b"}\n'
    assert redact_raw_exact(clean)[0] is clean and not redact_raw_exact(clean)[1]
