"""Codex 0.146.0 logs ``cache_write_input_tokens`` in its ``token_count`` totals (0 in
the corpus's 0.146.0 rollout); parser version 4 reads it into the cache-write column
(``cache_creation_tokens``) and out of the uncached input (it is part of
``input_tokens``, as the cached read is: ``total_tokens`` = input + output). Before, a
nonzero value was counted as uncached input, never as a cache write. The fixture:
tests/fixtures/codex (handmade, 2,048 then 2,560 cumulative cache-write tokens).

ccusage (apps/codex/src/data-loader.ts) reads only input, cached input, output,
reasoning and total: it keeps a cache write in its input. The corpus logs 0, so the
ccusage parity tests (tests/pipeline/test_usage_parity.py, tests/cli/
test_cli_report_parity.py) are unchanged; on a nonzero value ctxkeep's input is
ccusage's minus the cache write (asserted below) and its cost the same (a model with no
cache-write price bills the write at the input price, ``transforms.cost``)."""

from __future__ import annotations

import json
import shutil

from typer.testing import CliRunner

from conftest import FIXTURES, corpus
from ctxkeep.cli import app
from ctxkeep.sources import codex
from ctxkeep.sources.contract import SourceFile

ROLLOUT = "rollout-2026-08-03T10-48-56-019fc8be-3658-7ca3-9e29-00000000c0de.jsonl"
SYNTHETIC = ".codex/sessions/2026/07/01/rollout-2026-07-01T00-00-00-fixture-small.jsonl"


def _usage(path) -> list[dict]:
    return [e for b in codex.read(SourceFile("codex", path), None) for e in b.entries if e.get("usage_key")]


def test_the_cache_write_is_read_into_its_column():
    assert codex.PARSER_VERSION == 4
    rows = _usage(FIXTURES / "codex" / ROLLOUT)
    assert [
        (r["input_tokens"], r["cache_read_tokens"], r["cache_creation_tokens"], r["output_tokens"])
        for r in rows
    ] == [(16341 - 3584 - 2048, 3584, 2048, 81), (16659 - 15416 - 512, 15416, 512, 119)]
    # ccusage's input for the two (input - cached): ours plus the cache write
    assert sum(r["input_tokens"] + r["cache_creation_tokens"] for r in rows) == (16341 - 3584) + (
        16659 - 15416
    )
    # the usage key stays the five counters it was (no stored key changes on re-read)
    assert rows[0]["usage_key"].endswith(":16341:3584:81:63:16422")


def test_a_zero_cache_write_changes_nothing():
    rows = _usage(corpus(SYNTHETIC))
    assert rows and all(r["cache_creation_tokens"] == 0 for r in rows)
    assert all(len(r["usage_key"].split(":")) == 7 for r in rows)  # codex:<origin>:5 counters


def test_report_blocks_shows_the_cache_write(tmp_path):
    home = tmp_path / "home"
    day = home / ".codex" / "sessions" / "2026" / "08" / "03"
    day.mkdir(parents=True)
    shutil.copy(FIXTURES / "codex" / ROLLOUT, day / ROLLOUT)
    store = str(tmp_path / "store")
    env = {"HOME": str(home), "COLUMNS": "200"}
    r = CliRunner().invoke(app, ["ingest", "--home", store], env=env)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["report", "blocks", "--home", store, "--json"], env=env)
    assert r.exit_code == 0, r.output
    (block,) = [b for b in json.loads(r.stdout)["rows"] if not b["is_gap"]]
    assert (block["cache_creation_tokens"], block["cache_read_tokens"], block["input_tokens"]) == (
        2560,
        19000,
        (16341 - 3584 - 2048) + (16659 - 15416 - 512),
    )
