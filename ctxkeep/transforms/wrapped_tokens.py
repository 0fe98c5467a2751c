"""Tokens cut by a line break: a provider's token pasted from a wrapped terminal, or
written across a line, redacted as one value (newuser18 F1).

A token the context rules know by its prefix (``transforms.redact.RULES``) is missed
when a break falls inside it: ``ghp_uJ8FgE2t0u1jOfto\\n9ro4SAAnehAuuvYNnU04`` (a JSON
``\\n`` in a Claude Code prompt), ``AKIABFKKAA`` at the end of one line of an Aider
history and ``IYHIN2ZOVI`` at the start of the next; neither half matches the rule's
length, so both were stored, vaulted and exported in clear. Here the prefix's part and
what follows the break are joined and judged as the rule would judge the token:

- a break is a newline (``\\n``, ``\\r\\n``), optionally after a ``\\`` (a shell
  continuation), or the same written as JSON escapes at any depth (``\\n``,
  ``\\r\\n``, ``\\\\n``), then at most 4 spaces or tabs (a wrapped line's indent);
- a fixed-length token (``FIXED``: GitHub's ``ghp_``… + 36, ``github_pat_`` + 82, AWS
  key ids + 16, npm + 36, Google ``AIza`` + 35, Hugging Face ``hf_`` + 34; the
  providers' formats as ``transforms.redact.RULES`` has them) counts when its parts,
  up to 4 breaks, add up to exactly the rule's length of its charset and the last
  part ends at a token end: a prefix-like word before a newline followed by prose
  (``the ghp_\\nprefix …``) adds up to no length a token has;
- a variable-length token (``OPEN``: ``sk-ant-``, ``sk-proj-``, Stripe ``sk_live_``…,
  Slack ``xox?-``, GitLab ``glpat-``) counts across one break when what follows it is
  one run of the charset holding a digit and a letter (8 or more characters) and the
  whole reaches the rule's minimum: a word or a number after the break stays.

``spans(text)`` gives ``(start, end, kind)`` for ``transforms.redact._spans`` (so every
writer that redacts a text, a JSON line's decoded view or a quarantined line has
them: the store, the vault, exports, ``secrets --scrub``); ``HINT`` is the Polars
prefilter (``hinted``: only texts holding a prefix right before a break go to Python);
``across_lines`` joins a line that ends in a token's first part with the next line, for
the vault's line-by-line redaction of plain-text files (an Aider history).
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Polars is imported where a Series is made
    import polars as pl

#: ``(kind, prefix regex, charset class, token length after the prefix)``
FIXED: list[tuple[str, str, str, int]] = [
    ("github-token", r"(?<![A-Za-z0-9_\-])(?:ghp|gho|ghu|ghs|ghr)_", "A-Za-z0-9", 36),
    ("github-token", r"(?<![A-Za-z0-9_\-])github_pat_", "A-Za-z0-9_", 82),
    ("aws-access-key", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])", "A-Z0-9", 16),
    ("npm-token", r"(?<![A-Za-z0-9_\-])npm_", "A-Za-z0-9", 36),
    ("google-api-key", r"(?<![A-Za-z0-9_\-])AIza", r"0-9A-Za-z_\-", 35),
    ("huggingface-token", r"(?<![A-Za-z0-9_\-])hf_", "A-Za-z0-9", 34),
]
#: ``(kind, prefix regex, charset class, the rule's least length after the prefix)``
OPEN: list[tuple[str, str, str, int]] = [
    ("anthropic-key", r"(?<![A-Za-z0-9_\-])sk-ant-", r"A-Za-z0-9_\-", 20),
    ("openai-key", r"(?<![A-Za-z0-9_\-])sk-(?:proj|svcacct|admin)-", r"A-Za-z0-9_\-", 20),
    ("stripe-key", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_", "A-Za-z0-9", 16),
    ("slack-token", r"(?<![A-Za-z0-9_\-])xox[abeoprs]-", r"A-Za-z0-9\-", 10),
    ("gitlab-token", r"(?<![A-Za-z0-9_\-])glpat-", r"A-Za-z0-9_\-", 20),
]
#: a line break inside a token: a newline (after a ``\\`` continuation or not), or
#: the same as JSON escapes at any depth; then a wrapped line's indent
BREAK = r"(?: {0,2}\\*\r?\n(?:#### |[ \t]{0,4})|(?:\\+r)?\\+n[ \t]{0,4})"
#: breaks a fixed-length token may hold (a github_pat_ on a narrow terminal)
MAX_BREAKS = 4
#: least characters of a variable-length token's part after the break
OPEN_TAIL_MIN = 8

_PREFIXES = r"ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|AKIA|ASIA|ABIA|ACCA|A3T|npm_|AIza|hf_|sk-ant-|sk-proj-|sk-svcacct-|sk-admin-|sk_live_|sk_test_|rk_live_|rk_test_|xox[abeoprs]-|glpat-"
_FIXED_PREFIXES = r"ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|AKIA|ASIA|ABIA|ACCA|A3T|npm_|AIza|hf_"
#: what every text holding a cut token holds: a prefix, token characters, a break
#: (Rust regex syntax: the Polars prefilter, ``transforms.redact.redact_series``)
HINT = rf"(?:{_PREFIXES})[A-Za-z0-9_\-]{{0,120}}(?: {{0,2}}\\*\r?\n|(?:\\+r)?\\+n)|(?:{_FIXED_PREFIXES})[A-Za-z0-9_\-]{{4,}}\s*$"
#: literals one of which every such text holds: a memchr-speed check first (Python's
#: ``re`` tries an alternation at every position; over a Series they are a column of
#: the redaction's one Hyperscan scan, ``redact._hs_database``, or Polars'
#: ``contains_any``), the regex only where one occurs
LITERALS = [
    *("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    *("npm_", "AIza", "hf_", "sk-ant-", "sk-proj-", "sk-svcacct-", "sk-admin-", "k_live_", "k_test_"),
    *("xox", "glpat-"),
]
#: a line that ends in a prefix and token characters (``across_lines``)
LINE_END = rf"(?:{_PREFIXES})[A-Za-z0-9_\-]{{0,120}} {{0,2}}\\?\r?\n$"
_LINE_END_RX = re.compile(LINE_END)
_BREAK_RX = re.compile(BREAK)
#: ``transforms.redact.MARKER`` (not imported: ``redact`` imports this module)
MARKER = "[REDACTED:{kind}]"
_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def _compile(rules: list[tuple[str, str, str, int]]) -> list[tuple[str, re.Pattern, re.Pattern, int]]:
    """Each rule as ``(kind, prefix + first part followed by a break, a part, n)``."""
    return [
        (kind, re.compile(rf"{prefix}([{cls}]*)(?={BREAK}[{cls}])"), re.compile(rf"[{cls}]+"), n)
        for kind, prefix, cls, n in rules
    ]


@cache
def _rules() -> tuple[list, list, list[tuple[str, re.Pattern]]]:
    """``(fixed, open, tail)``: ``FIXED``'s and ``OPEN``'s rules compiled (``_compile``),
    and a fixed-length token's first part at the very end of a text (the rest in the
    next entry or line): ``(kind, regex)``, 4 to n-1 characters of its charset.
    Compiled on first use (``spans``, for a text holding one of ``LITERALS``), not at
    import: ~3 ms of CPU in every process (issue 26's process starts)."""
    tail = [(kind, re.compile(rf"{prefix}[{cls}]{{4,{n - 1}}}(?=\s*$)")) for kind, prefix, cls, n in FIXED]
    return _compile(FIXED), _compile(OPEN), tail


def _ends_token(text: str, at: int, part: re.Pattern) -> bool:
    """True when ``text[at]`` cannot continue a token of ``part``'s charset."""
    return at >= len(text) or not part.match(text, at)


def _fixed_end(text: str, m: re.Match, part: re.Pattern, n: int) -> int | None:
    """Where the token ``m`` starts ends when its parts across breaks add up to ``n``
    characters and the last ends at a token end; None otherwise."""
    have, at = len(m.group(1)), m.end()
    for _ in range(MAX_BREAKS):
        b = _BREAK_RX.match(text, at)
        if b is None:
            return None
        p = part.match(text, b.end())
        if p is None:
            return None
        have += p.end() - p.start()
        if have == n:
            return p.end() if _ends_token(text, p.end(), part) else None
        if have > n or p.end() < len(text) and not _BREAK_RX.match(text, p.end()):
            return None
        at = p.end()
    return None


def _open_end(text: str, m: re.Match, part: re.Pattern, n: int) -> int | None:
    """Where a variable-length token ``m`` starts ends across one break: the part after
    it a run of ``OPEN_TAIL_MIN`` or more holding a digit and a letter, the whole at
    least ``n``; None otherwise."""
    b = _BREAK_RX.match(text, m.end())
    p = part.match(text, b.end()) if b else None
    if p is None:
        return None
    tail = p.group()
    if len(tail) < OPEN_TAIL_MIN or not (_DIGIT.search(tail) and _LETTER.search(tail)):
        return None
    return p.end() if len(m.group(1)) + len(tail) >= n else None


def spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of the tokens cut by a break in ``text`` (the prefix to
    the end of the last part, the breaks inside), and of a fixed-length token's first
    part at the very end of ``text`` (``_rules``' tail), in order. The rules are tried only
    where one of ``LITERALS`` occurs: one RE2 search of them first (0.03 s per 1.4 MB
    of the corpus's candidate texts, where 22 ``str.find`` took 0.10 s and Python's
    ``re`` searching for the alternation 0.25 s), then ``str.find`` of each."""
    try:
        hit = _literal_rx().search(text) is not None
    except UnicodeEncodeError:  # lone surrogates (raw bytes ``surrogateescape``'d)
        hit = any(x in text for x in LITERALS)
    if not hit:
        return []
    at = set()
    for x in LITERALS:
        i = text.find(x)
        while i != -1:
            at.add(i - 1 if x[0] == "k" else i)  # (sk|rk)_live_: the prefix starts before
            i = text.find(x, i + 1)
    if not at:
        return []
    out = []
    fixed, open_, tails = _rules()
    for rules, end_of in ((fixed, _fixed_end), (open_, _open_end)):
        for kind, rx, part, n in rules:
            for i in sorted(at):
                m = rx.match(text, max(i, 0))
                e = None if m is None else end_of(text, m, part, n)
                if e is not None and m is not None:
                    out.append((m.start(), e, kind))
    tail = max(0, len(text.rstrip()) - 100)
    if any(i >= tail - 12 for i in at):
        for kind, trx in tails:
            t = trx.search(text, tail)
            if t is not None and not any(a <= t.start() < b for a, b, _ in out):
                out.append((t.start(), t.end(), kind))
    return sorted(set(out))


@cache
def _literal_rx():
    """``LITERALS`` as one RE2 alternation (``secret_rules.compile_re2``)."""
    from ctxkeep.transforms.secret_rules import compile_re2

    return compile_re2("|".join(re.escape(x) for x in LITERALS))


def hinted(s: pl.Series, has_literal: pl.Series) -> pl.Series:
    """Boolean Series: the texts of ``s`` that may hold a cut token (``HINT``), given
    ``has_literal`` (``s.str.contains_any(LITERALS)``'s booleans, computed with the caller's other
    passes): the regex runs over those texts only."""
    idx = has_literal.fill_null(False).arg_true()
    if not idx.len():
        return has_literal.fill_null(False)
    hit = s.gather(idx).str.contains(HINT).fill_null(False)
    return has_literal.fill_null(False).scatter(idx, hit)


_LITERAL_BYTES = [x.encode() for x in LITERALS]


def plain_with_prefix(datas: list[bytes]) -> bool:
    """True when one of ``datas`` is plain text (its first byte after whitespace is
    not ``{`` or ``[``: not JSON, whose strings hold no raw newline) and holds one of
    ``LITERALS``: the vault's redaction then splits its lines as text, for
    ``across_lines`` (a JSONL capture costs one byte test)."""
    return any(d[:64].lstrip()[:1] not in (b"{", b"[") and any(x in d for x in _LITERAL_BYTES) for d in datas)


def across_lines(lines: list[str], ranges: list[tuple[int, int, int]]) -> dict[int, Counter]:
    """Redact in ``lines`` (in place) the tokens cut by a newline between two lines of
    a plain-text file: the vault redacts a file line by line (``sinks.vault.capture``),
    and an Aider history writes a pasted input's lines as ``#### a  \\n#### b``
    (Aider ``io.py`` ``InputOutput.user_input``). ``ranges``: ``(file, first line, end
    line)``; a file whose first line starts with ``{`` or ``[`` (JSON: no string holds
    a raw newline) is skipped, and lines of two files are never joined. The first
    line's part becomes the marker (``[REDACTED:<kind>]``, counted once), the next line
    loses its part (its ``#### `` or indent kept); both keep their newlines. Returns ``{line index: values counted}``
    of the first lines (the next lines changed count nothing)."""
    out: dict[int, Counter] = {}
    for _, a, b in ranges:
        if a == b or lines[a].lstrip()[:1] in ("{", "["):
            continue
        for i in range(a, b - 1):
            line = lines[i]
            if not _LINE_END_RX.search(line, max(0, len(line) - 140)):
                continue
            nxt = lines[i + 1]
            for s, e, kind in spans(line + nxt):
                if s < len(line) <= e:  # the token runs from this line into the next
                    cut = len(line.rstrip("\r\n").rstrip(" ").rstrip("\\"))
                    lines[i] = line[:s] + MARKER.format(kind=kind) + line[cut:]
                    lead = 5 if nxt.startswith("#### ") else len(nxt) - len(nxt.lstrip(" \t"))
                    lines[i + 1] = nxt[:lead] + nxt[e - len(line) :]  # its line prefix kept
                    out.setdefault(i, Counter())[kind] += 1
                    break
    return out
