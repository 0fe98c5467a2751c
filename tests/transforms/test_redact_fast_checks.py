"""The redaction's faster value checks decide as the plain ones they replaced (issue 26:
the Python rules' CPU): ``_ci_starts``' key walk (a regex instead of a loop over
characters), ``_key_value_check`` and ``_high_entropy`` (cheap tests first, a cached
``_placeholder``), and ``secret_rules.find_bytes``' secret group (by spans). Each is
compared with the plain version, kept here, on fuzzed texts and gitleaks' samples."""

from __future__ import annotations

import math
import random
import re
from collections import Counter

from test_redact_kv_starts import PIECES, _gitleaks

from ctxkeep.transforms import redact as R
from ctxkeep.transforms import secret_rules as S

#: values the checks tell apart: digits or none, long or short, paths, hex, uuids,
#: placeholders, repeats, upper-case names, non-ASCII digits and letters
VALUES = [
    "abcdEFGH12345678wxyzQRST",
    "visualize=visualize",
    "show_stats=False",
    "tokenizer.eos_token",
    "0123456789abcdef0123456789abcdef",
    "12345678-1234-1234-1234-123456789abc",
    "/usr/lib/python3/site",
    "a/b/c+d=e1234567890",
    "${SECRET}",
    "<your-key>",
    "aaaaaaaaaaaaaaaaaaaa",
    "MY_SECRET_VAR",
    "1234567890",
    "\u0661\u0662\u0663abcdefghijklmnopq",
    "\u00e9t\u00e9\u00e9t\u00e9\u00e9t\u00e9\u00e9t\u00e9\u00e9t\u00e91",
    "\u00b2abcdefghijklmnopqr",
    "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==",
    "str",
    "os.environ",
    "(x)",
    "0123456789+/=-._0123456789+/=",
]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = PIECES + VALUES + ["\u0131", "\u212a", "\u00e9", "\u0661", "a" * 50, "_" * 49]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(2, 16))) for _ in range(n)]


def _entropy(s: str) -> float:
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def _placeholder(v: str) -> bool:
    if not v or v.startswith(("$", "{{", "%(", "%s", "<", "[REDACTED", "{", "@", "`", "#{")):
        return True
    if v.lower() in R._STOP or len(set(v)) == 1:
        return True
    if v.startswith(R._CODE_OBJECTS):
        return True
    return v.lower().startswith(("your_", "your-", "<your", "xxx", "changeme_", "example_", "placeholder"))


def _key_value_check(v: str, m: re.Match) -> bool:
    if _placeholder(v):
        return False
    s = m.string
    end = m.end()
    unquoted = m.group("q") is None
    if unquoted and end < len(s) and s[end] in "([.":
        return False
    key = (m.group("key") or "").lower()
    word = re.split(r"[_.\-]", key)[-1]
    if v.lower() == key or v.lower() == word or v.lower().endswith("." + key):
        return False
    if unquoted and R._ATTR_CHAIN.fullmatch(v) and v.lower().rsplit(".", 1)[-1].endswith(word):
        return False
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) and v.isupper() and unquoted:
        return len(v) >= 8 and _entropy(v) >= 3.0
    if key.endswith(("token", "tokens")) or key.endswith("token_id"):
        return not v.isdigit() and (len(v) >= 8) and not re.fullmatch(r"[a-z]+", v)
    return True


def _high_entropy(v: str, m: re.Match) -> bool:
    if _placeholder(v) or R._HEX_RE.fullmatch(v) or R._UUID_RE.fullmatch(v):
        return False
    if R._SIGNATURE_KEY.match(m.group(0)):
        return False
    if "/" in v and not re.search(r"[+=]", v) and v.count("/") > 1:
        return False
    has_digit = any(c.isdigit() for c in v)
    has_alpha = any(c.isalpha() for c in v)
    return len(v) >= 16 and has_digit and has_alpha and _entropy(v) >= 3.5


def _key_start(text: str, a: int) -> int:
    k = a
    while k > 0 and a - k < R._CI_BEFORE and (text[k - 1].isalnum() or text[k - 1] in "_.-"):
        k -= 1
    return k


def test_key_walk_is_the_loop_over_characters():
    texts = _texts(8000, 41) + ["x" * 100 + "token=1", "\u0661" * 60 + "_key: 2", "a.b-c_d" * 9 + "secret=3"]
    walks = 0
    for t in texts:
        found = [(m.start(), m.group()) for m in R._CI_ANCHOR_RX.finditer(t.translate(R._ASCII_LOWER))]
        starts, kv = R._ci_starts(t)
        want, want_kv = set(), set()
        for a, got in found:
            want |= {a, _key_start(t, a)}
            if not R._prose(got):
                want_kv |= {a, _key_start(t, a)}
            walks += _key_start(t, a) < a
        assert (starts, kv) == (sorted(want), sorted(want_kv)), t
    assert walks > 600


def test_checks_decide_as_before():
    checked = Counter()
    for t in _texts(6000, 42) + _gitleaks():
        for rule, rx, _ in R._compiled():
            plain = {R._key_value_check: _key_value_check, R._high_entropy: _high_entropy}.get(rule.check)
            if plain is None:
                continue
            for p in range(len(t)):
                m = rx.match(t, p)
                if not m:
                    continue
                g = "q" if rx.groupindex.get("q") and m.group("q") is not None else None
                g = g or ("s" if rx.groupindex.get("s") and m.group("s") is not None else 0)
                v = m.group(g)
                if v:
                    got = rule.check(v, m)
                    assert got == plain(v, m), (t, v, rule.kind)
                    checked[plain.__name__, got] += 1
    for v in VALUES:  # the values alone, after a generic key and after a password key
        for t in (f"api_key={v}", f"password: {v}", f"signature={v}"):
            for rule, rx, _ in R._compiled():
                m = rx.match(t)
                if m and rule.check in (R._key_value_check, R._high_entropy):
                    v2 = m.group("s") or m.group("q") if "s" in rx.groupindex else m.group(0)
                    plain = _key_value_check if rule.check is R._key_value_check else _high_entropy
                    assert rule.check(v2, m) == plain(v2, m), (t, rule.kind)
    # both answers met often by both checks
    assert min(checked.values()) > 100, checked
    assert len(checked) == 4, checked


def _find_bytes(raw: bytes, rules: list[int]) -> list[tuple[int, int, str]]:
    """``find_bytes``' loop as it was: the secret by ``group``/``groups``."""
    rs = S.ruleset()
    out = []
    for i in rules:
        r = rs.rules[i]
        if r.pre is not None and r.pre.search(raw) is None:
            continue
        for m in r.rx.finditer(raw):
            g = 0
            if r.group and r.group <= len(m.groups()):
                g = r.group
            else:
                for j in range(1, len(m.groups()) + 1):
                    if m.group(j):
                        g = j
                        break
            secret = m.group(g)
            if not secret:
                continue
            s, e = m.span(g)
            text = secret.decode("utf-8", "surrogateescape")
            if r.entropy and _entropy(text) <= r.entropy:
                continue
            if any(rx.search(secret) for rx in rs.global_regexes):
                continue
            if any(w in text.lower() for w in rs.global_stopwords):
                continue
            if r.allow:
                match, line = m.group(0), S._line(raw, m.start(), m.end())
                if any(S._allowed(a, secret, match, line) for a in r.allow):
                    continue
            out.append((s, e, r.id))
    return out


def test_find_bytes_takes_the_secret_group_as_before():
    found = 0
    for t in _gitleaks() + _texts(500, 43):
        raw = S._encode(t)
        rules = S.rules_for(raw)
        got = S.find_bytes(raw, rules=rules)
        assert got == _find_bytes(raw, rules), t
        found += len(got)
    assert found > 1000


def test_long_values_are_not_kept_in_the_caches():
    """A value runs to its closing quote: one of 1,000 characters is checked, not cached
    (it would pin its text), a short one is cached."""
    long_v = "Zz9$kP2@" * 125
    before = R._placeholder_cached.cache_info().currsize, S._entropy_cached.cache_info().currsize
    assert R._placeholder(long_v) is False and R._placeholder("$" + long_v) is True
    assert abs(S._entropy(long_v) - 3.0) < 1e-9  # 8 distinct characters, equally often
    assert (R._placeholder_cached.cache_info().currsize, S._entropy_cached.cache_info().currsize) == before
    R._placeholder("short-value-" + str(id(long_v)))
    S._entropy("short-value-" + str(id(long_v)))
    assert R._placeholder_cached.cache_info().currsize == before[0] + 1
    assert S._entropy_cached.cache_info().currsize == before[1] + 1
