"""``tools/gen_secret_rules.py`` on handmade inputs (no upstream file needed): the table
keeps a rule's fields, leaves out a path-scoped one with its reason, widens the
end-of-token guard, and the Go sample evaluator reads literals, ``[]string{}``,
``append`` and ``GenerateSampleSecrets(id, "p_" + secrets.NewSecret(utils.Hex("8")))``."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_secret_rules as gen  # noqa: E402

TOML = r"""
title = "t"
[allowlist]
regexes = ['''^x$''']
stopwords = ["EXAMPLE"]

[[rules]]
id = "demo-token"
description = "d"
regex = '''\b(demo_[a-f0-9]{8})(?:[\x60'"\s;]|\\[nr]|$)'''
entropy = 2.5
keywords = ["DEMO_"]
[[rules.allowlists]]
regexTarget = "line"
regexes = ['''test''']

[[rules]]
id = "scoped"
description = "d"
path = '''\.tf$'''
regex = '''secret'''
keywords = ["secret"]
"""

GO = """
func Demo() *config.Rule {
	r := config.Rule{
		RuleID:   "demo-token",
		Regex:    utils.GenerateUniqueTokenRegex(`demo_[a-f0-9]{8}`, false),
		Keywords: []string{"demo_"},
	}
	tps := utils.GenerateSampleSecrets("demo", "demo_"+secrets.NewSecret(utils.Hex("8")))
	tps = append(tps, `token = "demo_0123abcd"`, "a" + "b")
	fps := []string{
		"demo_XXXXXXXX", // placeholder
	}
	return utils.Validate(r, tps, fps)
}
"""


def test_table_keeps_fields_excludes_path_scoped_and_widens_the_guard():
    t = gen.build_table(TOML, {"schema": 1, "source": "s", "version": "v0", "commit": "c" * 40})
    assert t["rule_count"] == 1
    assert t["excluded"] == [
        {
            "id": "scoped",
            "reason": "gitleaks applies it only to files matching '\\\\.tf$'; texts have no path",
        }
    ]
    r = t["rules"][0]
    assert r["keywords"] == ["demo_"] and r["entropy"] == 2.5 and r["engine"] == "re2"
    assert r["terminator_widened"] and r["regex"].endswith(r"""(?:[\x60'"\s;]|\\+[nr\x60'"]|$)""")
    assert r["allowlists"] == [
        {"condition": "OR", "target": "line", "regexes": ["test"], "stopwords": [], "paths": False}
    ]
    assert t["global_allowlist"] == {"regexes": ["^x$"], "stopwords": ["example"]}


def test_go_samples_are_evaluated():
    ev = gen._Eval(gen.tokens(GO), random.Random(1))
    tps, fps, skipped = ev.run()
    assert skipped == 0
    assert len(tps) == len(gen._SAMPLE_TEMPLATES) + 2
    secret = tps[0].secret
    assert re.fullmatch(r"demo_[a-f0-9]{8}", secret)
    assert all(secret in t for t in tps[: len(gen._SAMPLE_TEMPLATES)])
    assert 'var demoToken string = "' + secret + '"' in tps
    assert tps[-2:] == ['token = "demo_0123abcd"', "ab"]
    assert fps == ["demo_XXXXXXXX"]


def test_regex_translation_and_sampling():
    py = gen.py_regex(r"\b(p8e-(?i)[a-z0-9]{4})[[:alnum:]]\z")
    assert re.compile(py)
    rng = random.Random(3)
    for _ in range(20):
        s = gen.sample(py, rng)
        assert re.fullmatch(py, s), (py, s)
