"""Generate ctxkeep's secret-rule table (``ctxkeep/transforms/secret_rules.json``) and
the rules' sample fixture (``tests/fixtures/secrets/gitleaks_samples.json``) from a
named version of gitleaks (https://github.com/gitleaks/gitleaks, MIT).

    uv run python tools/gen_secret_rules.py --git-dir PATH/TO/gitleaks.git --ref v8.30.1

``--git-dir``: a clone (bare or not) of gitleaks; ``--ref``: the tag or commit to read.
Upgrading is this one command with the new tag, then ``uv run pytest
tests/transforms -q`` (the sample test tells which rules changed behaviour).

What it reads at ``--ref`` (with ``git show``):

- ``config/gitleaks.toml``: the rules (``id``, ``regex`` in Go RE2 syntax,
  ``secretGroup``, ``entropy``, ``keywords``, ``[[rules.allowlists]]`` with
  ``regexTarget``/``regexes``/``stopwords``/``condition``) and the global
  ``[allowlist]`` (``regexes``, ``stopwords``). Written to the table unchanged except:
  rules gitleaks scopes to a file path (``path = …``; ctxkeep redacts texts that have
  none) are left out and listed under ``"excluded"`` with the reason; the end-of-token
  guard ``(?:[\x60'"\\s;]|\\[nr]|$)`` also takes escapes of any depth (``_TERMINATOR``;
  and so do the quotes around a semi-generic rule's operator (``_WIDEN``;
  ``"terminator_widened"`` marks the rules changed); every regex is
  compiled with ``google-re2`` here and the table says, per rule, whether RE2 takes it
  (``"engine": "re2"``) or it needs Python ``re`` (``"re"``, after translating POSIX
  classes), so a rule RE2 refuses is visible, not lost.
- ``cmd/generate/config/rules/*.go``: each rule's true-positive (``tps``) and
  false-positive (``fps``) samples. They are Go expressions: string literals,
  ``[]string{…}``, ``append``, ``utils.GenerateSampleSecrets(id, secret)`` (the INI,
  JSON, YAML, Go, Java, Python, Makefile … contexts of ``utils/generate.go``, rebuilt
  here from that file's template table), ``secrets.NewSecret(regex)`` (a random
  string matching ``regex``: drawn here from a seeded RNG), ``utils.Hex(n)`` and its
  kin (the character classes of ``utils/patterns.go``) and ``fmt.Sprintf``. A small
  evaluator reads those; a sample whose expression uses anything else is skipped and
  counted. A rule left with no true positive gets samples drawn from its own regex
  (``"tp_source": "regex"``). The samples are written base64-encoded, so no
  credential-looking literal sits in the repository for a push-protection scanner.

Nothing here is run at ingest: ctxkeep loads the JSON table (``transforms/redact.py``).
"""

from __future__ import annotations

import argparse
import base64
import json
import random
import re
import re._constants as sre_c
import re._parser as sre_parse
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "ctxkeep" / "transforms" / "secret_rules.json"
SAMPLES = ROOT / "tests" / "fixtures" / "secrets" / "gitleaks_samples.json"
SEED = 24

# utils/generate.go's GenerateSampleSecrets templates ({i} identifier, {I} upper, {s} secret)
_SAMPLE_TEMPLATES = (
    '{i}Token="{s}"',
    '{i}Token = "{s}"',
    "{i}Token={s}",
    "{i}Token = {s}",
    '{\n    "{i}_token": "{s}"\n}',
    '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "<{i}Token>\n    {s}\n</{i}Token>",
    "{i}_token: {s}",
    "{i}_token: '{s}'",
    '{i}_token: "{s}"',
    'string {i}Token = "{s}";',
    'var {i}Token string = "{s}"',
    '{i}Token := "{s}"',
    "{i}Token := `{s}`",
    'String {i}Token = "{s}";',
    'var {i}Token = "{s}"',
    '${i}Token .= "{s}"',
    "{i}Token = '{s}'",
    '{i}Token = "{s}"',
    'System.setProperty("{I}_TOKEN", "{s}")',
    '  "{i}Token" => "{s}"',
    '{i}_TOKEN = "{s}"',
    '{i}_TOKEN := "{s}"',
    '{i}_TOKEN ::= "{s}"',
    '{i}_TOKEN :::= "{s}"',
    '{i}_TOKEN ?= "{s}"',
)
# utils/patterns.go
_CLASSES = {
    "utils.Numeric": "[0-9]{%s}",
    "utils.Hex": "[a-f0-9]{%s}",
    "utils.AlphaNumeric": "[a-z0-9]{%s}",
    "utils.AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "utils.AlphaNumericExtended": "[a-z0-9=_\\-]{%s}",
    "utils.AlphaNumericExtendedLong": "[a-z0-9\\/=_\\+\\-]{%s}",
}


def git_show(git_dir: str, ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{ref}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def git_ls(git_dir: str, ref: str, path: str) -> list[str]:
    out = subprocess.run(
        ["git", "--git-dir", git_dir, "ls-tree", "--name-only", f"{ref}", path + "/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [p for p in out.split() if p.endswith(".go") and not p.endswith("_test.go")]


# ---------------------------------------------------------------- regex → sample


def py_regex(go: str) -> str:
    """A Go/RE2 regex in Python ``re`` syntax: POSIX classes spelled out, ``\\z`` as
    ``\\Z``, inline flags that Python refuses mid-pattern (``(?i)``) turned into a
    scoped group over the rest of the enclosing group."""
    p = go.replace("[:alnum:]", "a-zA-Z0-9").replace("[:alpha:]", "a-zA-Z").replace("[:digit:]", "0-9")
    p = p.replace("[:upper:]", "A-Z").replace("[:lower:]", "a-z").replace("[:xdigit:]", "0-9A-Fa-f")
    p = p.replace("[:space:]", r"\s").replace("[:punct:]", r"!-/:-@\[-`{-~").replace(r"\z", r"\Z")
    out, i = [], 0
    depth_closers = [0]  # per open group: how many "(?flags:" were opened in it
    while i < len(p):
        c = p[i]
        if c == "\\":
            out.append(p[i : i + 2])
            i += 2
            continue
        if c == "[":  # copy a class whole
            j = i + 1
            if j < len(p) and p[j] == "^":
                j += 1
            if j < len(p) and p[j] == "]":
                j += 1
            while j < len(p) and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            out.append(p[i : j + 1])
            i = j + 1
            continue
        m = re.match(r"\(\?([imsU-]+)\)", p[i:])
        if m:
            flags = m.group(1).replace("U", "")
            if flags and i > 0:
                out.append(f"(?{flags}:")
                depth_closers[-1] += 1
            elif flags:
                out.append(f"(?{flags})")
            i += m.end()
            continue
        if c == "(":
            depth_closers.append(0)
            out.append(c)
        elif c == ")":
            out.append(")" * depth_closers.pop())
            out.append(c)
        elif c == "|" and depth_closers[-1]:
            out.append(")" * depth_closers[-1] + "|")
            depth_closers[-1] = 0
        else:
            out.append(c)
        i += 1
    out.append(")" * depth_closers[-1])
    return "".join(out)


_PRINTABLE = [chr(c) for c in range(33, 127)]


def sample(regex: str, rng: random.Random) -> str:
    """A random string matching ``regex`` (Python syntax): repeats take a count in
    [min, min+8] (capped at max), classes a random member, ``.`` a letter."""
    tree = sre_parse.parse(regex)

    def gen(items) -> str:
        out = []
        for op, av in items:
            out.append(one(op, av))
        return "".join(out)

    def cls(items) -> list[str]:
        chars, neg = [], False
        for op, av in items:
            if op is sre_c.NEGATE:
                neg = True
            elif op is sre_c.LITERAL:
                chars.append(chr(av))
            elif op is sre_c.RANGE:
                chars += [chr(c) for c in range(av[0], min(av[1], 0x7E) + 1)]
            elif op is sre_c.CATEGORY:
                chars += {
                    sre_c.CATEGORY_DIGIT: list("0123456789"),
                    sre_c.CATEGORY_WORD: list(
                        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
                    ),
                    sre_c.CATEGORY_SPACE: [" "],
                }.get(av, ["x"])
        if neg:
            return [c for c in _PRINTABLE if c not in chars] or ["x"]
        return chars or ["x"]

    def one(op, av) -> str:
        if op is sre_c.LITERAL:
            return chr(av)
        if op is sre_c.NOT_LITERAL:
            return rng.choice([c for c in _PRINTABLE if ord(c) != av])
        if op is sre_c.ANY:
            return rng.choice("abcdefgh")
        if op is sre_c.IN:
            return rng.choice(cls(av))
        if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None)):
            lo, hi, sub = av
            hi = lo + 8 if hi is sre_c.MAXREPEAT else hi
            n = rng.randint(lo, min(hi, lo + 8))
            return "".join(gen(sub) for _ in range(n))
        if op is sre_c.SUBPATTERN:
            return gen(av[-1])
        if op is sre_c.BRANCH:
            return gen(rng.choice(av[1]))
        if op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            return ""
        if op is sre_c.ATOMIC_GROUP:
            return gen(av)
        raise ValueError(f"no sample for {op}")

    return gen(tree)


# ---------------------------------------------------------------- Go samples

_TOKEN = re.compile(
    r"""(?P<ws>\s+)|(?P<com>//[^\n]*|/\*.*?\*/)|(?P<raw>`[^`]*`)|(?P<str>"(?:[^"\\\n]|\\.)*")"""
    r"""|(?P<rune>'(?:[^'\\\n]|\\.)*')|(?P<id>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*)|(?P<num>\d+)"""
    r"""|(?P<op>:=|\.\.\.|\+=|[{}()\[\],+=:;&*!<>\-/.|%^])""",
    re.S,
)
_ESC = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)")
_SIMPLE_ESC = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}


def _unquote(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1].replace("\r", "")

    def esc(m: re.Match) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16))
        if e[0].isdigit():
            return chr(int(e, 8))
        return _SIMPLE_ESC.get(e, e)

    return _ESC.sub(esc, tok[1:-1])


def tokens(src: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(src):
        kind = m.lastgroup
        if kind in ("ws", "com"):
            continue
        out.append((kind, m.group()))
    return out


class Sample(str):
    """A sample text that knows the secret planted in it (None: not known)."""

    secret: str | None = None


class _Fail(Exception):
    pass


class _Eval:
    """Evaluates the Go sample expressions of one rule function (see module doc)."""

    def __init__(self, toks, rng: random.Random):
        self.t, self.rng, self.env = toks, rng, {}

    def peek(self, i):
        return self.t[i] if i < len(self.t) else ("eof", "")

    def expr(self, i):
        v, i = self.primary(i)
        while self.peek(i)[1] == "+":
            w, i = self.primary(i + 1)
            if not isinstance(v, str) or not isinstance(w, str):
                raise _Fail
            v = v + w
        return v, i

    def args(self, i):
        if self.peek(i)[1] != "(":
            raise _Fail
        i += 1
        out = []
        while self.peek(i)[1] != ")":
            v, i = self.expr(i)
            if self.peek(i)[1] == "...":
                if not isinstance(v, list):
                    raise _Fail
                out.extend(v)
                i += 1
            else:
                out.append(v)
            if self.peek(i)[1] == ",":
                i += 1
            elif self.peek(i)[1] != ")":
                raise _Fail
        return out, i + 1

    def primary(self, i):
        kind, tok = self.peek(i)
        if kind in ("str", "raw"):
            return _unquote(tok), i + 1
        if tok == "[" and self.peek(i + 1)[1] == "]" and self.peek(i + 2)[1] == "string":
            i += 3
            if self.peek(i)[1] != "{":
                raise _Fail
            i += 1
            out = []
            while self.peek(i)[1] != "}":
                v, i = self.expr(i)
                if not isinstance(v, str):
                    raise _Fail
                out.append(v)
                if self.peek(i)[1] == ",":
                    i += 1
                elif self.peek(i)[1] != "}":
                    raise _Fail
            return out, i + 1
        if kind != "id":
            raise _Fail
        if tok == "nil":
            return [], i + 1
        if self.peek(i + 1)[1] != "(":
            return self.env.get(tok), i + 1  # None: a name it does not know (the rule ``r``)
        a, j = self.args(i + 1)
        return self.call(tok, a), j

    def call(self, name, a):
        if name == "append" and a and isinstance(a[0], list):
            return a[0] + list(a[1:])
        if name in _CLASSES and len(a) == 1:
            return _CLASSES[name] % a[0]
        if name == "utils.Hex8_4_4_4_12":
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        if name == "secrets.NewSecret" and len(a) == 1:
            try:
                return sample(py_regex(a[0]), self.rng)
            except (ValueError, re.error, TypeError) as e:
                raise _Fail from e
        if name == "utils.GenerateSampleSecrets" and len(a) == 2:
            i, s = a
            out = []
            for t in _SAMPLE_TEMPLATES:
                x = Sample(t.replace("{i}", i).replace("{I}", i.upper()).replace("{s}", s))
                x.secret = s
                out.append(x)
            return out
        if name == "utils.GenerateSampleSecret" and len(a) == 2:
            x = Sample(f'{a[0]}_api_token = "{a[1]}"')
            x.secret = a[1]
            return x
        if name == "fmt.Sprintf" and a and all(isinstance(x, str) for x in a):
            parts = iter(a[1:])
            try:
                return re.sub(r"%[sdvq]", lambda m: str(next(parts)), a[0])
            except StopIteration as e:
                raise _Fail from e
        if name == "strings.Repeat" and len(a) == 2:
            raise _Fail
        raise _Fail

    def run(self) -> tuple[list, list, int]:
        """Walks the statements; returns (tps, fps, skipped expressions)."""
        tps, fps, skipped = [], [], 0
        i = 0
        while i < len(self.t):
            kind, tok = self.t[i]
            nxt = self.peek(i + 1)[1]
            if kind == "id" and nxt in (":=", "=") and self.peek(i - 1)[1] != "." and "." not in tok:
                try:
                    v, j = self.expr(i + 2)
                    self.env[tok] = v
                    i = j
                    continue
                except _Fail:
                    if tok.lower().endswith(("tps", "fps", "positives")) or tok in ("tps", "fps"):
                        skipped += 1
            if kind == "id" and tok in ("utils.Validate", "utils.ValidateWithPaths"):
                try:
                    a, j = self.args(i + 1)
                except _Fail:
                    skipped += 1
                    i += 1
                    continue
                if len(a) >= 3:
                    tps = a[1] if isinstance(a[1], list) else tps
                    fps = a[2] if isinstance(a[2], list) else fps
                i = j
                continue
            i += 1
        return tps, fps, skipped


def go_samples(git_dir: str, ref: str, rule_ids: set[str]) -> tuple[dict, int]:
    """rule id → {"tp": [Sample], "fp": [str]} from the Go rule files; and the count of
    sample expressions the evaluator could not read."""
    rng = random.Random(SEED)
    out: dict[str, dict] = {}
    skipped = 0
    for path in git_ls(git_dir, ref, "cmd/generate/config/rules"):
        src = git_show(git_dir, ref, path)
        for body in re.split(r"\n(?=func )", src):
            ids = re.findall(r'RuleID:\s*"([^"]+)"', body)
            if len(ids) != 1 or ids[0] not in rule_ids:
                continue
            ev = _Eval(tokens(body), rng)
            tps, fps, sk = ev.run()
            skipped += sk
            out[ids[0]] = {
                "tp": [x for x in tps if isinstance(x, str)],
                "fp": [x for x in fps if isinstance(x, str)],
            }
    return out, skipped


# ---------------------------------------------------------------- the table


def compile_engine(regex: str) -> str:
    """ "re2" when google-re2 compiles ``regex`` as it is, else "re" when Python's
    ``re`` takes its translation; raises ValueError when neither does."""
    import re2

    opts = re2.Options()
    opts.max_mem = 64 << 20
    try:
        re2.compile(regex, opts)
        return "re2"
    except re2.error:
        pass
    try:
        re.compile(py_regex(regex))
        return "re"
    except re.error as e:
        raise ValueError(f"neither RE2 nor re compiles {regex!r}: {e}") from e


#: gitleaks' end-of-token guard (``utils.GenerateUniqueTokenRegex`` and the semi-generic
#: rules): a quote, space, ``;``, an escaped ``\n``/``\r`` or the end. In a session
#: text the token often sits in JSON escaped twice (a tool input holding JSON), where
#: ``\\\"`` ends it; widened to any number of backslashes before n, r or a quote.
_TERMINATOR = r"""(?:[\x60'"\s;]|\\[nr]|$)"""
_TERMINATOR_ESCAPED = r"""(?:[\x60'"\s;]|\\+[nr\x60'"]|$)"""
#: the semi-generic rules' quotes around the operator (``GenerateSemiGenericRegex``):
#: ``[\s'"]{0,3}`` before it and ``[\x60'"\s=]{0,5}`` after it, widened the same way
#: (``discordKey = \"…\"`` inside a JSON string)
_WIDEN = (
    (_TERMINATOR, _TERMINATOR_ESCAPED),
    (r"""[\s'"]{0,3}""", r"""(?:[\s'"]|\\+['"]){0,3}"""),
    (r"""[\x60'"\s=]{0,5}""", r"""(?:[\x60'"\s=]|\\+[\x60'"]){0,5}"""),
)


def build_table(toml_text: str, meta: dict) -> dict:
    cfg = tomllib.loads(toml_text)
    rules, excluded = [], []
    for r in cfg["rules"]:
        if "regex" not in r:
            excluded.append({"id": r["id"], "reason": "matches file paths only (no content regex)"})
            continue
        if "path" in r:
            excluded.append(
                {
                    "id": r["id"],
                    "reason": f"gitleaks applies it only to files matching {r['path']!r}; texts have no path",
                }
            )
            continue
        allow = []
        for a in r.get("allowlists", []):
            entry = {
                "condition": a.get("condition", "OR").upper(),
                "target": a.get("regexTarget", "secret"),
                "regexes": a.get("regexes", []),
                "stopwords": [s.lower() for s in a.get("stopwords", [])],
                "paths": bool(a.get("paths")),
            }
            if entry["regexes"] or entry["stopwords"] or entry["paths"]:
                allow.append(entry)
        regex = r["regex"]
        for a, b in _WIDEN:
            regex = regex.replace(a, b)
        rules.append(
            {
                "id": r["id"],
                "regex": regex,
                "terminator_widened": regex != r["regex"],
                "engine": compile_engine(regex),
                "secret_group": r.get("secretGroup", 0),
                "entropy": r.get("entropy", 0.0),
                "keywords": sorted({k.lower() for k in r.get("keywords", [])}),
                "allowlists": allow,
            }
        )
        for a in allow:
            for rx in a["regexes"]:
                compile_engine(rx)
    g = cfg.get("allowlist", {})
    return {
        **meta,
        "min_version": cfg.get("minVersion"),
        "rule_count": len(rules),
        "global_allowlist": {
            "regexes": g.get("regexes", []),
            "stopwords": [s.lower() for s in g.get("stopwords", [])],
        },
        "excluded": excluded,
        "rules": rules,
    }


def build_samples(table: dict, go: dict, skipped: int) -> dict:
    import re2

    rng = random.Random(SEED + 1)
    out = {}
    from_regex = []
    for r in table["rules"]:
        s = go.get(r["id"], {"tp": [], "fp": []})
        tps = [{"text": t, "secret": getattr(t, "secret", None)} for t in s["tp"]]
        source = "upstream"
        if not tps:
            source = "regex"
            from_regex.append(r["id"])
            rx = re2.compile(r["regex"]) if r["engine"] == "re2" else re.compile(py_regex(r["regex"]))
            pyrx = py_regex(r["regex"])
            for _ in range(200):
                try:
                    t = sample(pyrx, rng)
                except (ValueError, re.error):
                    break
                if rx.search(t):
                    tps.append({"text": t, "secret": None})
                    if len(tps) == 3:
                        break
        out[r["id"]] = {
            "tp_source": source,
            "tp": [
                {"b64": base64.b64encode(t["text"].encode()).decode(), "secret_b64": _b64(t["secret"])}
                for t in tps
            ],
            "fp_b64": [base64.b64encode(f.encode()).decode() for f in s["fp"]],
        }
    return {
        "source": table["source"],
        "version": table["version"],
        "commit": table["commit"],
        "seed": SEED,
        "note": "samples base64-encoded; tp_source 'upstream': from the rule's Go file (tps), "
        "'regex': drawn from the rule's regex because no upstream sample could be read",
        "unreadable_sample_expressions": skipped,
        "rules_with_regex_samples": from_regex,
        "rules": out,
    }


def _b64(s: str | None) -> str | None:
    return None if s is None else base64.b64encode(s.encode()).decode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--git-dir", required=True, help="a gitleaks clone's git directory")
    ap.add_argument("--ref", required=True, help="tag or commit to read, e.g. v8.30.1")
    ap.add_argument("--table", type=Path, default=TABLE)
    ap.add_argument("--samples", type=Path, default=SAMPLES)
    args = ap.parse_args(argv)
    commit = subprocess.run(
        ["git", "--git-dir", args.git_dir, "rev-parse", f"{args.ref}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    license_head = git_show(args.git_dir, args.ref, "LICENSE").strip().splitlines()
    meta = {
        "schema": 1,
        "source": "https://github.com/gitleaks/gitleaks config/gitleaks.toml",
        "version": args.ref,
        "commit": commit,
        "license": " ".join(x for x in license_head[:3] if x),
        "generated_by": "tools/gen_secret_rules.py --git-dir … --ref " + args.ref,
    }
    table = build_table(git_show(args.git_dir, args.ref, "config/gitleaks.toml"), meta)
    go, skipped = go_samples(args.git_dir, args.ref, {r["id"] for r in table["rules"]})
    samples = build_samples(table, go, skipped)
    args.table.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    args.samples.write_text(json.dumps(samples, indent=1) + "\n")
    n_up = sum(1 for v in samples["rules"].values() if v["tp_source"] == "upstream")
    print(
        f"{table['rule_count']} rules from gitleaks {args.ref} ({commit[:12]}); "
        f"{len(table['excluded'])} excluded; RE2 takes {sum(r['engine'] == 're2' for r in table['rules'])}; "
        f"samples: {n_up} rules from upstream, {len(samples['rules_with_regex_samples'])} drawn from their regex, "
        f"{skipped} unreadable expressions",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
