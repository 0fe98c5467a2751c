"""One question, one answer: ``ctxkeep search --json`` and MCP ``ctx_search`` run the
same service (``ctxkeep.service.search``) with the same defaults, so the same query
and limit give the same entry ids in the same order."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.mcp.server import Handlers
from ctxkeep.service.model import DEFAULT_LIMIT
from ctxkeep.service.search import AgentSearchRequest, SearchRequest

runner = CliRunner()

# (query, CLI options, the same as ctx_search arguments); from the corpus: a shell
# error, an env assignment, a phrase of prose, a CJK word, a path, a tool filter
QUERIES = [
    ("python: command not found", [], {}),
    ("QT_QPA_PLATFORM=xcb", [], {}),
    ("Not on a feature branch", [], {}),
    (
        "orchestrator",
        ["--agent", "codex", "--kind", "tool_result"],
        {"agent": "codex", "kind": "tool_result"},
    ),
    ("timeline filtering", ["-n", "25"], {"limit": 25}),
    ("error", ["--tool", "Bash", "-n", "5"], {"limit": 5, "filters": {"tool": "Bash"}}),
    ("pyproject.toml", ["--since", "2020-01-01"], {"filters": {"since": "2020-01-01"}}),
]


def test_one_default_limit():
    assert SearchRequest.parse(queries=["x"]).limit == AgentSearchRequest.parse({"queries": ["x"]}).limit
    assert DEFAULT_LIMIT == 10


@pytest.mark.parametrize("query,cli_args,mcp_args", QUERIES, ids=[q for q, _, _ in QUERIES])
def test_cli_and_mcp_give_the_same_hits(corpus_store, tmp_path, query, cli_args, mcp_args):
    home = corpus_store[0]
    r = runner.invoke(app, ["search", query, "--home", str(home), "--json", *cli_args])
    assert r.exit_code == 0, r.output
    cli_ids = [h["entry_id"] for h in json.loads(r.stdout)["hits"]]
    args = {"queries": [query], **{k: v for k, v in mcp_args.items() if k != "agent" and k != "kind"}}
    if "agent" in mcp_args:  # beside "filters" (read as filters, with a note), as models send them
        args.update(agent=mcp_args["agent"], kind=mcp_args["kind"])
    text, data = Handlers(home, tmp_path).ctx_search(args)
    mcp_ids = [h["entry_id"] for h in data["results"][0]["hits"]]
    assert cli_ids, query  # every query finds something in the corpus
    # the same ranking; MCP's default budget (4,000 tokens of hit JSON, newuser24 F6)
    # may end the list sooner, and its note says so
    assert mcp_ids and mcp_ids == cli_ids[: len(mcp_ids)]
    if len(mcp_ids) < len(cli_ids):
        assert "ctx_search's default budget of 4,000 tokens spent" in data["results"][0]["note"]
    # and the text the model reads shows each hit as the CLI does
    for i in mcp_ids:
        assert f"- {i}  " in text


def test_words_the_shell_split_find_the_exact_sentence_first_everywhere(corpus_store, tmp_path):
    # newuser14 F8: `ctxkeep search "organization must be verified"` reaches the program
    # as words; the Crush error holding the sentence is the first hit in the CLI and MCP
    home = corpus_store[0]
    words = ["organization", "must", "be", "verified"]
    r = runner.invoke(app, ["search", *words, "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    cli = json.loads(r.stdout)["hits"]
    _, data = Handlers(home, tmp_path).ctx_search({"queries": [" ".join(words)]})
    mcp = data["results"][0]["hits"]
    assert cli[0]["agent"] == "crush" and "organization must be verified" in cli[0]["snippet"].lower()
    assert [h["entry_id"] for h in mcp] == [h["entry_id"] for h in cli]
