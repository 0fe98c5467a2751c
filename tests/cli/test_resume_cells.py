"""``resume``'s snapshot folded by terminal cells, not characters: a CJK character
takes two (F4 fixed search hits only, ``cli.wrap_cells``; LEAD19_note "left")."""

from __future__ import annotations

import re

from rich.cells import cell_len

from ctxkeep.cli.sessions import fold_markdown

ZH = "我们需要把数据库迁移到新的服务器上然后检查每一个表的索引是否完整以及查询的速度有没有变慢"


def _words(text: str) -> str:
    return re.sub(r"\s|>", "", text)


def test_chinese_lines_fit_80_cells_and_lose_nothing():
    md = "\n".join(
        [
            "# 会话 " + ZH,
            "> " + ZH + " " + ZH,
            "- " + ZH + " `uv run ctxkeep ingest` " + ZH,
            "plain " + ZH * 2,
            "```",
            ZH * 2,
            "```",
        ]
    )
    out = fold_markdown(md, 80)
    assert max(cell_len(x) for x in out.split("\n")) <= 80
    assert _words(out) == _words(md)
    assert "`uv run ctxkeep ingest`" in out  # a code span that fits a line kept whole
    quoted = [x for x in out.split("\n") if ZH[:3] in x or x.startswith("> ")]
    assert sum(x.startswith("> ") for x in quoted) >= 2  # a quote's folded lines stay quoted


def test_ascii_folding_is_unchanged():
    md = "> " + "word " * 40 + "\n- item " + "x" * 100
    out = fold_markdown(md, 80)
    assert max(len(x) for x in out.split("\n")) <= 80
    assert out.split("\n")[1].startswith("> ")
