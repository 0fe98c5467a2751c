"""A provider token cut by a line break is redacted as one value in every writer
(newuser18 F1): the trial's own strings (a ``ghp_`` token with a JSON ``\\n`` in a
Claude Code prompt; an ``AKIA`` id wrapped in an Aider history), the other break forms
(``\\r\\n``, a real newline, a ``\\`` continuation, an escape of depth two), and
near-misses that must stay (a prefix-like word before a newline and ordinary prose)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.sinks.vault import redact_raw
from ctxkeep.transforms import wrapped_tokens
from ctxkeep.transforms.redact import redact, redact_counts, redact_series

GHP_A, GHP_B = "ghp_uJ8FgE2t0u1jOfto", "9ro4SAAnehAuuvYNnU04"  # the trial's (fake) token
AWS_A, AWS_B = "AKIABFKKAA", "IYHIN2ZOVI"
PROMPT = (
    f"my github token got wrapped by the terminal: {GHP_A}\n{GHP_B} please put it in .env as GITHUB_TOKEN"
)
AIDER = f"#### please configure boto with key {AWS_A}\n{AWS_B} and secret later  \n"
GH = "[REDACTED:github-token]"
#: an Aider history with the key pasted over two lines of one input, as Aider writes a
#: multi-line input: each line ``#### ``, the one before it ending in two spaces
#: (aider/io.py ``InputOutput.user_input``, v0.86)
FIXTURE = Path(__file__).parents[1] / "fixtures" / "aider" / "wrapped.chat.history.md"
AWS = "[REDACTED:aws-access-key]"


@pytest.mark.parametrize(
    "text,want",
    [
        (PROMPT, f"my github token got wrapped by the terminal: {GH} please put it in .env as GITHUB_TOKEN"),
        (AIDER, f"#### please configure boto with key {AWS} and secret later  \n"),
        (f"token {GHP_A}\r\n{GHP_B}.", f"token {GH}."),
        (f"token {GHP_A}\\n{GHP_B}.", f"token {GH}."),  # JSON-escaped text (a tool result)
        (f"token {GHP_A}\\\\n{GHP_B}.", f"token {GH}."),  # escaped twice
        (f"token {GHP_A}\\r\\n{GHP_B}.", f"token {GH}."),
        # the key names a secret: the password rule's kind names the merged span
        (f"export AWS_ACCESS_KEY_ID={AWS_A}\\\n{AWS_B}\nnext", "export AWS_ACCESS_KEY_ID=[REDACTED:password]\nnext"),
        (f"key {AWS_A}\\\n{AWS_B}\nnext", f"key {AWS}\nnext"),
        (f"key {AWS_A}\n  {AWS_B} ok", f"key {AWS} ok"),  # a wrapped line's indent
        # a github_pat_ (82) over three lines of a narrow terminal
        ("pat github_pat_11ABCDEFG0abcdefghijkl\n_mnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTU\nVWXYZ0123456789abcdefghi end",
         "pat [REDACTED:github-token] end"),
        # a variable-length token whose first part the rule alone redacted: the rest too
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv\nWxYz0123456789abcdEF and more",
         "key [REDACTED:anthropic-key] and more"),
        ("sk_live_51HqLzBEXAMPLE\nabcd1234WXYZ5678 x", "[REDACTED:stripe-key] x"),
    ],
)  # fmt: skip
def test_a_token_cut_by_a_break_is_one_value(text, want):
    assert redact(text) == want
    out, counts = redact_counts(text)
    assert sum(counts.values()) == 1, counts


@pytest.mark.parametrize(
    "text",
    [
        "classic tokens start with ghp_\nfollowed by 36 characters",
        "the AKIA\nprefix is an access key id",
        "set sk_live_\nkeys in the dashboard, not test ones",
        f"a short {GHP_A[:10]}\nword",
        f"{AWS_A}\n{AWS_B}X is seventeen characters",  # 6 + 11: no AWS key id
        f"ghp_{'a' * 20}\n{'b' * 17} one too many",  # 37
        "sk-ant-api03-\nThe next paragraph starts here",
        "sk_live_abcdefghijklmnop1234\nREADME follows",  # the rule's own match, no more
        "xoxb-\n1234567890 is a number",
    ],
)
def test_near_misses_stay(text):
    assert wrapped_tokens.spans(text) == []
    red = redact(text)
    for word in ("followed", "prefix", "keys", "word", "seventeen", "one", "The", "README", "number"):
        if word in text:
            assert word in red, red


def test_the_series_path_finds_them_among_clean_texts():
    texts = ["nothing here", PROMPT, "plain\nprose", AIDER, None]
    counts = __import__("collections").Counter()
    out = redact_series(pl.Series(texts, dtype=pl.String), counts).to_list()
    assert out[0] == "nothing here" and out[2] == "plain\nprose" and out[4] is None
    assert GHP_A not in out[1] and GHP_B not in out[1] and GH in out[1]
    assert AWS_A not in out[3] and AWS_B not in out[3] and AWS in out[3]
    assert counts == {"github-token": 1, "aws-access-key": 1}


def test_the_vault_redacts_the_json_line_and_the_plain_text_lines():
    line = json.dumps({"type": "user", "message": {"role": "user", "content": PROMPT}}).encode() + b"\n"
    red, counts = redact_raw(line)
    assert GHP_A.encode() not in red and GHP_B.encode() not in red
    assert json.loads(red)["message"]["content"].startswith(
        "my github token got wrapped by the terminal: " + GH
    )
    assert counts == {"github-token": 1}
    # an Aider history: redacted line by line, the token across two lines
    md = b"# aider chat started at 2025-06-08 12:00:00\n\n" + AIDER.encode() + b"> Copied.  \n"
    red, counts = redact_raw(md)
    assert AWS_A.encode() not in red and AWS_B.encode() not in red, red
    assert red.count(b"\n") == md.count(b"\n")  # every line kept (the vault's pieces)
    assert counts == {"aws-access-key": 1}
    assert b"with key " + AWS.encode() + b"\n and secret later" in red
    # as Aider writes a pasted two-line input
    red, counts = redact_raw(FIXTURE.read_bytes())
    assert AWS_A.encode() not in red and AWS_B.encode() not in red, red
    assert counts == {"aws-access-key": 1}
    assert b"#### please configure boto with key " + AWS.encode() + b"  \n#### IYHIN2ZOVI" not in red
    assert b"#### please configure boto with key " + AWS.encode() + b"  \n####  and secret later" in red


def _plant(home: Path) -> tuple[Path, Path]:
    """A Claude Code session with the trial's wrapped prompt and an Aider history with
    the wrapped key id, both an hour old."""
    import os
    import time

    from fixtures.bad_input import line, rec

    proj = home / ".claude/projects/-tmp-wrap"
    proj.mkdir(parents=True)
    cc = proj / "00000000-0000-4000-8000-0000000000aa.jsonl"
    cc.write_bytes(line(rec(1, "hello")) + line(rec(2, PROMPT, parent=1)) + line(rec(3, "ok", parent=2)))
    code = home / "code" / "proj"
    code.mkdir(parents=True)
    shutil.copy(
        Path(__file__).parents[1] / "fixtures" / "aider" / "wrapped.chat.history.md",
        code / ".aider.chat.history.md",
    )
    md = code / ".aider.chat.history.md"
    t = time.time() - 3600
    for p in (cc, md):
        os.utime(p, (t, t))
    return cc, md


def test_no_half_reaches_the_store_the_vault_the_exports_or_the_scrubbed_file(tmp_path):
    from test_secret_planted_home import _parquet_strings, _vault_bytes

    home = tmp_path / "home"
    cc, md = _plant(home)
    store = tmp_path / "store"
    e = {"HOME": str(home), "CTXKEEP_HOME": str(store), "CTXKEEP_IDLE_SECONDS": "0"}
    runner = CliRunner()

    def run(*args):
        r = runner.invoke(app, list(args), env=e)
        assert r.exit_code == 0, (args, r.output)
        return r

    run("ingest")
    sec = json.loads(run("secrets", "--json").stdout)
    kinds = {k: v["values"] for k, v in sec["kinds"].items()}
    assert kinds.get("github-token") == 1 and kinds.get("aws-access-key") == 1, kinds
    run("export", "markdown", str(tmp_path / "md"))
    run("export", "parquet", str(tmp_path / "pq"), "--with-text")
    d = json.loads(run("secrets", "--scrub", "--json", str(cc)).stdout)
    assert d["scrubbed"] == 1 and d["values"] == {"github-token": 1}, d
    blobs = [
        (str(p), p.read_bytes())
        for root in (store, tmp_path / "md", tmp_path / "pq")
        for p in root.rglob("*")
        if p.is_file() and "backup" not in p.name
    ]
    blobs += [(str(p) + " (decoded)", _parquet_strings(p)) for p in (tmp_path / "pq").rglob("*.parquet")]
    vault = _vault_bytes(store)
    assert len(vault) >= 2
    blobs += vault + [("scrubbed", cc.read_bytes())]
    leaked = [
        (name, half) for name, blob in blobs for half in (GHP_A, GHP_B, AWS_A, AWS_B) if half.encode() in blob
    ]
    assert leaked == []


def test_a_text_with_lone_surrogates_is_scanned_too():
    # a quarantined line that is not UTF-8 (``redact_bytes``: surrogateescape)
    raw = f"bad \udcff bytes {GHP_A}\\n{GHP_B} end".encode("utf-8", "surrogateescape")
    text = raw.decode("utf-8", "surrogateescape")
    assert wrapped_tokens.spans(text) == [(len("bad \udcff bytes "), len(text) - len(" end"), "github-token")]


def test_the_marker_is_the_redactions():
    from ctxkeep.transforms import redact as r

    assert wrapped_tokens.MARKER == r.MARKER  # (a copy: redact imports wrapped_tokens)


def test_a_token_cut_by_a_torn_line_or_the_quarantine_head_is_redacted():
    """newuser18 F13: a line torn inside a ghp_ token (a crash mid-write), and the head
    a quarantine keeps of an over-long line cut inside one: the cut token's characters
    were stored (quarantine, vault) in clear."""
    from ctxkeep.sources.contract import QUARANTINE_RAW_MAX, quarantine_row
    from ctxkeep.transforms.redact import redact_bytes

    torn = b'{"type":"user","message":{"role":"user","content":"torn line with ghp_38AibNyyurlGFb0EkjKWREhbiG'
    red = redact_bytes(torn)
    assert b"38AibNyy" not in red and red.endswith(b"torn line with [REDACTED:github-token]"), red
    red, counts = redact_raw(torn)  # the vault's copy of the unfinished last line
    assert b"38AibNyy" not in red and counts == {"github-token": 1}
    # a long line whose token straddles the head's end
    head = b'{"type":"user","message":{"content":"' + b"x " * ((QUARANTINE_RAW_MAX - 60) // 2)
    line = head + b"here ghp_kwMJFrCfZ4U2EqkNk6sEr6f4gUy0BQ8DEoFo" + b" y" * 1000 + b'"}}'
    cut = QUARANTINE_RAW_MAX - len(head) - len(b"here ")
    assert 4 < cut < 40  # the head ends inside the token
    q = quarantine_row("/x/s.jsonl", 0, line, "line too long")
    assert b"kwMJFrCf" not in q["raw"] and q["raw"].endswith(b"[REDACTED:github-token]"), q["raw"][-80:]
