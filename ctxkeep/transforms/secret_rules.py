"""The maintained secret rules: gitleaks' rule set (``config/gitleaks.toml``, MIT),
as generated into ``secret_rules.json`` by ``tools/gen_secret_rules.py`` from a named
upstream version (``SOURCE`` says which: version tag and commit). Regenerate on an
upgrade with that script; never edit the JSON by hand.

Matching follows gitleaks' ``detect/detect.go`` (v8.30): a rule runs on a text only
when one of its ``keywords`` occurs in it (case-insensitive; gitleaks uses
Aho-Corasick, here one ``re2.Set`` over the keywords, or Polars' ``str.extract_many``
for a Series, where ``rust_gate`` then runs the rule's regex in Rust over the texts
holding its keywords: ``transforms.redact._gated``); its regex (Go RE2 syntax, compiled with ``google-re2``; the few RE2
refuses fall back to Python ``re``) finds the matches; the secret is the
``secretGroup``, else the first non-empty capture group, else the whole match; a
secret whose Shannon entropy is ≤ the rule's ``entropy`` is dropped; then the global
allowlist (regexes and stopwords on the secret) and the rule's allowlists (regexes on
the secret, the match or the line, per ``regexTarget``; stopwords contained in the
lower-cased secret; ``condition`` OR/AND) drop allowed ones.

``find(text) -> [(start, end, rule_id)]``: the secrets' character offsets in
``text``. Texts are matched as UTF-8 bytes (one encode per text; RE2's byte offsets
are turned back into character offsets only for the matches found).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import re2

TABLE_PATH = Path(__file__).with_name("secret_rules.json")


class _Allow(NamedTuple):
    and_: bool
    target: str  # "secret" | "match" | "line"
    regexes: tuple
    stopwords: tuple[str, ...]
    paths: bool  # the allowlist names paths: never matched here (texts have none)


class GitleaksRule(NamedTuple):
    """One compiled rule of the table (see the module doc for the fields' meaning)."""

    id: str
    rx: LazyRegex  # re2 or re, over bytes, compiled on first use
    group: int
    entropy: float
    keywords: tuple[str, ...]
    allow: tuple[_Allow, ...]
    pre: LazyRegex | None = None  # the regex without its lazy key prefix (see ``_SEMI_GENERIC``)


def compile_re2(pattern: str):
    """``pattern`` (RE2 syntax) compiled by ``google-re2`` with 64 MiB for its DFA."""
    opts = re2.Options()
    opts.max_mem = 64 << 20
    return re2.compile(pattern, opts)


#: the lazy prefix of gitleaks' semi-generic rules (``GenerateSemiGenericRegex``): up to
#: 50 key characters before the identifier. The rest of such a regex, compiled alone,
#: matches wherever the whole one does (a match minus its prefix), and RE2 scans it
#: ~4x faster (it starts with the identifiers' literals, the prefix starts anywhere):
#: a text it does not match is not scanned with the whole regex.
_SEMI_GENERIC = r"(?i)[\w.-]{0,50}?"


def _compile(pattern: str, engine: str):
    """``pattern`` compiled for bytes: RE2 (``engine`` "re2") or Python ``re``."""
    if engine == "re2":
        return compile_re2(pattern)
    return re.compile(pattern.encode())


class LazyRegex:
    """A rule's regex, compiled (``_compile``) on its first ``search``/``finditer``:
    a text runs only the rules whose keywords it holds (gitleaks' keyword prefilter),
    so a few new lines (the hook path) compile the few rules they meet instead of the
    table's ~450 regexes (~0.2 s of CPU on a quiet machine, ~0.8 s under load; 5 MB).
    ``compiled()`` gives the compiled pattern (``re2._Regexp`` or ``re.Pattern``);
    a pattern neither engine takes raises there (the generator checked them all)."""

    __slots__ = ("_engine", "_pattern", "_rx")

    def __init__(self, pattern: str, engine: str) -> None:
        self._pattern, self._engine, self._rx = pattern, engine, None

    def compiled(self):
        if self._rx is None:
            self._rx = _compile(self._pattern, self._engine)
        return self._rx

    def search(self, raw: bytes):
        return self.compiled().search(raw)

    def finditer(self, raw: bytes):
        return self.compiled().finditer(raw)


def _entropy(s: str) -> float:
    """Shannon entropy in bits per character (gitleaks' ``shannonEntropy``). Cached for
    values up to 256 characters: a line's values meet the rules again in its entries'
    texts (one call redacts both); a longer one would pin its text in memory."""
    return _entropy_cached(s) if len(s) <= 256 else _shannon(s)


def _shannon(s: str) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_entropy_cached = lru_cache(maxsize=4096)(_shannon)


class KeywordSet:
    """An ``re2.Set`` over ``keywords`` (case-insensitive), compiled on the first
    ``match``: only when a text holds a keyword (Polars' ``str.contains_any`` says
    which texts do, ``transforms.redact.redact_series``); a few lines without one (the
    hook path, often) never compile it."""

    __slots__ = ("_keywords", "_set")

    def __init__(self, keywords: tuple[str, ...]) -> None:
        self._keywords = keywords
        self._set: Any = None  # a re2.Set (google-re2 ships no type information)

    def match(self, raw: bytes) -> list[int] | None:
        """The indexes (in ``keywords``) of the keywords ``raw`` holds."""
        if self._set is None:
            opts = re2.Options()
            opts.case_sensitive = False
            opts.max_mem = 64 << 20
            kw_set = re2.Set.SearchSet(opts)
            for k in self._keywords:
                kw_set.Add(re2.escape(k))
            kw_set.Compile()
            self._set = kw_set
        return self._set.Match(raw)


class RuleSet(NamedTuple):
    source: dict  # schema, source, version, commit, license, rule_count, excluded
    rules: tuple[GitleaksRule, ...]
    keywords: tuple[str, ...]  # every keyword (lower case), the Set's pattern order
    by_keyword: tuple[tuple[int, ...], ...]  # keyword index → rule indexes
    always: tuple[int, ...]  # rules without keywords: run on every text
    kw_set: KeywordSet  # the keywords, case-insensitive (compiled on first use)
    global_regexes: tuple
    global_stopwords: tuple[str, ...]
    gates: tuple[str | None, ...]  # rule index → ``rust_gate`` of its regex (None: none)


@cache
def table(path: Path = TABLE_PATH) -> dict:
    """The table at ``path`` as JSON (read once per process; ~90 KB, a few ms: what
    needs only the rule ids or keywords does not compile the regexes). Raises
    ValueError when its ``schema`` is not 1."""
    t = json.loads(path.read_text("utf-8"))
    if t.get("schema") != 1:
        raise ValueError(f"secret rule table {path}: schema {t.get('schema')!r}, expected 1")
    return t


def rule_ids() -> list[str]:
    """The table's rule ids (the kinds its markers name), in table order."""
    return [r["id"] for r in table()["rules"]]


@cache
def ruleset(path: Path = TABLE_PATH) -> RuleSet:
    """The table at ``path`` ready to match (once per process, on first use): the
    keyword Set compiled; each rule's regexes are ``LazyRegex`` (compiled when a text
    holding one of its keywords first runs it). Raises ValueError when the table's
    ``schema`` is not 1."""
    table_ = table(path)
    rules: list[GitleaksRule] = []
    kw_index: dict[str, list[int]] = {}
    always: list[int] = []
    for r in table_["rules"]:
        allow = tuple(
            _Allow(
                a["condition"] == "AND",
                a["target"],
                tuple(LazyRegex(x, "re2") for x in a["regexes"]),
                tuple(a["stopwords"]),
                a["paths"],
            )
            for a in r["allowlists"]
        )
        i = len(rules)
        pre = None
        if r["engine"] == "re2" and r["regex"].startswith(_SEMI_GENERIC):
            pre = LazyRegex("(?i)" + r["regex"][len(_SEMI_GENERIC) :], "re2")
        rules.append(
            GitleaksRule(
                r["id"],
                LazyRegex(r["regex"], r["engine"]),
                r["secret_group"],
                r["entropy"],
                tuple(r["keywords"]),
                allow,
                pre,
            )
        )
        if not r["keywords"]:
            always.append(i)
        for k in r["keywords"]:
            kw_index.setdefault(k, []).append(i)
    keywords = tuple(kw_index)
    kw_set = KeywordSet(keywords)
    g = table_["global_allowlist"]
    meta = {k: v for k, v in table_.items() if k not in ("rules", "global_allowlist")}
    return RuleSet(
        meta,
        tuple(rules),
        keywords,
        tuple(tuple(kw_index[k]) for k in keywords),
        tuple(always),
        kw_set,
        tuple(LazyRegex(x, "re2") for x in g["regexes"]),
        tuple(g["stopwords"]),
        tuple(rust_gate(r["regex"]) for r in table_["rules"]),
    )


#: Go RE2's ASCII Perl classes (``\\w``, ``\\s``, ``\\d``; RE2 syntax, github.com/google/re2/wiki/Syntax)
_ASCII_CLASSES = {"w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r ", "d": "0-9"}


def rust_gate(pattern: str) -> str | None:
    """``pattern`` (Go RE2 syntax, a table regex) as a pattern of Rust's ``regex`` crate
    (Polars' ``str.contains``) that matches every text the RE2 regex matches: the lazy
    key prefix of a semi-generic rule dropped (``_SEMI_GENERIC``: a match minus its
    prefix), ``\\w``/``\\s``/``\\d`` and their negations written as Go's ASCII sets (Rust's
    are Unicode: its ``\\W`` would miss ``é``), ``\\b``/``\\B`` as ASCII boundaries
    (``(?-u:\\b)``), named groups made plain (gates are joined: names would repeat).
    None when a negated class sits inside a bracket (``[^\\W]``: no
    exact rewrite); the caller then runs the rule wherever its keywords are."""
    if pattern.startswith(_SEMI_GENERIC):
        pattern = "(?i)" + pattern[len(_SEMI_GENERIC) :]
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            n = pattern[i + 1]
            if n in _ASCII_CLASSES:
                out.append(_ASCII_CLASSES[n] if in_class else f"[{_ASCII_CLASSES[n]}]")
            elif n in "WSD":
                if in_class:
                    return None
                out.append(f"[^{_ASCII_CLASSES[n.lower()]}]")
            elif n in "bB":
                out.append(f"(?-u:\\{n})")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i : i + 1] == "]":  # a literal ] first in the class
                out.append("\\]")
                i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        if c == "(" and not in_class and pattern.startswith("(?P<", i):  # a gate captures nothing
            out.append("(?:")
            i = pattern.index(">", i) + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _line(raw: bytes, start: int, end: int) -> bytes:
    """The line(s) of ``raw`` holding bytes ``start:end``."""
    a = raw.rfind(b"\n", 0, start) + 1
    b = raw.find(b"\n", end)
    return raw[a : len(raw) if b < 0 else b]


def _allowed(a: _Allow, secret: bytes, match: bytes, line: bytes) -> bool:
    """gitleaks' ``checkFindingAllowed`` for one allowlist (paths and commits never match)."""
    target = {"match": match, "line": line}.get(a.target, secret)
    checks = []
    if a.regexes:
        checks.append(any(rx.search(target) for rx in a.regexes))
    if a.stopwords:
        low = secret.decode("utf-8", "replace").lower()
        checks.append(any(w in low for w in a.stopwords))
    if a.paths:
        checks.append(False)
    if not checks:
        return False
    return all(checks) if a.and_ else any(checks)


def rules_for(raw: bytes, rs: RuleSet | None = None) -> list[int]:
    """Indexes of the rules whose keywords occur in ``raw`` (the keyword Set finds
    them; plus the keyword-less ones), in table order."""
    rs = rs or ruleset()
    found = rs.kw_set.match(raw) or []
    if not found:
        return list(rs.always)
    out = set(rs.always)
    for k in found:
        out.update(rs.by_keyword[k])
    return sorted(out)


def find_bytes(raw: bytes, rs: RuleSet | None = None, rules=None) -> list[tuple[int, int, str]]:
    """``(start, end, rule_id)`` byte spans of the secrets in UTF-8 ``raw``, in rule
    order (overlaps not merged). ``rules``: the rule indexes to run (in table order;
    ``transforms.redact`` knows them for a Series), else ``rules_for``'."""
    rs = rs or ruleset()
    out = []
    for i in rules_for(raw, rs) if rules is None else rules:
        r = rs.rules[i]
        if r.pre is not None and r.pre.search(raw) is None:
            continue
        rx = r.rx.compiled()
        n_groups = rx.groups
        for m in rx.finditer(raw):
            # the secret group (``secretGroup``), else the first non-empty group, else the
            # match (by spans: a group that did not take part spans (-1, -1); the
            # wrapper's ``group``/``groups`` build their strings first)
            g = 0
            if r.group and r.group <= n_groups:
                g = r.group
            else:
                for j in range(1, n_groups + 1):
                    a, b = m.span(j)
                    if b > a:
                        g = j
                        break
            s, e = m.span(g)
            if e <= s:  # None or empty
                continue
            secret = raw[s:e]
            text = secret.decode("utf-8", "surrogateescape")
            if r.entropy and _entropy(text) <= r.entropy:
                continue
            if any(rx.search(secret) for rx in rs.global_regexes):
                continue
            low = text.lower()
            if any(w in low for w in rs.global_stopwords):
                continue
            if r.allow:
                match, line = m.group(0), _line(raw, m.start(), m.end())
                if any(_allowed(a, secret, match, line) for a in r.allow):
                    continue
            out.append((s, e, r.id))
    return out


def _encode(text: str) -> bytes:
    """``text`` as UTF-8; lone surrogates (``surrogateescape``'d raw bytes) back to the
    bytes they stand for, other lone surrogates as WTF-8 (their character offsets are
    then approximate: both are rare and redaction still covers the match)."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def find(text: str, rs: RuleSet | None = None, extra=(), rules=None) -> list[tuple[int, int, str]]:
    """``(start, end, rule_id)`` character spans of the secrets in ``text``: the
    table's rules', then those of ``extra``: ``(kind, compiled RE2 pattern with a
    group ``s`` at index g, check(value: str, match) -> bool, g)`` run on every text
    given. ``rules``: as ``find_bytes``'."""
    raw = _encode(text)
    spans = find_bytes(raw, rs, rules)
    for kind, rx, check, g in extra:
        for m in rx.finditer(raw):
            v = m.group(g)
            if v and check(v.decode("utf-8", "surrogateescape"), m):
                spans.append((*m.span(g), kind))
    if not spans or len(raw) == len(text):  # ASCII: byte offsets are character offsets
        return spans
    cache_: dict[int, int] = {}

    def char(off: int) -> int:
        if off not in cache_:
            cache_[off] = len(raw[:off].decode("utf-8", "surrogateescape"))
        return cache_[off]

    return [(char(s), char(e), k) for s, e, k in spans]


def keywords() -> tuple[str, ...]:
    """Every rule keyword (lower case): a text holding none of them (ASCII
    case-insensitively) is matched by no rule except the keyword-less ones."""
    return tuple(dict.fromkeys(k for r in table()["rules"] for k in r["keywords"]))
