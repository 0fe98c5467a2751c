"""The CJK run pattern of ``transforms.grams`` is compiled on first use (``cjk_run_re``):
importing the module, the search modules, or parsing an ASCII query compiles nothing;
``has_cjk`` gives the pattern's answer."""

from __future__ import annotations

import re
import subprocess
import sys

from ctxkeep.transforms.grams import CJK_CLASS, cjk_run_re, grams, has_cjk, query_grams


def test_import_and_ascii_queries_do_not_compile_the_cjk_pattern():
    code = (
        "from ctxkeep.query.search import parse\n"
        "from ctxkeep.transforms import grams\n"
        "parse.grams_match('validateUserInput parseConfig'); parse.words_match('plain words')\n"
        "grams.grams('an ASCII text with camelCase'); grams.query_grams('camelCase')\n"
        "print(grams.cjk_run_re.cache_info().currsize)\n"
        "parse.grams_match('调研 gemini')\n"
        "print(grams.cjk_run_re.cache_info().currsize)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "1"]


def test_has_cjk_is_the_patterns_answer():
    # the class written out independently: kana, CJK ideographs (ext. A and unified),
    # Hangul syllables, compatibility ideographs
    ref = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
    texts = [
        "调研",
        "gemini 处理",
        "ア",
        "한국어",
        "café",
        "naïve résumé",
        "ｱ",
        "plain ascii",
        "",
        "\u3040",
        "\u303f",
    ]
    for t in texts:
        assert has_cjk(t) == bool(ref.search(t)), t
    assert cjk_run_re().pattern == f"[{CJK_CLASS}]+"


def test_cjk_grams_unchanged():
    # the bigrams of a CJK run plus its last character, then the run boundary
    assert grams("调研报告").split()[:5] == ["调研", "研报", "报告", "告", "|"]
    assert query_grams("调研") == '"调研"'
    assert query_grams("ascii") is None
