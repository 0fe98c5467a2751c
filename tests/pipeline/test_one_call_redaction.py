"""Entry texts redacted in the call that redacts their raw lines (``stable_ids.rekey``,
``vault.redact_raw_and_texts``; ``normalize.normalized_rows`` takes them as they are):
the same entry rows, byte for byte, as when each chunk's texts are redacted in a call
of their own (``CTXKEEP_ONE_CALL=0``), and no planted credential reaches a text, the
vault's bytes or any byte of the store, in every escaping context a JSON line gives a
value: plain, ``\\n``-joined, ``\\"``-quoted, ``\\uXXXX``, split across two content
blocks, a key in one field and the value in the next."""

from __future__ import annotations

import json
import threading
from contextlib import closing

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.pipeline import readahead, stable_ids
from ctxkeep.sources import SOURCES
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.transforms import normalize
from ctxkeep.transforms.redact import TEXT_REDACTED
from fixtures.bad_input import line, rec
from fixtures.secrets import positives

#: cases whose secret a rule finds in the value alone (a provider's token format), so it
#: must be gone however the line spells it
_FORMATS = ("github", "gitlab", "openai", "anthropic", "slack", "stripe", "npm", "huggingface", "sendgrid")


def _u_escaped(s: str) -> str:
    """``s`` as a JSON string's content with every third letter or digit written
    ``\\uXXXX``."""
    out, n = [], 0
    for ch in s:
        if ch.isascii() and ch.isalnum():
            n += 1
            if n % 3 == 0:
                out.append(f"\\u{ord(ch):04x}")
                continue
        out.append(json.dumps(ch, ensure_ascii=False)[1:-1])
    return "".join(out)


def _assistant(i: int, blocks: list[dict]) -> dict:
    r = rec(i, parent=i - 1, rtype="assistant")
    r["message"] = {"role": "assistant", "content": blocks}
    return r


def _session() -> tuple[bytes, list[str], list[str]]:
    """A Claude Code session placing each labelled case in every context; with the
    values a rule finds alone (``_FORMATS``) and all the values."""
    cases = positives(23)
    lines: list[bytes] = [line(rec(1, "start"))]
    n = 1

    def add(r: dict | None = None, raw: bytes | None = None) -> None:
        lines.append(raw if raw is not None else line(r))

    def nxt() -> int:
        nonlocal n
        n += 1
        return n

    strict: list[str] = []
    for c in cases:
        if c.kind in _FORMATS:
            strict += c.secrets
        add(rec(nxt(), c.text, parent=n - 1))  # plain
        add(rec(nxt(), "my config:\n" + c.text + "\nthanks", parent=n - 1))  # \n-joined
        add(rec(nxt(), 'set it to "' + c.text + '" please', parent=n - 1))  # \"-quoted
        u = json.dumps(rec(nxt(), "PLACEHOLDER", parent=n - 1), separators=(",", ":"), ensure_ascii=False)
        add(raw=u.replace("PLACEHOLDER", _u_escaped(c.text)).encode() + b"\n")  # \uXXXX
        for s in c.secrets:  # a value split across two content blocks
            h = len(s) // 2
            add(_assistant(nxt(), [{"type": "text", "text": s[:h]}, {"type": "text", "text": s[h:]}]))
            blocks = [  # a key in one field, the value in the next
                {"type": "text", "text": "export API_TOKEN="},
                {"type": "text", "text": s},
                {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"password": s, "cmd": "env"}},
            ]
            add(_assistant(nxt(), blocks))
    return b"".join(lines), strict, [s for c in cases for s in c.secrets]


@pytest.fixture
def planted(tmp_path):
    home = tmp_path / "home"
    f = home / ".claude" / "projects" / "-tmp-onecall" / "5e551011-0000-4000-8000-0000000000ab.jsonl"
    f.parent.mkdir(parents=True)
    data, strict, values = _session()
    f.write_bytes(data)
    todo = [(x, None) for x in SOURCES["claude-code"].discover(DiscoveryContext(home=home, env={})).files]
    assert todo
    return home, todo, strict, values


def _forms(v: str) -> set[str]:
    return {v, json.dumps(v)[1:-1], json.dumps(json.dumps(v))[3:-3]}


def _rows(todo, one: bool, monkeypatch):
    monkeypatch.setattr(stable_ids, "ONE_CALL", one)
    rows, raws, pre = [], [], 0
    for it in readahead.read_files(todo, rekey_every=readahead.PROCESS_REKEY):
        if it.batch is None:
            continue
        pre += sum(TEXT_REDACTED in e for e in it.batch.entries)
        rows.append(normalize.normalized_rows(it.batch.entries))
        if it.batch.raw is not None and it.batch.raw.redacted is not None:
            raws.append(it.batch.raw.redacted[0])
    return rows, raws, pre


@pytest.mark.parametrize("vault_on", [True, False])
def test_one_call_gives_the_same_rows_and_no_planted_value(planted, monkeypatch, vault_on):
    monkeypatch.setenv("CTXKEEP_VAULT", "1" if vault_on else "0")
    _home, todo, strict, values = planted
    one, raws, pre = _rows(todo, True, monkeypatch)
    two, raws2, pre2 = _rows(todo, False, monkeypatch)
    assert pre > 400 and pre2 == 0  # texts redacted ahead in the one call, none in the other
    assert len(one) == len(two)
    for a, b in zip(one, two, strict=True):
        assert a.equals(b), "entry rows differ between one call and two"
    assert raws == raws2
    assert bool(raws) == vault_on
    texts = "\x00".join(t for f in one for t in f["text"].to_list())
    assert texts.count("[REDACTED:") > 100
    leaked = [v for v in strict if any(form in texts for form in _forms(v))]
    assert leaked == []
    blob = b"".join(raws)
    assert [v for v in strict if any(form.encode() in blob for form in _forms(v))] == []
    if vault_on:  # a key naming the value (``"password": …``) redacts every value in the vault
        assert [v for v in values if json.dumps({"password": v}).encode()[1:-1] in blob] == []


def test_a_text_changed_after_rekey_is_redacted_again(planted, monkeypatch):
    monkeypatch.setenv("CTXKEEP_VAULT", "1")
    monkeypatch.setattr(stable_ids, "ONE_CALL", True)
    _home, todo, strict, _values = planted
    batches = [it.batch for it in readahead.read_files(todo) if it.batch is not None]
    ents = [e for b in batches for e in b.entries if e.get("text")]
    assert all(TEXT_REDACTED in e for e in ents)
    calls = []
    real = normalize.redact_series
    monkeypatch.setattr(normalize, "redact_series", lambda s: (calls.append(s.len()), real(s))[1])
    normalize.normalized_rows(ents)
    assert calls == []  # every text taken as redacted ahead: no call of its own
    ents[0]["text"] = "now " + strict[0]  # replaced after the redaction ahead
    got = normalize.normalized_rows(ents)["text"].to_list()
    assert calls == [1] and strict[0] not in got[0] and got[0].startswith("now [REDACTED:")


@pytest.mark.slow
def test_planted_contexts_reach_no_byte_of_the_store(planted, tmp_path):
    home, _todo, strict, _values = planted
    store = tmp_path / "ctxhome"
    env = {
        "HOME": str(home),
        "CTXKEEP_HOME": str(store),
        "CTXKEEP_IDLE_SECONDS": "0",
        "CTXKEEP_ONE_CALL": "1",
    }
    r = CliRunner().invoke(app, ["ingest"], env=env)
    assert r.exit_code == 0, r.output
    from ctxkeep.sinks import sqlite as sqlite_store
    from ctxkeep.sinks.vault import manifest

    blobs = [p.read_bytes() for p in store.rglob("*") if p.is_file()]
    with closing(sqlite_store.connect(store, readonly=True)) as conn:
        gens = [manifest.gen_bytes(conn, store, g) for g in manifest.generations(conn)]
        n = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    assert gens and n > 400
    blob = b"\x00".join(blobs + gens)
    assert [v for v in strict if any(form.encode() in blob for form in _forms(v))] == []


def _items(todo, **kw) -> list[tuple]:
    out = []
    for it in readahead.read_files(todo, **kw):
        b = it.batch
        if b is None:
            out.append((str(it.file.path), None, it.read))
            continue
        raw = b.raw
        out.append(
            (
                str(it.file.path),
                [e.get("record_id") for e in b.entries],
                normalize.normalized_rows(b.entries),
                b.coverage,
                None if raw is None else (raw.offset, raw.data, raw.redacted, raw.sealed),
            )
        )
    return out


@pytest.mark.parametrize("sealed", [False, True])
def test_redaction_overlapped_with_the_next_read_gives_the_same_items(planted, monkeypatch, sealed):
    """A reader process redacts (and seals) each flush in a thread while it reads the
    next (``read_files(overlap=True)``): the same items in the same order, the same
    entry ids (the lines with secrets rekeyed), rows, coverage and vault bytes as in
    line, with a flush per batch (many in flight one after another)."""
    from ctxkeep.sinks.vault import capture

    monkeypatch.setenv("CTXKEEP_VAULT", "1")
    monkeypatch.setattr(stable_ids, "ONE_CALL", True)
    home, todo, strict, _values = planted
    f = todo[0][0].path
    for k in range(3):  # more files: a batch (and a flush) each
        f.with_name(f"5e551011-0000-4000-8000-00000000010{k}.jsonl").write_bytes(
            f.read_bytes()[: 20000 * (k + 1)]
        )
    todo = [(x, None) for x in SOURCES["claude-code"].discover(DiscoveryContext(home=home, env={})).files]
    seal = capture.seal if sealed else None
    inline = _items(todo, rekey_every=(1, 1), seal=seal)
    monkeypatch.setattr(readahead, "REKEY_OVERLAP", True)
    threads = []
    real = readahead.rekey
    monkeypatch.setattr(
        readahead, "rekey", lambda b: (threads.append(threading.current_thread().name), real(b))
    )
    over = _items(todo, rekey_every=(1, 1), overlap=True, seal=seal)
    assert len(threads) > 3 and all(t.startswith("ctxkeep-rekey") for t in threads)
    assert len(inline) == len(over) > 3  # several batches, each its own flush
    for a, b in zip(inline, over, strict=True):
        assert a[:2] == b[:2]
        if a[1] is not None:
            assert a[2].equals(b[2]) and a[3] == b[3] and a[4] == b[4]
    raws = [x[4] for x in over if x[1] is not None and x[4] is not None]
    assert raws and all((r[3] is not None) == sealed for r in raws)
    if not sealed:  # redacted: no planted value in the vault's bytes
        blob = b"".join(r[2][0] for r in raws)
        assert [v for v in strict if any(form.encode() in blob for form in _forms(v))] == []


def test_a_reader_stopped_early_waits_for_the_redaction_in_flight(planted, monkeypatch):
    """The consumer closes ``read_files(overlap=True)`` after its first item: the close
    returns once the flush in flight is redacted, and raises nothing."""
    monkeypatch.setenv("CTXKEEP_VAULT", "1")
    monkeypatch.setattr(readahead, "REKEY_OVERLAP", True)
    home, todo, _strict, _values = planted
    f = todo[0][0].path
    for k in range(3):
        f.with_name(f"5e551011-0000-4000-8000-00000000020{k}.jsonl").write_bytes(f.read_bytes())
    todo = [(x, None) for x in SOURCES["claude-code"].discover(DiscoveryContext(home=home, env={})).files]
    done = []
    real = readahead.rekey
    monkeypatch.setattr(readahead, "rekey", lambda b: (real(b), done.append(len(b))))
    gen = readahead.read_files(todo, rekey_every=(1, 1), overlap=True)
    first = next(gen)
    assert first.batch is not None and first.batch.raw.redacted is not None
    gen.close()
    assert len(done) == 2  # the first flush, and the one in flight when it was yielded
