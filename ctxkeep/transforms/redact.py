"""Secret redaction: credentials are replaced by ``[REDACTED:<kind>]`` before anything
is hashed, indexed or stored (entry texts, quarantined lines).

Two stages, so that the common case (a text holding no secret) costs a few passes of
compiled multi-pattern automata:

1. Prefilters over the whole Series in Polars' Rust engines (linear time): ``PREFILTER``
   (ctxkeep's case-sensitive context rules with look-arounds and named groups
   removed, one alternation; the case-insensitive key/value rules' anchors, a second
   pass because in one alternation they make the automaton ~100x slower), and for
   the maintained table gitleaks' own keyword rule (``_gated``: one overlapping
   Aho-Corasick pass finds each text's keywords, then each rule whose keywords
   occur runs as a Rust regex, ``secret_rules.rust_gate``, over just those texts).
   They over-approximate: a text none of them matches holds no secret any rule
   would redact, and a text reaches a maintained rule in Python only when that
   rule's regex matched it. The passes that tell the candidates (the case-sensitive
   prefilter, the anchor, the keywords: ``_passes``) are one Hyperscan scan of each
   text (``_hs_passes``; Polars' passes where Hyperscan is not installed): the same
   booleans, the prefilter written as a superset of Rust's Unicode classes and case
   folding (``_hs_superset``), ~4x less CPU (0.37 -> 0.09 s per 44 MB of a scaled
   tree's lines and texts); the anchors are then extracted from the candidates only.
2. The texts they match go through the exact rules in Python: each rule finds its
   spans, a per-rule check rejects lookalikes (placeholders, code, hashes,
   low-entropy words), overlapping spans are merged, and each kind is counted
   (``redact_counts``). Only the context rules of the alternation that matched run
   (most candidates match only the key/value anchor, and the case-sensitive rules
   then cost nothing), and the case-insensitive rules start only where the anchors
   are: Polars extracts the anchors (``str.extract_all``) and Python finds their
   offsets with ``str.find``, so no Python regex scans a whole candidate text for
   them. Of the maintained rules only those whose gate matched the text run.
   Measured (``tests/bench/bench_redact.py``, CPU time): keywords alone sent 74 %
   of the corpus's texts to Python; the gates send 0.7 % (30.5 → 48.9 MB/s of CPU).

Two rule sets, merged per text (overlapping spans become one marker named by the first
rule's kind; ctxkeep's rules come first):

- the maintained table (``transforms.secret_rules``): gitleaks' rule set, generated from
  a named upstream version (``secret_rules.json``; ``tools/gen_secret_rules.py``), run
  on the texts holding one of its keywords whose gate matched (``_gated``; one text
  alone: the rules of the keywords an RE2 Set finds), its regexes in RE2; a generic rule's
  hex digest or uuid is kept (``_keep_maintained``);
- ctxkeep's context rules below (``RULES``, and ``_PROSE_RULES`` in RE2).

Spans never start or end inside an escape sequence (``_escape_safe``), so a redacted
JSON or JSON-escaped text stays valid.

The context rules (``RULES``) are the providers' documented token formats, cross-checked against
gitleaks' ``config/gitleaks.toml`` (MIT) and detect-secrets'
plugins (Apache-2.0), and above all the forms a key word names a value in: AWS (access key ids ``AKIA``/``ASIA``/…, secret keys by their
key name), GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_``, ``github_pat_``),
GitLab (``glpat-`` and the other ``gl…-`` token prefixes), OpenAI (``sk-``,
``sk-proj-``, ``sk-svcacct-``), Anthropic (``sk-ant-``), Google API keys (``AIza``),
private key blocks (PEM, OpenSSH, PGP; also JSON-escaped, as in a GCP service-account
file, and cut off), Azure (storage ``AccountKey=``, ``SharedAccessKey=``, SAS ``sig=``,
Entra client secrets ``…Q~…``), Slack (``xox[abeoprs]-``, ``xapp-``, webhooks), Stripe
(``sk_``/``rk_`` ``live``/``test``, ``whsec_``), npm (``npm_``), PyPI (``pypi-AgEI…``),
Hugging Face (``hf_``, ``api_org_``), SendGrid (``SG.``), Twilio (``AC``/``SK`` + 32
hex), Mailgun (``key-``), JWTs, ``Bearer``/``Basic``/``token`` authorization values,
Kubernetes bootstrap tokens (``abcdef.0123456789abcdef``), credentials in URLs (the
password of ``scheme://user:password@``), and values after a key that names a secret
(``password``, ``DB_PASSWORD``, ``client_secret``, ``AWS_SECRET_ACCESS_KEY``,
``api_key``, ``x-api-key``, ``GITHUB_TOKEN``, ``token`` …) in ``=``, ``:``, ``=>``,
shell, YAML, JSON and JSON-escaped (``\\"password\\": \\"…\\"``, ``.env`` text inside a
JSON string with ``\\n``) forms, whatever the value's length (after a password,
secret or token key, a value of punctuation such as ``a!b@c$d()e*_,/:;=?@ff[]22`` runs
to whitespace or its closing quote); plus high-entropy values
after a key naming a key or credential (gitleaks' ``generic-api-key`` idea).

Kept: ``${VAR}``, ``$VAR``, ``{{ … }}``, ``<placeholder>``, ``****``, calls, indexes and
attribute chains (``os.environ["X"]``, ``get_key()``, ``args.password``), type names
(``password: str``), a value equal to its key (``password=password``), booleans and
nulls, token counts (``"input_tokens": 1234``, ``"token": 42``), hashes and uuids after a
generic key, ``sk-learn-…``-style words.
"""

from __future__ import annotations

import math
import re
import string
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxkeep.transforms import secret_rules, wrapped_tokens

if TYPE_CHECKING:  # Polars is imported where a Series is made: a single text needs none
    import hyperscan
    import polars as pl

#: an entry dict's key (``pipeline.stable_ids.rekey``): ``(text, redacted text)``, the
#: entry's ``text`` (that very object) redacted ahead, in the call that redacted its
#: raw lines; ``normalize.normalized_rows`` takes it instead of redacting the text again
TEXT_REDACTED = "_text_redacted"

MARKER = "[REDACTED:{kind}]"
#: what a redacted value becomes: ``[REDACTED:<kind>]``; ``MARKER_RE`` finds them
MARKER_RE = re.compile(r"\[REDACTED(?::([a-z0-9-]+))?\]")


class Rule(NamedTuple):
    """One detector: ``kind`` (the label counted and put in the marker), ``pattern``
    (Python ``re`` syntax; the named group ``s`` or ``q``, when present, is the part
    replaced, else the whole match), ``check(value, match) -> bool`` (False: not a
    secret) or None, and ``ci``: the pattern goes to the case-insensitive prefilter."""

    kind: str
    pattern: str
    check: Callable[[str, re.Match], bool] | None = None
    ci: bool = False


# ---------------------------------------------------------------- value checks


def entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character (0.0 for '')."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_UUID_RE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_STOP = frozenset(
    [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "str",
        "string",
        "int",
        "integer",
        "bool",
        "boolean",
        "bytes",
        "bytearray",
        "float",
        "number",
        "any",
        "object",
        "dict",
        "list",
        "optional",
        "required",
        "secret",
        "password",
        "token",
        "value",
        "the",
        "a",
        "an",
        "is",
        "it",
        "we",
        "you",
        "to",
        "be",
        "not",
        "and",
        "or",
        "in",
        "of",
        "for",
        "with",
        "on",
        "this",
        "that",
        "new",  # credentials: new AWS.SharedIniFileCredentials(...) (gitleaks' sample)
        "await",
        "function",
        "lambda",
    ]
)
_CODE_OBJECTS = (
    "self.",
    "this.",
    "cls.",
    "os.",
    "process.",
    "config.",
    "settings.",
    "args.",
    "opts.",
    "options.",
    "env.",
    "request.",
    "req.",
    "params.",
    "props.",
    "data.",
    "ctx.",
    "context.",
    "creds.",
    "credentials.",
    "secrets.",
    "form.",
    "body.",
    "cfg.",
    "conf.",
    "app.",
    "vars.",
    "inputs.",
)


_ATTR_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


#: values up to this many characters are kept in the checks' caches (a value runs to its
#: closing quote: a long one would pin its text in memory; short ones are the repeats)
CACHED_CHARS = 256


def _placeholder(v: str) -> bool:
    """``v`` names or stands for a value rather than being one. Cached up to
    ``CACHED_CHARS``: a candidate text's key/value rules meet the same value from each
    of its starts (the key's and the anchor's: ``token: str`` twice), and the same
    values recur across texts (13,950 checks per 40 MB of a scaled tree's lines, ~40 %
    of them repeats)."""
    return _placeholder_cached(v) if len(v) <= CACHED_CHARS else _is_placeholder(v)


def _is_placeholder(v: str) -> bool:
    if not v or v.startswith(("$", "{{", "%(", "%s", "<", "[REDACTED", "{", "@", "`", "#{")):
        return True
    low = v.lower()
    if low in _STOP or v.count(v[0]) == len(v):  # one character repeated
        return True
    if v.startswith(_CODE_OBJECTS):
        return True
    return low.startswith(("your_", "your-", "<your", "xxx", "changeme_", "example_", "placeholder"))


_placeholder_cached = lru_cache(maxsize=8192)(_is_placeholder)


#: a key's parts (``_key_value_check``: its last one, the word it names)
_KEY_PARTS = re.compile(r"[_.\-]")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LOWER_WORD = re.compile(r"[a-z]+")


#: what precedes a key inside a URL's user info: ``scheme://`` and the user part so far
_USERINFO_BEFORE = re.compile(r"://[^\s/@\"'\\]*\Z")


def _in_url_userinfo(v: str, m: re.Match) -> bool:
    """The key stands in a URL's user info and the value runs past its ``@``
    (``https://x-access-token:ghp_…@github.com/acme/repo.git``): the value is the
    password part alone, which ``url-credentials`` (and a provider's own rule) find; the
    key/value rule would take the host and path too, as "password" (newuser18 F14)."""
    if "@" not in v:
        return False
    k = m.start("key")
    return _USERINFO_BEFORE.search(m.string, max(0, k - 256), k) is not None


def _in_query(v: str, m: re.Match) -> bool:
    """The key is a URL query parameter (``?api_key=…&format=json``) and the value runs
    past its ``&``: the value is up to the ``&`` alone, which the query rule takes
    (newuser18 F21)."""
    k = m.start("key")
    return "&" in v and k > 0 and m.string[k - 1] in "?&"


def _query_value_check(v: str, m: re.Match) -> bool:
    """A query parameter's value (``?api_key=Q9wE…&``) after a secret-naming key."""
    k = m.start("key")
    return k > 0 and m.string[k - 1] in "?&" and _key_value_check(v, m)


#: a connection string's next field inside a value: ``;Encrypt=true``
_NEXT_FIELD = re.compile(r";[ \t]*[A-Za-z][A-Za-z0-9 _]{0,40}=")


def _key_value_check(v: str, m: re.Match) -> bool:
    """A value after a secret-naming key: anything that is not a placeholder, not code
    (a call/index/attribute follows, the value repeats the key), not a URL's password
    with its host (``_in_url_userinfo``), and, after a ``token`` key, not a count or a
    short word."""
    if _placeholder(v) or _in_url_userinfo(v, m) or _in_query(v, m):
        return False
    s = m.string
    end = m.end()
    unquoted = "q" not in m.re.groupindex or m.group("q") is None
    if unquoted and end < len(s) and s[end] in "([.":
        return False
    key = (m.group("key") or "").lower()
    word = _KEY_PARTS.split(key)[-1]
    low = v.lower()
    if low in (key, word) or low.endswith("." + key):
        return False
    # an attribute chain naming the same kind of thing: tokenizer.pad_token = tokenizer.eos_token
    if unquoted and _ATTR_CHAIN.fullmatch(v) and low.rsplit(".", 1)[-1].endswith(word):
        return False
    if unquoted and v.isupper() and _IDENTIFIER.fullmatch(v):  # VAR names: FOO=$BAR's kin
        return len(v) >= 8 and entropy(v) >= 3.0
    if key.endswith(("token", "tokens", "token_id")):
        return not v.isdigit() and (len(v) >= 8) and not _LOWER_WORD.fullmatch(v)
    return True


def _random_tail(v: str, m: re.Match) -> bool:
    """A provider prefix followed by a random-looking tail: upper and lower case letters
    and a digit, ≥ 3.5 bits/char (``sk-learn-experiments-2024`` is a word path)."""
    tail = v.split("-", 2)[-1] if v.startswith("sk-") else v
    return (
        any(c.isupper() for c in tail)
        and any(c.islower() for c in tail)
        and any(c.isdigit() for c in tail)
        and entropy(tail) >= 3.5
    )


#: a match of the generic rule whose key is exactly ``signature`` (``_high_entropy``)
_SIGNATURE_KEY = re.compile(r"(?i)signature\\*[\"']?[ \t]*(?:=>|:=|[=:,])")


def _high_entropy(v: str, m: re.Match) -> bool:
    """A generic key's value is a secret when random-looking: ≥ 16 chars, letters and
    digits, ≥ 3.5 bits/char, not a hex digest or a uuid, not a path or a placeholder.
    A key named exactly ``signature`` is not one: Anthropic's thinking blocks carry
    ``"signature": "<base64>"`` (Claude Code 1.x-2.x transcripts, the corpus's 29 such
    values), the API's integrity check of the thinking text, which grants nothing; a
    changed one makes a restored or scrubbed session fail to resume.

    The cheap tests first (most values a generic key meets are short or lack a
    digit: ``show_stats=False``); the result is their conjunction, in any order."""
    if len(v) < 16 or not _digit_and_letter(v):
        return False
    if _placeholder(v) or _HEX_RE.fullmatch(v) or _UUID_RE.fullmatch(v):
        return False
    if _SIGNATURE_KEY.match(m.group(0)):
        return False
    if "/" in v and not _PATH_SIGNS.search(v) and v.count("/") > 1:  # a path
        return False
    return entropy(v) >= 3.5


_PATH_SIGNS = re.compile(r"[+=]")
_ASCII_DIGIT = re.compile(r"[0-9]")
_ASCII_LETTER = re.compile(r"[A-Za-z]")


def _digit_and_letter(v: str) -> bool:
    """Whether ``v`` holds a digit (``str.isdigit``) and a letter (``str.isalpha``); an
    ASCII ``v`` by two regex searches (the same characters: ASCII's digits and letters)."""
    if v.isascii():
        return _ASCII_DIGIT.search(v) is not None and _ASCII_LETTER.search(v) is not None
    return any(map(str.isdigit, v)) and any(map(str.isalpha, v))


def _mixed_case(v: str, m: re.Match) -> bool:
    """A token's random tail: upper and lower case letters, ≥ 3.5 bits/char."""
    tail = v.split("_", 1)[-1]
    return any(c.isupper() for c in tail) and any(c.islower() for c in tail) and entropy(tail) >= 3.5


def _aws_secret(v: str, m: re.Match) -> bool:
    """40 base64 characters as AWS draws them: upper, lower and a digit, ≥ 4 bits/char
    (a hex digest or a word run is not one)."""
    return (
        any(c.isupper() for c in v)
        and any(c.islower() for c in v)
        and any(c.isdigit() for c in v)
        and entropy(v) >= 4.0
    )


def _hex_key(v: str, m: re.Match) -> bool:
    """A 64-hex value named a private/secret key: not one repeated character or a
    run of digits only, ≥ 3 bits/char."""
    return entropy(v) >= 3.0 and not v.isdigit()


def _has_digit(v: str, m: re.Match) -> bool:
    return any(c.isdigit() for c in v.split(".")[-1]) and not _placeholder(v)


def _not_placeholder(v: str, m: re.Match) -> bool:
    return not _placeholder(v)


# ---------------------------------------------------------------- the rules

_B = r"(?<![A-Za-z0-9_\-])"  # token start
_E = r"(?![A-Za-z0-9_\-])"  # token end
#: key words whose value is a secret whatever it looks like
_SECRET_WORDS = (
    r"password|passwd|passphrase|secret|token|api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|"
    r"private[_\-]?key|auth[_\-]?key|account[_\-]?key|signing[_\-]?key|encryption[_\-]?key|"
    r"master[_\-]?key|credentials?|client[_\-]?secret"
)
_KEY = rf"(?<![A-Za-z0-9])(?P<key>(?i:[A-Za-z0-9_.\-]{{0,40}}?(?:{_SECRET_WORDS})(?:[_\-](?:key|id|base|value|hash|salt|b64))?))"
#: between the key and its value: optional (escaped) closing quote, =, :, =>, :=
#: a declared type between a key and its ``=``: Go ``var apiToken string = "…"``,
#: TypeScript/Kotlin/Python ``apiKey: string = "…"``, Rust ``TOKEN: &str = "…"``
_TYPE = r"(?:[ \t]+(?:string|\[\]byte)|[ \t]*:[ \t]*(?:string|String|str|&'static str|&str)\??)?"
_SEP = _TYPE + r"\\*[\"']?[ \t]*(?:=>|:=|[=:])[ \t]*"
#: a quoted value (also JSON-escaped quotes) or an unquoted one
_VALUE = (
    r"(?:\\*[\"'](?P<q>(?:[^\"'\\\n]|\\[^\"n\\])+)\\*[\"']"
    r"|(?P<s>(?:[^\s\"'\\,;<>{}()\[\]`]|\\[^\"nrt\\])+))"
)
#: a key that names a password, a secret or a token (``_punct_password_check``'s rule)
_PW_KEY = (
    r"(?<![A-Za-z0-9])(?P<key>(?i:[A-Za-z0-9_.\-]{0,40}?(?:password|passwd|passphrase|secret|token)"
    r"(?:[_\-](?:key|value))?))"
)
_PUNCT = frozenset(",;<>{}()[]")
#: code, not a value: a call, an index, a generic type (``get(``, ``kw["``, ``Vec<u8>``,
#: ``String::from(``), or a value that opens with a bracket (``(optional)``, ``[]``)
_CODE_START = re.compile(r"[A-Za-z0-9_.$:&]*[(\[{<]")


def _punct_password_check(v: str, m: re.Match) -> bool:
    """A value with punctuation the key/value rule's class stops at (``,;<>{}()[]``),
    after a password/secret/token key: a secret unless it is code (``_CODE_START``),
    a placeholder, shorter than 6 characters, without a letter or digit, or after a
    ``token`` key a value without a letter (``_key_value_check``'s count rule). A value
    without such punctuation is left to the key/value rule."""
    if not _PUNCT.intersection(v) or len(v) < 6 or _placeholder(v) or _CODE_START.match(v):
        return False
    if _in_url_userinfo(v, m) or _NEXT_FIELD.search(v):  # a connection string's fields: F20
        return False
    if not any(c.isalnum() for c in v):
        return False
    key = (m.group("key") or "").lower()
    return not key.endswith("token") or any(c.isalpha() for c in v)


#: gitleaks' generic-api-key idea: a key naming a key (``generic-secret``'s)
_GENERIC_KEY = (
    r"(?<![A-Za-z0-9])(?i:[A-Za-z0-9_.\-]{0,40}?(?:key|auth|credential|creds|secret|token|sig|signature))"
)

_PEM = r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"

RULES: list[Rule] = [
    Rule("private-key", _PEM + r"[\s\S]*?-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"),
    # cut off (a truncated tool output): the base64 body after BEGIN
    Rule("private-key", _PEM + r"(?:[A-Za-z0-9+/=\s]|\\+[nr])+"),
    Rule("anthropic-key", _B + r"sk-ant-[A-Za-z0-9_\-]{20,}"),
    Rule("openai-key", _B + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}", _random_tail),
    Rule("github-token", _B + r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}" + _E),
    Rule("github-token", _B + r"github_pat_[A-Za-z0-9_]{22,255}" + _E),
    Rule(
        "gitlab-token",
        _B + r"gl(?:pat|dt|ptt|rt|cbt|imt|ft|oas|soat|agent)-[A-Za-z0-9_\-]{20,}(?:\.[\w.\-]+)?",
    ),
    # detect-secrets' digits 0-9, not gitleaks' base32 2-7: a key id with a 0, 1, 8 or 9
    # (a made-up or mistyped one, AKIA1234567890ABCDEF) is stored redacted all the same
    Rule("aws-access-key", r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Z0-9])"),
    Rule("slack-token", _B + r"xox[abeoprs]-[A-Za-z0-9\-]{10,}"),
    Rule("slack-token", _B + r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    Rule("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<s>[A-Za-z0-9+/_\-]{20,})"),
    Rule("google-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E),
    Rule("azure-storage-key", r"(?i:AccountKey|SharedAccessKey)=(?P<s>[A-Za-z0-9+/]{20,}={0,2})"),
    Rule("azure-sas", r"[?&]sig=(?P<s>[A-Za-z0-9%+/=]{20,})"),
    Rule("azure-client-secret", r"(?<![\w~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![\w~.\-])"),
    Rule("stripe-key", r"(?<![A-Za-z0-9])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    Rule("stripe-webhook-secret", _B + r"whsec_[A-Za-z0-9+/=]{24,}"),
    Rule("npm-token", _B + r"npm_[A-Za-z0-9]{36}" + _E),
    Rule("pypi-token", _B + r"pypi-AgE[A-Za-z0-9_\-]{50,}"),
    # hf_ + 34 of [A-Za-z0-9] (gitleaks' rule takes letters only: a token with a digit
    # would pass it)
    Rule("huggingface-token", _B + r"(?:hf_|api_org_)[A-Za-z0-9]{34}" + _E, _mixed_case),
    Rule("sendgrid-key", _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E),
    Rule("twilio-key", r"(?<![A-Za-z0-9])(?:AC|SK)[0-9a-f]{32}(?![A-Za-z0-9])"),
    Rule("mailgun-key", r"(?<![A-Za-z0-9])key-[0-9a-zA-Z]{32}(?![A-Za-z0-9])"),
    # a Telegram bot token also where no key word names it (a bot API URL:
    # api.telegram.org/bot<id>:<35 chars>; core.telegram.org/bots/api)
    Rule(
        "telegram-bot-api-token",
        r"(?:(?<=bot)|(?<![A-Za-z0-9]))\d{5,16}:A[A-Za-z0-9_\-]{34}(?![A-Za-z0-9_\-])",
        _random_tail,
    ),
    # a Discord webhook's token (discord.com/developers/docs/resources/webhook: the URL
    # alone lets anyone post as the webhook; gitleaks has no rule for it): newuser18 F21
    Rule("discord-webhook", r"discord(?:app)?\.com/api/webhooks/\d{5,30}/(?P<s>[A-Za-z0-9_\-]{40,})"),
    # a password on a command line, written into the tool call an agent ran (newuser18
    # F20): mysql's ``-pPASS`` (dev.mysql.com, mysql --password: no space after -p; a bare
    # ``-p`` prompts) and sshpass' ``-p PASS`` (sshpass(1))
    Rule(
        "password",
        r"(?<![\w./\-])(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)[ \t][^\n\\|;&]*?"
        r"(?<=[ \t])-p(?:'(?P<q>[^'\n\\]+)'|(?P<s>[^\s\"'\\\-][^\s\"'\\]*))",
        _not_placeholder,
    ),
    Rule(
        "password",
        r"(?<![\w./\-])sshpass[ \t]+(?:-[a-oq-zA-Z][^\s]*[ \t]+)*-p[ \t]*(?P<s>[^\s\"'\\\-][^\s\"'\\]*)",
        _not_placeholder,
    ),
    Rule("jwt", r"(?<![\w\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    Rule("kube-bootstrap-token", r"(?<![a-z0-9.])[a-z0-9]{6}\.[a-z0-9]{16}(?![a-z0-9.])", _has_digit),
    Rule(
        "url-credentials",
        r"://[^\s:/@\"'\\]*:(?P<s>[^\s@/\"'\\]+)@",
        _not_placeholder,
    ),
    Rule(
        "authorization",
        r"(?i:\b(?:bearer|basic|token)[ \t]+)(?P<s>[A-Za-z0-9._~+/=\-]{16,})",
        _high_entropy,
        ci=True,
    ),
    Rule(
        "authorization",
        r"(?i:\bbearer[ \t]+)(?P<s>[A-Za-z0-9._~+/\-]{24,}=*)",
        _not_placeholder,
        ci=True,
    ),
    # a URL query parameter's value ends at ``&`` (newuser18 F21)
    Rule("password", _KEY + r"=(?P<s>[^&#\s\"'\\]+)", _query_value_check, ci=True),
    Rule("password", _KEY + _SEP + _VALUE, _key_value_check, ci=True),
    # a password made of punctuation (``POSTGRES_PASSWORD: a!b@c$d()e*_,/:;=?@ff[]22``,
    # a Crush session's docker-compose file): the rule above stops at the first ``(``,
    # ``[``, ``,`` or ``;`` and keeps a value followed by ``(`` as a call; here the
    # value runs to whitespace, a quote or a backslash (a closing ``)``/``]``/``}``,
    # ``,`` or ``;`` at its end left out: code's ``f(password=pw)``)
    Rule(
        "password",
        _PW_KEY + _SEP + r"(?P<s>[^\s\"'\\`]*[^\s\"'\\`,;)\]}])",
        _punct_password_check,
        ci=True,
    ),
    # command-line flags: --password hunter2, --token=…
    Rule(
        "password",
        r"(?i:--(?P<key>password|passwd|token|api-key|secret|client-secret|auth-token))[ =]"
        r"(?:[\"'](?P<q>[^\"'\n]+)[\"']|(?P<s>[^\s\"'\\]+))",
        _key_value_check,
        ci=True,
    ),
    # gitleaks' generic-api-key idea: a random-looking value after a key naming a key
    Rule(
        "generic-secret",
        _GENERIC_KEY + r"\\*[\"']?[ \t]*(?:=>|:=|[=:,])[ \t]*\\*[\"'`]?(?P<s>[A-Za-z0-9_.=+/\-]{16,200})",
        _high_entropy,
        ci=True,
    ),
]

#: context rules that take a key word at some distance before the value: RE2 (linear
#: time, no look-behind: the boundaries are consumed classes; the value is group
#: ``s``), run on the texts where one of ``_PROSE_WORDS`` occurs
_PROSE_RULES: list[Rule] = [
    # an AWS secret access key in prose ("the aws secret is …"): 40 base64 characters
    # within 80 characters after AWS/Amazon/secret naming it (detect-secrets'
    # AWSKeyDetector's idea; gitleaks has no rule for the secret key alone)
    Rule(
        "aws-secret-key",
        r"(?:^|[^A-Za-z0-9])(?i:aws|amazon|secret)(?:[^A-Za-z0-9\n][^\n]{0,80}?)??(?:^|[^A-Za-z0-9/+_\-])"
        r"(?P<s>[A-Za-z0-9/+]{40})(?:$|[^A-Za-z0-9/+=_\-])",
        _aws_secret,
    ),
    # a 64-hex key named as such: "private key: 0x4c08…", "the signing key is 4c08…"
    Rule(
        "private-key-hex",
        r"(?i:(?:private|secret|signing|wallet)[ _\-]?key)[^\n]{0,40}?(?:^|[^0-9A-Za-z])(?:0x)?"
        r"(?P<s>[0-9a-fA-F]{64})(?:$|[^0-9A-Za-z])",
        _hex_key,
    ),
]
_PROSE_WORDS = ("aws", "amazon", "secret", "private", "signing", "wallet")

#: literals one of which a case-sensitive rule's match contains (``str.__contains__``
#: is a memchr scan: rules whose literal is absent are not run); None: always run
_ANCHORS: dict[str, tuple[str, ...] | None] = {
    "private-key": ("-----BEGIN",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "github-token": ("gh", "github_pat_"),
    "gitlab-token": ("gl",),
    "aws-access-key": ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    "slack-token": ("xox", "xapp-"),
    "slack-webhook": ("hooks.slack.com",),
    "google-api-key": ("AIza",),
    "azure-storage-key": ("=",),
    "azure-sas": ("sig=",),
    "azure-client-secret": ("Q~",),
    "stripe-key": ("k_live_", "k_test_"),
    "stripe-webhook-secret": ("whsec_",),
    "npm-token": ("npm_",),
    "pypi-token": ("pypi-",),
    "huggingface-token": ("hf_", "api_org_"),
    "sendgrid-key": ("SG.",),
    "twilio-key": ("AC", "SK"),
    "mailgun-key": ("key-",),
    "jwt": ("eyJ",),
    "telegram-bot-api-token": (":A",),
    "kube-bootstrap-token": (".",),
    "url-credentials": ("://",),
    "discord-webhook": ("/api/webhooks/",),
    "password": ("mysql", "mariadb", "sshpass"),  # the case-sensitive command-line rules
}
#: each rule with its literals (``_ANCHORS``; None for a case-insensitive rule) in
#: ``RULES``' order; its regex is ``_RX``'s, compiled on first use (``_rx``)
_RULE_LITS = [(r, None if r.ci else _ANCHORS.get(r.kind)) for r in RULES]
#: ``RULES``' regexes by order, None until first used: a process compiles only the
#: rules its texts meet (compiling all ~57 cost ~8 ms of CPU in every process that
#: imports this module, twice on a first ingest's critical path: issue 26)
_RX: list[re.Pattern | None] = [None] * len(RULES)


def _rx(order: int) -> re.Pattern:
    """``RULES[order]``'s compiled regex (compiled once, kept in ``_RX``)."""
    rx = _RX[order]
    if rx is None:
        rx = _RX[order] = re.compile(RULES[order].pattern)
    return rx


def _compiled() -> list[tuple[Rule, re.Pattern, tuple[str, ...] | None]]:
    """Every rule as ``(rule, its compiled regex, its literals)``, in order (tests)."""
    return [(r, _rx(i), lits) for i, (r, lits) in enumerate(_RULE_LITS)]


#: the case-insensitive rules that match a key (a run of ``[A-Za-z0-9_.-]``, case-folded
#: as Python's ``re`` folds it), ending in a key word, then a separator (``_SEP``'s, or
#: generic-secret's: each starts with a character the key run cannot hold): ``_spans``
#: runs them only at the starts of ``_ci_starts``' key/value anchors, not at those a
#: prose anchor alone gives (``token ``, ``basic ``, ``bearer ``): such a rule matching
#: there would end its key at the prose anchor's space or tab, its key word ``token``
#: (no key word ends in ``basic`` or ``bearer``), and its separator there is one the
#: anchor's first branch takes (a superset: ``,`` too, any case of ``string``), which
#: leftmost-first matching prefers to ``token `` at the same place (tested: a kv rule
#: never matches at a prose-only start, over fuzzed texts)
_KV_ORDERS = frozenset(
    i for i, r in enumerate(RULES) if r.ci and r.pattern.startswith((_KEY, _PW_KEY, _GENERIC_KEY))
)
#: every kind a marker can name: ctxkeep's context rules', then gitleaks' rule ids
KINDS = tuple(dict.fromkeys([r.kind for r in RULES + _PROSE_RULES] + secret_rules.rule_ids()))


@cache
def _prose_compiled() -> list[tuple[str, Any, Callable | None, int]]:
    """The prose rules as ``(kind, RE2 regex, check, the group index of s)``, compiled
    on first use (not at import: issue 26's process starts)."""
    return [
        (r.kind, rx, r.check, rx.groupindex["s"])
        for r, rx in ((r, secret_rules.compile_re2(r.pattern)) for r in _PROSE_RULES)
    ]


def _prefilter(pattern: str) -> str:
    """A rule's pattern for the Rust ``regex`` crate: look-arounds dropped (a superset
    of the matches), named groups made plain."""
    p = re.sub(r"\(\?<?[=!](?:[^()\\]|\\.|\[[^\]]*\])*\)", "", pattern)
    return re.sub(r"\(\?P<\w+>", "(?:", p)


#: Where a case-insensitive rule can match: its key word and separator (a superset of
#: the key/value, flag, authorization and generic rules, written without their
#: lazy key prefixes, which make the Rust automaton ~50x slower).
_CI_ANCHOR = (
    r"(?i:(?:password|passwd|passphrase|secret|token|key|auth|credentials?|creds|sig|signature)"
    r"(?:[_\-](?:key|id|base|value|hash|salt|b64))?"
    r"(?:[ \t]+(?:string|\[\]byte)|[ \t]*:[ \t]*(?:string|str|&'static str|&str)\??)?"
    r"\\*[\"']?[ \t]*(?:=>|:=|[=:,])"
    r"|(?:bearer|basic|token)[ \t]|--(?:password|passwd|token|api-key|secret|client-secret|auth-token)[ =])"
)
#: the anchor over an ASCII-lowercased copy of the text (same length; a
#: case-sensitive pattern is ~5x faster in Python ``re`` than ``(?i:...)``)
_CI_ANCHOR_RX = re.compile(_CI_ANCHOR.replace("(?i:", "(?:", 1))
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
_CI_BEFORE = 48  # characters of key before a case-insensitive rule's anchor

#: the two prefilter alternations (case-sensitive rules; the case-insensitive anchor)
PREFILTER = (
    "|".join(f"(?:{_prefilter(r.pattern)})" for r in RULES if not r.ci),
    _CI_ANCHOR,
)


#: case-sensitive rules whose prefilter pattern starts with a character class, so the
#: Rust engine cannot skip ahead to a literal and runs its automaton over every byte
#: (each cost as much as the other 25 rules of ``PREFILTER[0]`` together on a scaled
#: tree's lines), with a pattern every text they match also matches (a literal or a
#: literal-led part of the pattern itself: a necessary condition): ``_cs_prefilter``
#: runs them over the texts that pass it only, so the booleans are ``PREFILTER[0]``'s
_CS_GATED: dict[str, tuple[str, bool]] = {  # kind: (gate, whether it is a literal)
    "azure-client-secret": ("Q~", True),  # the literal inside ``[A-Za-z0-9_~.]{3}\dQ~…``
    "kube-bootstrap-token": (r"\.[a-z0-9]{16}", False),  # the tail of ``[a-z0-9]{6}\.[a-z0-9]{16}``
}
#: ``PREFILTER[0]`` without the ``_CS_GATED`` rules, and those rules' ``(gate, prefilter)``
_CS_REST = "|".join(f"(?:{_prefilter(r.pattern)})" for r in RULES if not r.ci and r.kind not in _CS_GATED)
_CS_SLOW = [(_CS_GATED[r.kind], _prefilter(r.pattern)) for r in RULES if not r.ci and r.kind in _CS_GATED]


def _cs_exprs(col: str = "s") -> list[pl.Expr]:
    """The whole-Series passes of ``_cs_prefilter`` as expressions (``cs``: ``_CS_REST``;
    ``cs_gate<i>``: each ``_CS_SLOW`` gate), to run in one ``select`` beside others."""
    import polars as pl

    c = pl.col(col)
    out = [c.str.contains(_CS_REST).fill_null(False).alias("cs")]
    for j, ((gate, literal), _) in enumerate(_CS_SLOW):
        out.append(c.str.contains(gate, literal=literal).fill_null(False).alias(f"cs_gate{j}"))
    return out


def _cs_prefilter(s: pl.Series, passes: pl.DataFrame | None = None) -> pl.Series:
    """Boolean Series: the texts ``PREFILTER[0]`` matches (the same booleans), its slow
    rules (``_CS_GATED``) run only over the texts their gate passes. ``passes``: the
    ``_cs_exprs`` columns, already evaluated over ``s``."""
    import polars as pl

    if passes is None:
        passes = pl.DataFrame({"s": s}).select(_cs_exprs())
    cs = passes["cs"]
    for j, (_, pattern) in enumerate(_CS_SLOW):
        idx = passes[f"cs_gate{j}"].arg_true()
        if idx.len():
            hit = s.gather(idx).str.contains(pattern).fill_null(False)
            if hit.any():
                cs = cs.scatter(idx.filter(hit), True)
    return cs


#: ``_CI_ANCHOR`` for the Rust engine with ASCII-only case folding (``(?i-u:``): the
#: same matches as ``_CI_ANCHOR_RX`` over the ASCII-lowercased text (which leaves
#: other letters as they are), so the offsets ``_anchor_offsets`` finds are its matches'
_CI_ANCHOR_ASCII = _CI_ANCHOR.replace("(?i:", "(?i-u:", 1)


def _anchor_offsets(text: str, anchors: list[str]) -> list[int]:
    """Offsets in ``text`` of ``anchors``: the non-overlapping leftmost-first matches
    of ``_CI_ANCHOR_ASCII`` in order, as ``str.extract_all`` returns them. The anchor
    pattern has no look-around or word boundary, so the first occurrence of a matched
    string after the previous match is where the engine found it."""
    out, pos = [], 0
    for a in anchors:
        pos = text.find(a, pos)
        out.append(pos)
        pos += len(a)
    return out


def _ci_starts(text: str, anchors: list[str] | None = None) -> tuple[list[int], list[int]]:
    """Where a case-insensitive rule may start: each anchor's start, and the start of
    the key (the run of ``[A-Za-z0-9_.-]``, at most 48 characters) that ends in it;
    and the same of the key/value anchors only (not a prose anchor, ``_prose``: where
    the ``_KV_ORDERS`` rules may start). ``anchors``: the anchor strings
    ``str.extract_all(_CI_ANCHOR_ASCII)`` found in ``text``; None: found here with
    ``_CI_ANCHOR_RX`` (the same offsets and strings, lower-cased)."""
    if anchors is None:
        low = text.lower() if text.isascii() else text.translate(_ASCII_LOWER)
        found = [(m.start(), m.group()) for m in _CI_ANCHOR_RX.finditer(low)]
    else:
        found = list(zip(_anchor_offsets(text, anchors), anchors, strict=True))
    out, kv = set(), set()
    for a, got in found:
        # the key: back from ``a`` over key characters (``_LAST_NON_KEY``), at most 48
        lo = a - _CI_BEFORE if a > _CI_BEFORE else 0
        m = _LAST_NON_KEY.match(text, lo, a) if lo < a else None
        k = m.end() if m else lo
        out.add(a)
        out.add(k)
        if not _prose(got):
            kv.add(a)
            kv.add(k)
    return sorted(out), sorted(kv)


#: the last character of a text that is not a key character (``str.isalnum()`` or one
#: of ``_.-``: ``\w`` of a str pattern is ``str.isalnum()`` or ``_``, checked over every
#: code point): ``match(text, lo, a).end()`` is where the key that ends at ``a`` starts
_LAST_NON_KEY = re.compile(r"[\s\S]*[^\w.\-]")


def _prose(anchor: str) -> bool:
    """Whether an anchor string is ``_CI_ANCHOR``'s prose branch (``token ``, ``basic
    ``, ``bearer ``: it ends in a space or tab), not a key and separator (which end in
    ``=``, ``:``, ``,`` or ``>``) nor a flag (``--token `` starts with ``--``)."""
    return anchor[-1:] in (" ", "\t") and not anchor.startswith("--")


def _escape_safe(text: str, f: tuple[int, int, int, str]) -> tuple[int, int, int, str] | None:
    r"""A span that neither ends on the backslash of an escape sequence nor starts on
    the character a backslash escapes (gitleaks' classes take ``\``: in a JSON line,
    replacing ``…sig\`` of ``…sig\"`` would eat the escape of the closing quote),
    so redacting a JSON (or JSON-escaped) text keeps it valid; None when nothing is
    left."""
    s, ne, order, kind = f
    e = -ne
    k = e
    while k > s and text[k - 1] == "\\":
        k -= 1
    if (e - k) % 2:
        e -= 1
    k = s
    while k > 0 and text[k - 1] == "\\":
        k -= 1
    if (s - k) % 2:
        s += 1
    return (s, -e, order, kind) if e > s else None


def _keep_maintained(text: str, s: int, e: int, kind: str) -> bool:
    """ctxkeep's policy over the maintained table: a generic rule's (``generic-api-key``)
    value that is a hex digest or a uuid is kept (session texts are full of cache keys,
    commit SHAs and ids after ``key``/``token`` words; a 64-hex key named a private key
    is the ``private-key-hex`` and key/value rules' job)."""
    if not kind.startswith("generic"):
        return True
    v = text[s:e]
    return not (_HEX_RE.fullmatch(v) or _UUID_RE.fullmatch(v))


def _spans(
    text: str,
    cs: bool = True,
    anchors: list[str] | None = None,
    rules: list[int] | None = None,
    wrapped: bool = True,
) -> list[tuple[int, int, str]]:
    """Merged ``(start, end, kind)`` spans of the secrets in ``text``, in order.

    ``cs`` False: the case-sensitive prefilter (``PREFILTER[0]``) did not match
    ``text``, so no case-sensitive rule can (it is a superset of them) and none runs.
    ``anchors``: ``_ci_starts``'. ``rules``: the maintained rules that may match it
    (``_gated``: table indexes, ``len(table)`` standing for the prose rules), in
    order; None: the table's keyword Set picks them and the prose rules run.
    ``wrapped`` False: ``wrapped_tokens.hinted`` did not flag ``text``, so it holds no
    token cut by a line break (``wrapped_tokens.spans`` is not run). Where spans
    overlap they are merged and the first rule's kind names them: ctxkeep's context
    rules come first, then gitleaks' in table order."""
    found: list[tuple[int, int, int, str]] = []
    if rules is None or rules:
        base, n_table = len(RULES), len(secret_rules.ruleset().rules)
        prose = rules is None or rules[-1] >= n_table
        found = [
            (s, -e, base, k)
            for s, e, k in secret_rules.find(
                text,
                extra=_prose_compiled() if prose else (),
                rules=None if rules is None else [i for i in rules if i < n_table],
            )
            if _keep_maintained(text, s, e, k)
        ]
    starts: list[int] | None = None
    kv_starts: list[int] = []
    matches: Iterator[re.Match[str]]
    for order, (rule, lits) in enumerate(_RULE_LITS):
        if rule.ci:
            if starts is None:
                starts, kv_starts = _ci_starts(text, anchors)
            at = kv_starts if order in _KV_ORDERS else starts
            if not at:
                continue
            rx = _RX[order] or _rx(order)
            matches = (m for m in map(rx.match, (text,) * len(at), at) if m)
        elif not cs or (lits is not None and not any(a in text for a in lits)):
            continue
        else:
            rx = _RX[order] or _rx(order)
            matches = rx.finditer(text)
        for m in matches:
            g: str | int | None = "q" if rx.groupindex.get("q") and m.group("q") is not None else None
            if g is None:
                g = "s" if rx.groupindex.get("s") and m.group("s") is not None else 0
            v = m.group(g)
            if not v or (rule.check is not None and not rule.check(v, m)):
                continue
            found.append((m.start(g), -m.end(g), order, rule.kind))
    if wrapped:  # tokens cut by a line break (nufix18: F1)
        found += [(s, -e, len(RULES), k) for s, e, k in wrapped_tokens.spans(text)]
    found = [x for x in map(_escape_safe, [text] * len(found), found) if x is not None]
    found.sort()
    merged: list[tuple[int, int, str]] = []
    for s, ne, _, k in found:
        e = -ne
        if merged and s < merged[-1][1]:
            ps, pe, pk = merged[-1]
            merged[-1] = (ps, max(pe, e), pk)
        else:
            merged.append((s, e, k))
    return merged


def redact_counts(text: str) -> tuple[str, Counter]:
    """``text`` with every secret replaced by ``[REDACTED:<kind>]``, and a Counter of
    the values replaced per kind. Exact (no prefilter)."""
    return _apply(text, _spans(text))


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """The merged ``(start, end, kind)`` character spans ``redact_counts`` replaces in
    ``text`` (exact, no prefilter), in order; ``replace_spans`` applies them."""
    return _spans(text)


def replace_spans(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, Counter]:
    """``text`` with ``spans`` (ordered, not overlapping: ``secret_spans``', possibly
    moved to another text's offsets) replaced by their markers, and the Counter of
    the values replaced per kind."""
    return _apply(text, spans)


def _apply(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, Counter]:
    """``text`` with ``spans`` (``_spans``') replaced by their markers, and the Counter."""
    if not spans:
        return text, Counter()
    out, last = [], 0
    counts: Counter[str] = Counter()
    for s, e, k in spans:
        out.append(text[last:s])
        out.append(MARKER.format(kind=k))
        counts[k] += 1
        last = e
    out.append(text[last:])
    return "".join(out), counts


def _candidates(s: pl.Series) -> pl.Series:
    """Boolean Series: the texts the prefilter matches (the only ones that can hold a
    secret)."""
    import polars as pl

    gated = pl.Series([False] * s.len(), dtype=pl.Boolean).scatter(list(_gated(s)) or [], True)
    return _cs_prefilter(s) | s.str.contains(PREFILTER[1]).fill_null(False) | gated


@cache
def _gates() -> tuple[list[str], pl.DataFrame, list[str | None]]:
    """The maintained rules' gates: ``(keywords, keyword → gate index frame, gates)``.
    Gates ``0..n-1`` are the table's rules (``secret_rules.rust_gate`` of each regex),
    gate ``n`` the prose rules (their patterns joined; their words as keywords)."""
    import polars as pl

    rs = secret_rules.ruleset()
    n = len(rs.rules)
    pairs = [(k, i) for k, idx in zip(rs.keywords, rs.by_keyword, strict=True) for i in idx]
    pairs += [(w, n) for w in _PROSE_WORDS]
    prose = "|".join(f"(?:{secret_rules.rust_gate(r.pattern)})" for r in _PROSE_RULES)
    frame = pl.DataFrame(pairs, schema={"kw": pl.String, "gate": pl.Int64}, orient="row")
    return sorted({k for k, _ in pairs}), frame, [*rs.gates, prose]


#: a gate over texts of fewer bytes runs as the rule's RE2 regex in Python
_GATE_IN_PYTHON_BYTES = 512 << 10

#: what keeps a gate off ``_ascii_gate``: a class escape by Unicode property, a ``\x``
#: escape past ASCII
_NOT_ASCII_SAFE = re.compile(r"\\[pP]|\\x(?:\{|[89a-fA-F])")


@lru_cache(maxsize=512)
def _ascii_gate(pattern: str) -> str | None:
    r"""``pattern`` (a gate: ``secret_rules.rust_gate``, or the prose gate) with its
    case-insensitive groups folding ASCII only (``(?i)`` as ``(?i-u)``, ``(?i:`` as
    ``(?i-u:``): over a text holding neither KELVIN SIGN nor long s, the same
    matches. A gate's classes are ASCII (``rust_gate`` writes ``\w \s \d`` as Go's
    ASCII sets, ``\b`` as ``(?-u:\b)``), and Unicode's simple case folding adds to an
    ASCII letter those two characters only (``_FOLDS``; the same in RE2, checked over
    every code point); anything else ``-u`` changes (``.``, a negated class: they could
    match part of a character) the Rust engine refuses in a pattern over text, and a
    pattern it refuses, one with a non-ASCII character, a ``\p`` class or a ``\x``
    escape past ASCII gets None (the gate as it is). Measured on generic-api-key's
    gate over the 157 MB of a 200 MB ingest's recorded texts holding its keywords:
    0.261 -> 0.144 CPU s (the Unicode case folding of its counted classes)."""
    import polars as pl

    if "(?i" not in pattern or not pattern.isascii() or _NOT_ASCII_SAFE.search(pattern):
        return None
    out = pattern.replace("(?i)", "(?i-u)").replace("(?i:", "(?i-u:")
    try:
        pl.Series([""], dtype=pl.String).str.contains(out)
    except pl.exceptions.ComputeError:
        return None
    return out


#: the maintained table's keywords that most session texts hold (measured on a scaled
#: tree: each in 5-35 % of the lines): looked for one by one (``_keyword_hits``)
_COMMON_KEYWORDS = frozenset(["token", "s.", "ext_", "sk", "ey", "test_", "access", "key", "api", "auth"])


@cache
def _keyword_set(words: tuple[str, ...]) -> secret_rules.KeywordSet:
    """A case-insensitive ``re2.Set`` of ``words`` (built once: Polars' ``extract_many``
    built its Aho-Corasick automaton of ~240 keywords anew per call, ~0.1 CPU s)."""
    return secret_rules.KeywordSet(words)


def _ci_words(words: list[str]) -> str:
    return "(?i-u:" + "|".join(re.escape(w) for w in words) + ")"


def _keyword_exprs(keywords: list[str], col: str = "s") -> list[pl.Expr]:
    """The whole-Series passes of ``_keyword_hits`` as expressions (``kw_rare``: the
    texts holding one of the rare keywords; ``kw=<k>``: those holding common keyword
    ``k``), to run in one ``select`` beside others."""
    import polars as pl

    c = pl.col(col)
    rare = [k for k in keywords if k not in _COMMON_KEYWORDS]
    out = [c.str.contains(_ci_words(rare)).fill_null(False).alias("kw_rare")] if rare else []
    out += [
        c.str.contains(_ci_words([k])).fill_null(False).alias(f"kw={k}")
        for k in keywords
        if k in _COMMON_KEYWORDS
    ]
    return out


def _keyword_hits(
    s: pl.Series, keywords: list[str], passes: pl.DataFrame | None = None, rare_hits: RareHits | None = None
) -> pl.DataFrame:
    """``(i, kw)``: each keyword (lower case) occurring in text ``i`` of ``s``, ASCII
    case-insensitively, as one overlapping Aho-Corasick pass would find them
    (``str.extract_many``), cheaper: that pass over every text cost ~0.24 CPU s per
    40 MB of a scaled tree, most of it finding the few keywords nearly every text holds
    (``_COMMON_KEYWORDS``: ``token``, ``key``, ``s.`` …). Those are looked for one by one
    (a literal search each); the others first by one regex alternation, which tells the
    texts holding any of them (~5 % of the lines), and only those texts go through an
    RE2 Set of them (``_keyword_set``). Every keyword is in one of the two sets, so
    the pairs are the same, or more where RE2's Unicode case folding finds a keyword
    ASCII folding does not (``\u212a`` KELVIN SIGN as ``k``: as gitleaks, which
    lower-cases with Go's ``strings.ToLower``): a gate passes at least the texts it
    passed. ``passes``: the ``_keyword_exprs`` columns, already evaluated over ``s``.
    ``rare_hits``: the rare keywords Hyperscan found in each text (``_hs_scan``: ASCII
    case folding); the RE2 Set then runs only over the texts that also hold a
    character Unicode's case folding maps onto an ASCII letter (``_FOLDS``: KELVIN
    SIGN, long s; checked over every code point against RE2: the only two), so the
    pairs are the Set's. Measured per 240 MB of a 200 MB ingest's recorded lines and
    texts: the Set over the ~5,400 texts holding a rare keyword (70 MB) cost 0.35 CPU
    s."""
    import polars as pl

    if passes is None:
        passes = pl.DataFrame({"s": s}).select(_keyword_exprs(keywords))
    frames = []
    rare = tuple(k for k in keywords if k not in _COMMON_KEYWORDS)
    if rare:
        idx = passes["kw_rare"].arg_true()
        got: list[tuple[int, str]] = []
        if idx.len() and rare_hits is not None:
            pairs, folds = rare_hits[0], rare_hits[1]
            got += [(i, k) for i, k in pairs if i not in folds]
            idx = pl.Series([i for i in idx.to_list() if i in folds], dtype=idx.dtype)
        if idx.len():
            kw_set = _keyword_set(rare)
            for i, t in zip(idx.to_list(), s.gather(idx).to_list(), strict=True):
                got += [(i, rare[j]) for j in kw_set.match(secret_rules._encode(t)) or ()]
        if got:
            frames.append(pl.DataFrame(got, schema={"i": pl.Int64, "kw": pl.String}, orient="row"))
    for k in keywords:
        if k in _COMMON_KEYWORDS:
            idx = passes[f"kw={k}"].arg_true()
            frames.append(
                pl.DataFrame({"i": idx.cast(pl.Int64), "kw": pl.Series([k] * idx.len(), dtype=pl.String)})
            )
    if not frames:
        return pl.DataFrame(schema={"i": pl.Int64, "kw": pl.String})
    return pl.concat(frames, how="vertical")


def _gated(
    s: pl.Series, passes: pl.DataFrame | None = None, rare_hits: RareHits | None = None
) -> dict[int, list[int]]:
    """Which maintained rules may match each text of ``s``: ``{position: [gate index,
    ...]}`` (``_gates``) for the texts where one may. gitleaks' keyword rule (a rule
    runs only where one of its keywords occurs: one overlapping Aho-Corasick pass,
    ``str.extract_many``), then each rule's regex in Polars' Rust engine
    (``secret_rules.rust_gate``: it matches wherever the RE2 regex does) over just the
    texts holding its keywords, so only the texts a rule's regex matches reach Python
    (on the corpus: 1 % of the texts, where the keywords alone took 74 %). A gate the
    Rust engine refuses passes every text holding its keywords. Keyword-less rules pass
    every text. ``passes``, ``rare_hits``: ``_keyword_hits``'."""
    import polars as pl

    keywords, kw_gate, gates = _gates()
    pairs = (
        _keyword_hits(s, keywords, passes, rare_hits)
        .unique()
        .join(kw_gate, on="kw")
        .select("i", "gate")
        .unique()
    )
    out: dict[int, list[int]] = {}
    rs = secret_rules.ruleset()
    if rs.always:
        for i in range(s.len()):
            out[i] = list(rs.always)
    sizes = pairs.join(
        pl.DataFrame({"i": pl.int_range(s.len(), eager=True), "n": s.str.len_bytes().fill_null(0)}), on="i"
    )
    raws: dict[int, bytes | None] = {}
    # the texts holding KELVIN SIGN or long s (Hyperscan's ``fold``): their gates fold
    # Unicode; the others' fold ASCII only (``_ascii_gate``: the same booleans, faster)
    folds = None
    if rare_hits is not None:
        folds = pl.repeat(False, s.len(), dtype=pl.Boolean, eager=True)
        if rare_hits[1]:
            folds = folds.scatter(sorted(rare_hits[1]), True)
        sizes = _big_texts_ungated(s, sizes, gates, rare_hits[1])
    hs_gates = {} if rare_hits is None else rare_hits[2]
    for (g,), part in sizes.group_by(["gate"]):
        idx = part["i"]
        pattern = gates[g]
        if pattern is None:
            pass
        elif g in hs_gates and folds is not None:  # Hyperscan's scan ran it (``_hs_gate``)
            f = folds.gather(idx)
            plain, folded = idx.filter(~f), idx.filter(f)
            matched = hs_gates[g]
            idx = pl.Series([i for i in plain.to_list() if i in matched], dtype=idx.dtype)
            if folded.len():  # (the Unicode gate, as below)
                try:
                    got = folded.filter(s.gather(folded).str.contains(pattern).fill_null(False))
                except pl.exceptions.ComputeError:  # the Rust engine refuses it: no gate
                    got = folded
                idx = pl.concat([idx, got])
        elif part["n"].sum() < _GATE_IN_PYTHON_BYTES:  # RE2 here: a Polars regex costs ~1.5 ms to compile
            rxs = (
                [r[1] for r in _prose_compiled()]
                if g == len(rs.rules)
                else [rs.rules[g].pre or rs.rules[g].rx]
            )
            keep = []
            at = idx.to_list()
            new = [i for i in at if i not in raws]
            if new:  # (one gather: ``s[i]`` one by one cost ~3 µs each; a String's
                # bytes are its UTF-8, what ``secret_rules._encode`` gives of it)
                raws.update(zip(new, s.gather(new).cast(pl.Binary).to_list(), strict=True))
            for i in at:
                raw = raws[i]
                if raw is not None and any(rx.search(raw) for rx in rxs):
                    keep.append(i)
            idx = pl.Series(keep, dtype=idx.dtype)
        else:
            fast = None if folds is None else _ascii_gate(pattern)
            try:
                if fast is None or folds is None:
                    idx = idx.filter(s.gather(idx).str.contains(pattern).fill_null(False))
                else:
                    f = folds.gather(idx)
                    plain, folded = idx.filter(~f), idx.filter(f)
                    idx = plain.filter(s.gather(plain).str.contains(fast).fill_null(False))
                    if folded.len():
                        hit = s.gather(folded).str.contains(pattern).fill_null(False)
                        idx = pl.concat([idx, folded.filter(hit)])
            except pl.exceptions.ComputeError:  # the Rust engine refuses it: no gate
                pass
        for i in idx.to_list():
            out.setdefault(i, []).append(g)
    for v in out.values():
        v.sort()
    return out


#: a text of at least this many bytes with ``_UNION_GATES`` gates or more is first
#: matched against the alternation of its gates (``_big_texts_ungated``)
_UNION_BYTES = 256 << 10
_UNION_GATES = 3


def _big_texts_ungated(
    s: pl.Series, sizes: pl.DataFrame, gates: list[str | None], folds: set[int]
) -> pl.DataFrame:
    """``sizes`` (``_gated``'s ``i``, ``gate``, ``n`` rows) without the rows of each big
    text (``_UNION_BYTES``, ``_UNION_GATES``) that no gate of its matches: one pass of
    their alternation over it (each gate a group of its own, its flags scoped to it;
    ``_ascii_gate``'s where the text holds no ``_FOLDS`` character) matches wherever one
    of them does, so the same texts reach the same rules. A tool result of ~1 MB
    repeated across a scaled tree's sessions held the keywords of 20-23 rules, each
    gate a pass of its own over it: the 31 such lines of a 200 MB ingest's recorded
    calls, none of which any gate matched, cost 0.55 CPU s gate by gate and 0.27 as
    alternations alone; in the whole replay the saving is small (min of 3, load
    22-25: 3.293 -> 3.217 CPU s), as each gate still runs over its other texts. A gate-less rule
    (None) keeps its row; an alternation the Rust engine refuses keeps them all."""
    import polars as pl

    big = sizes.filter(pl.col("n") >= _UNION_BYTES)
    if big.height == 0:
        return sizes
    drop: list[int] = []
    for i, gs in big.group_by("i").agg(pl.col("gate")).rows():
        pats = [gates[g] for g in gs if gates[g] is not None]
        if len(pats) < _UNION_GATES:
            continue
        if i not in folds:
            pats = [_ascii_gate(x) or x for x in pats]
        try:
            if not s.slice(i, 1).str.contains("|".join(f"(?:{x})" for x in pats)).fill_null(False)[0]:
                drop.append(i)
        except pl.exceptions.ComputeError:  # (too big for the engine: each gate alone)
            pass
    if not drop:
        return sizes
    gateless = [g for g, x in enumerate(gates) if x is None]
    return sizes.filter(~(pl.col("i").is_in(drop) & ~pl.col("gate").is_in(gateless)))


#: the bytes of a Series from which ``_passes`` compiles and uses Hyperscan (a reader
#: process's calls are 16 MiB flushes: ``readahead.PROCESS_REKEY``)
HS_MIN_BYTES = 8 << 20


#: the rare keywords Hyperscan found: ``([(text position, keyword), ...], {positions of
#: the texts holding a ``_FOLDS`` character}, {gate index: positions of the texts its
#: ``_hs_gate`` matched})`` (``_hs_scan``, ``_keyword_hits``, ``_gated``; the gates:
#: ``_HS_GATES``')
RareHits = tuple[list[tuple[int, str]], set[int], dict[int, set[int]]]


def _passes(s: pl.Series) -> pl.DataFrame:
    """``_scan(s)``'s columns."""
    return _scan(s)[0]


def _scan(s: pl.Series) -> tuple[pl.DataFrame, RareHits | None]:
    """The whole-Series passes of ``redact_series`` over ``s``: the columns ``cs`` and
    ``cs_gate<j>`` (``_cs_exprs``), ``anchor`` (``_CI_ANCHOR_ASCII`` matches: the text
    has a case-insensitive rule's anchor), ``kw_rare``, ``kw=<k>``
    (``_keyword_exprs``) and ``wrap_lit`` (the text holds one of
    ``wrapped_tokens.LITERALS``, case-sensitive: ``str.contains_any``'s boolean), each
    a Boolean per text (False for a null). One Hyperscan
    scan per text (``_hs_passes``) where Hyperscan is installed, else Polars' passes in
    one ``select`` (each a Rust automaton over every text, on Polars' pool). Hyperscan
    from the first Series of ``HS_MIN_BYTES`` on (its database's compile, ~0.07-0.1 CPU
    s once per process, is paid back by ~15 MB of text: a hook's or a small ingest's
    few lines stay on Polars, whose regexes compile in milliseconds). With the columns,
    Hyperscan's ``RareHits`` (else None)."""
    if _hs_database.cache_info().currsize or (s.str.len_bytes().sum() or 0) >= HS_MIN_BYTES:
        got = _hs_scan(s)
        if got is not None:
            return got
    import polars as pl

    return pl.DataFrame({"s": s}).select(
        [
            *_cs_exprs(),
            pl.col("s").str.contains(_CI_ANCHOR_ASCII).fill_null(False).alias("anchor"),
            *_keyword_exprs(_gates()[0]),
            pl.col("s").str.contains_any(wrapped_tokens.LITERALS).fill_null(False).alias("wrap_lit"),
        ]
    ), None


def _hs_escape(word: str) -> str:
    """``word`` as a Hyperscan literal (ASCII letters and digits as they are, every
    other character as ``\\x{…}``)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in word)


#: the characters of a class escape as a superset (in a class) and a subset (in a negated
#: class) of Rust's Unicode classes, for Hyperscan in UTF-8 mode: each ASCII part exact,
#: every non-ASCII character taken in the superset, none in the subset (no dependence
#: on either engine's Unicode tables)
_ALL_NON_ASCII = "\\x{80}-\\x{10ffff}"
_CLASS_ESCAPES = {
    "d": ("0-9" + _ALL_NON_ASCII, "0-9"),
    "w": ("A-Za-z0-9_" + _ALL_NON_ASCII, "A-Za-z0-9_"),
    "s": ("\\t\\n\\x0b\\f\\r " + _ALL_NON_ASCII, "\\t\\n\\x0b\\f\\r "),
    "S": ("\\x00-\\x{10ffff}", None),
}
#: the characters Unicode's simple case folding (Rust ``regex``'s ``(?i)``) adds to an
#: ASCII letter: KELVIN SIGN to ``k``, LATIN SMALL LETTER LONG S to ``s``
_FOLDS = {"k": "\\x{212a}", "s": "\\x{17f}"}


def _hs_superset(pattern: str) -> str:
    """``pattern`` (a ``PREFILTER`` part: Rust ``regex`` syntax, Unicode on) for
    Hyperscan in UTF-8 mode, matching wherever it matches: ``\\d``, ``\\w``, ``\\s``
    as ``_CLASS_ESCAPES`` (their ASCII part, and in a class that is not negated
    every non-ASCII character), a ``(?i:…)`` group of letters and ``|`` as classes of
    each letter's cases (``_FOLDS`` added). Raises ValueError on any other
    case-insensitive group or class escape (a new rule: written here first)."""
    ci = re.compile(r"\(\?i:([A-Za-z|]+)\)")

    def fold(m: re.Match) -> str:
        return (
            "(?:"
            + "".join(
                c if c == "|" else f"[{c.lower()}{c.upper()}{_FOLDS.get(c.lower(), '')}]" for c in m.group(1)
            )
            + ")"
        )

    pattern = ci.sub(fold, pattern)
    if "(?i" in pattern:
        raise ValueError(f"a case-insensitive group Hyperscan is not given: {pattern!r}")
    out: list[str] = []
    i, depth, negated = 0, 0, False  # depth: inside a class
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1]
            if e in _CLASS_ESCAPES:
                sup, sub = _CLASS_ESCAPES[e]
                chars = sub if depth and negated else sup
                if chars is None:
                    raise ValueError(f"\\{e} in a negated class: {pattern!r}")
                out.append(chars if depth else f"[{chars}]")
            elif e.isalpha() and e not in "ntrfvx":
                raise ValueError(f"\\{e}: a class escape Hyperscan is not given: {pattern!r}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[" and not depth:
            depth, negated = 1, pattern[i + 1 : i + 2] == "^"
            out.append("[^" if negated else "[")
            i += 2 if negated else 1
            if pattern[i : i + 1] == "]":  # a literal ] first in a class
                out.append("\\]")
                i += 1
            continue
        if c == "]" and depth:
            depth = 0
        out.append(c)
        i += 1
    return "".join(out)


@cache
def _hs_database() -> tuple[hyperscan.Database, list[str]] | None:
    """The Hyperscan database of ``_passes``' columns, and their names (pattern id ``j``
    sets column ``names[j]``); None when Hyperscan is not installed.

    - ``cs``: ``_CS_REST`` as ``_hs_superset`` writes it, in UTF-8 mode (a superset
      for every text: it matches wherever Polars' pass does, and where it alone
      matches the texts' exact rules find what they would find anyway);
    - the ``_CS_SLOW`` gates, the anchor (``(?i-u:…)``: ASCII case folding) and the
      keywords (ASCII, case-insensitive as ``(?i-u:…)``) and the cut tokens'
      prefixes (``wrap_lit``: ``wrapped_tokens.LITERALS``, ASCII literals, case
      as written) byte for byte: the same matches as the Rust engine's over UTF-8
      (an ASCII byte is never part of another character), so the same booleans.
      ``wrap_lit`` here saved Polars' ``str.contains_any`` pass (its Aho-Corasick
      built per call and run over every text: 0.38 CPU s per 240 MB of a 200 MB
      ingest's recorded lines and texts)."""
    try:
        import hyperscan as hs
    except ImportError:  # pragma: no cover - a dependency; the Polars passes then
        return None
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    one = hs.HS_FLAG_SINGLEMATCH
    pats: list[tuple[str, str, int]] = [("cs", _hs_superset(_CS_REST), one | hs.HS_FLAG_UTF8)]
    for j, ((gate, literal), _) in enumerate(_CS_SLOW):
        pats.append((f"cs_gate{j}", _hs_escape(gate) if literal else gate, one))
    pats.append(("anchor", _CI_ANCHOR_ASCII.replace("(?i-u:", "(?i:", 1), one))
    keywords = _gates()[0]
    rare = [k for k in keywords if k not in _COMMON_KEYWORDS]
    pats += [(f"kw={k}", _hs_escape(k), one | hs.HS_FLAG_CASELESS) for k in keywords if k in _COMMON_KEYWORDS]
    pats.append(("wrap_lit", "|".join(_hs_escape(x) for x in wrapped_tokens.LITERALS), one))
    if rare:
        pats.append(("fold", "|".join(_FOLDS.values()), one | hs.HS_FLAG_UTF8))
        pats += [(f"{_RARE}{k}", _hs_escape(k), one | hs.HS_FLAG_CASELESS) for k in rare]
        pats += [(f"{_GATE}{g}", p, one) for g, p in _hs_gates().items()]
    try:
        db.compile(
            expressions=[p.encode() for _, p, _ in pats],
            ids=list(range(len(pats))),
            elements=len(pats),
            flags=[f for _, _, f in pats],
        )
    except hs.error:  # pragma: no cover - e.g. a CPU without SSSE3: Polars' passes
        return None
    return db, [n for n, _, _ in pats]


#: each thread's Hyperscan scratch space (``_hs_passes``: the scan releases the GIL, and
#: a reader's rekey thread and the ingest's capture thread may scan at once)
_HS_THREAD = threading.local()


#: a pattern name of ``_hs_database``: a rare keyword (``_RARE<keyword>``), one id each
_RARE = "kwr:"
#: a pattern name of ``_hs_database``: a gate of ``_HS_GATES`` (``_GATE<gate index>``)
_GATE = "gate:"

#: the table's rules whose gates Hyperscan's scan runs (``_hs_gates``), not a Polars pass
#: each over the texts holding their keywords: keywords most session texts hold (``s.``,
#: ``ey``, ``sk``, ``ext_``, ``test_``), so each pass went over most of the texts. Per
#: 100 MB of a 200 MB ingest's recorded lines and their texts (CPU s): those five passes
#: 0.095, the five patterns in the scan ~0.005 (and ~0.03 to compile, once per process).
#: ``generic-api-key`` is not here: its gate alone compiles in ~0.22 s.
_HS_GATES = (
    "vault-service-token",
    "jwt",
    "twilio-api-key",
    "authress-service-client-access-key",
    "lob-api-key",
)

#: what keeps a gate (``_ascii_gate``'s) from Hyperscan's byte mode, where it would count
#: a character of several bytes as several: a class escape (the Rust engine's are
#: Unicode: ``\\w``, ``\\d``, ``\\s``, a bare ``\\b`` and their negations), a Unicode class, a
#: ``-u`` flag other than those ``_hs_gate`` rewrites (a negated class and ``.``: there)
_NOT_BYTE_SAFE = re.compile(r"\\[bBWSDwsdpPX]|\(\?-?u|\(\?[a-z]*-[a-z]*u")


def _hs_gate(pattern: str) -> str | None:
    r"""``pattern`` (a gate: ``secret_rules.rust_gate`` of a rule's regex) for
    Hyperscan's byte mode, matching every text without a ``_FOLDS`` character wherever
    its ``_ascii_gate`` does: that gate folds ASCII case only and its classes are ASCII
    (``(?-u:\b)`` as ``\b``, ``(?i-u)`` as ``(?i)``: the same over UTF-8 bytes, where no
    byte of a non-ASCII character is an ASCII one), and Hyperscan's ``$`` matches at
    the end and before a last newline (the Rust engine's at the end only): a superset.
    None for a gate with anything a byte could match differently from a character (a
    negated class, ``.``, ``\W``, a Unicode class: ``_NOT_BYTE_SAFE``), or none."""
    fast = _ascii_gate(pattern) if "(?i" in pattern else pattern  # (no case folding: as it is)
    if fast is None:
        return None
    # (``\x00``: a placeholder for the ASCII word boundaries, so that a bare ``\b``
    # (Unicode in the Rust engine) is refused)
    out = fast.replace("(?-u:\\b)", "\x00").replace("(?i-u)", "(?i)").replace("(?i-u:", "(?i:")
    if "\x00" in pattern or _NOT_BYTE_SAFE.search(out) or not out.isascii():
        return None
    out = out.replace("\x00", "\\b")
    depth = 0  # inside a class
    i = 0
    while i < len(out):
        c = out[i]
        if c == "\\":
            i += 2
            continue
        if depth:
            if c == "]":
                depth = 0
        elif c == "[":
            if out[i + 1 : i + 2] == "^":
                return None
            depth = 1
            if out[i + 1 : i + 2] == "]":  # a literal ] first in a class
                i += 1
        elif c == ".":
            return None
        i += 1
    return out


@cache
def _hs_gates() -> dict[int, str]:
    """``{gate index: Hyperscan pattern}`` of ``_HS_GATES`` (``_hs_gate``; a gate it
    refuses is left to Polars)."""
    rs = secret_rules.ruleset()
    ids = [r.id for r in rs.rules]
    out = {}
    for rid in _HS_GATES:
        if rid in ids:
            g = ids.index(rid)
            gate = rs.gates[g]
            got = None if gate is None else _hs_gate(gate)
            if got is not None:
                out[g] = got
    return out


def _hs_passes(s: pl.Series) -> pl.DataFrame | None:
    """``_passes`` by one Hyperscan scan of each text (``_hs_scan``'s columns); None
    without Hyperscan."""
    got = _hs_scan(s)
    return None if got is None else got[0]


def _hs_scan(s: pl.Series) -> tuple[pl.DataFrame, RareHits] | None:
    """``_scan`` by one Hyperscan scan of each text (``_hs_database``); None without
    Hyperscan. Measured per 44 MB of a scaled tree's lines and texts (CPU s): the
    scans 0.08-0.10, Polars' passes 0.37. ``kw_rare`` is the texts where a rare
    keyword's id matched (the rare keywords' alternation, as Polars' pass has it)."""
    got = _hs_database()
    if got is None:
        return None
    import polars as pl

    db, names = got
    hits: list[list[int]] = [[] for _ in names]

    def on(j: int, _a: int, _b: int, _f: int, i: object) -> None:
        hits[j].append(i)  # type: ignore[arg-type]  # (``context``: the text's position)

    scratch = getattr(_HS_THREAD, "scratch", None)
    if scratch is None:  # each thread its own (Hyperscan refuses a scratch in use)
        import hyperscan as hs

        scratch = _HS_THREAD.scratch = hs.Scratch(db)
    scan = db.scan
    for i, t in enumerate(s.cast(pl.Binary).to_list()):  # (UTF-8 bytes: no str made)
        if t:
            scan(t, match_event_handler=on, context=i, scratch=scratch)
    cols = []
    pairs: list[tuple[int, str]] = []
    folds: set[int] = set()
    rare: set[int] = set()
    gate_hits: dict[int, set[int]] = {}
    # every column a copy of one all-False Series (``clone`` shares its buffer, which
    # ``scatter`` copies before it writes): one ``pl.repeat`` per call, not per column
    # (~0.2 ms each: ~17 columns per call)
    false = pl.repeat(False, s.len(), dtype=pl.Boolean, eager=True)
    for name, idx in zip(names, hits, strict=True):
        if name.startswith(_RARE):
            pairs += [(i, name[len(_RARE) :]) for i in idx]
            rare.update(idx)
            continue
        if name == "fold":
            folds.update(idx)
            continue
        if name.startswith(_GATE):
            gate_hits[int(name[len(_GATE) :])] = set(idx)
            continue
        col = false.clone().alias(name)
        cols.append(col.scatter(idx, True) if idx else col)  # (``scatter`` sets in place)
    if any(n.startswith(_RARE) for n in names):  # (the Polars passes' column order)
        col = false.clone().alias("kw_rare")
        at = next(j for j, c in enumerate(cols) if c.name.startswith("kw="))
        cols.insert(at, col.scatter(sorted(rare), True) if rare else col)
    return pl.DataFrame(cols), (pairs, folds, gate_hits)


def redact_series(s: pl.Series, counts: Counter | None = None) -> pl.Series:
    """``s`` (String) with its secrets redacted; nulls stay null. Per-kind counts of
    the replaced values are added to ``counts`` when given. The same result as
    ``redact_counts`` per value: the prefilter (``PREFILTER``), the anchors and the
    gates pick the candidates (``_passes``, ``_gated``), the anchors of the
    case-insensitive rules are extracted from them by Polars (see the module doc)."""
    if s.len() == 0:
        return s
    import polars as pl

    passes, rare_hits = _scan(s)
    cs = _cs_prefilter(s, passes)
    gated = _gated(s, passes, rare_hits)
    gl = pl.Series([False] * s.len(), dtype=pl.Boolean).scatter(list(gated) or [], True)
    # tokens cut by a line break (nufix18: F1): the texts holding a prefix (a column
    # of ``_passes``), then its regex over those only
    wrap = wrapped_tokens.hinted(s, passes["wrap_lit"])
    idx = (cs | gl | passes["anchor"] | wrap).arg_true()
    if idx.len() == 0:
        return s
    picked = s.gather(idx)
    # the anchors of the candidates only (a text's ``extract_all`` is its own)
    found = picked.str.extract_all(_CI_ANCHOR_ASCII).to_list()
    values = picked.to_list()
    cs_hit = cs.gather(idx).to_list()
    new: list[str] = []
    wraps = wrap.gather(idx).to_list()
    for i, v, c, a, w in zip(idx.to_list(), values, cs_hit, found, wraps, strict=True):
        text, n = _apply(v, _spans(v, c, a, gated.get(i, []), w))
        new.append(text)
        if counts is not None:
            counts.update(n)
    if new == values:
        return s
    return s.clone().scatter(idx, pl.Series(new, dtype=pl.String))  # s itself stays as it was


def redact_expr(col: str = "text") -> pl.Expr:
    """A Polars expression that replaces every secret in ``col`` by ``[REDACTED:kind]``."""
    import polars as pl

    return pl.col(col).map_batches(redact_series, return_dtype=pl.String)


def redact(text: str) -> str:
    """Redact one string (the same rules as ``redact_expr``; a long text is first
    checked by the prefilter, so a clean 16 MiB line costs one automaton pass)."""
    if len(text) > 65536:
        import polars as pl

        return redact_series(pl.Series([text]))[0]
    return redact_counts(text)[0]


def redact_bytes(raw: bytes) -> bytes:
    """Redact raw bytes (a quarantined line, possibly not UTF-8): decoded with
    ``surrogateescape`` so undecodable bytes come back unchanged around the markers.
    A line with a backslash is scanned with its JSON escapes decoded too
    (``transforms.escapes.view``: a secret written ``ghp_\\u0041…`` or
    ``password\\u003d…``), its spans covering the escaped characters."""
    text = raw.decode("utf-8", "surrogateescape")
    if "\\" in text:  # JSON escapes: the rules see the decoded text, spans cover the escapes
        from ctxkeep.transforms.escapes import view

        seen, starts, ends = view(text)
        spans = [(starts[a], ends[b - 1], k) for a, b, k in secret_spans(seen)]
        text = replace_spans(text, spans)[0]
    return redact(text).encode("utf-8", "surrogateescape")


def count_markers(text: str) -> Counter:
    """Counter of the ``[REDACTED:<kind>]`` markers in ``text`` (plain ``[REDACTED]``
    of older versions counts as ``unknown``)."""
    return Counter(m.group(1) or "unknown" for m in MARKER_RE.finditer(text))
