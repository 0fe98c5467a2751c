"""The interactive read commands ask their questions without pydantic (issue 22's
latency budget): ``ctxkeep search`` reads its typed options into
``search_core.SearchArgs`` by the rules ``SearchRequest`` applies (``service.args``:
one place for the defaults and ranges) and prints what the pydantic result models
print. Held here: the same arguments read the same way or fail with the same line,
the same ``--json`` bytes as the models', and the keys the plain path prints are the
models' (which docs/cli.md documents)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.errors import UsageError
from ctxkeep.service import search_core
from ctxkeep.service.search import QueryHits, SearchFilters, SearchHit, SearchRequest, search

runner = CliRunner()


def test_the_plain_keys_are_the_models():
    assert tuple(f.alias or n for n, f in SearchHit.model_fields.items()) == search_core.HIT_KEYS
    assert ("schema", *search_core.QUERY_KEYS) == tuple(
        f.alias or n for n, f in QueryHits.model_fields.items()
    )
    assert tuple(SearchFilters.model_fields) == search_core.FILTER_KEYS


# typed arguments as the CLI passes them: (limit, budget, raw, filters), some wrong
CASES = [
    (10, None, False, {}),
    (1, 1, True, {"agent": ["codex", "crush"], "kind": ["message"]}),
    (500, 900_000, False, {"project": ".", "session": "c617,abc", "tool": "Bash,shell"}),
    (200, 200_000, False, {"since": "2025-01-01", "until": "2025-02-01", "status": ["active"]}),
    (0, None, False, {}),
    (-3, None, False, {}),
    (10, 0, False, {}),
    (0, 5, False, {"since": "2025-02-02", "until": "2025-02-01"}),
    (10, None, False, {"since": "2025-02-02", "until": "2025-02-01"}),
    (10, None, False, {"since": "yesterday-ish"}),
    (10, None, False, {"role": ["Assistant"], "tool": "Read"}),
    (10, None, False, {"session": "a\x00b"}),
]


def _plain(queries, limit, budget, raw, filters):
    try:
        a = search_core.SearchArgs.parse(queries, limit=limit, budget=budget, raw=raw, filters=filters)
    except UsageError as e:
        return str(e)
    return list(a.queries), a.limit, a.budget, a.raw, a.filters, list(a.notes)


def _model(queries, limit, budget, raw, filters):
    try:
        r = SearchRequest.parse(queries=queries, limit=limit, budget=budget, raw=raw, filters=filters)
    except UsageError as e:
        return str(e)
    f = {k: getattr(r.filters, k) for k in search_core.FILTER_KEYS}
    return list(r.queries), r.limit, r.budget, r.raw, f, list(r.notes)


@pytest.mark.parametrize("limit,budget,raw,filters", CASES)
@pytest.mark.parametrize("queries", [["python: command not found"], ["  "], ["a", " ", "b c"], ["x\x00"]])
def test_arguments_read_as_the_request_model_reads_them(queries, limit, budget, raw, filters):
    assert _plain(queries, limit, budget, raw, filters) == _model(queries, limit, budget, raw, filters)


def test_a_clamped_limit_says_so_and_a_wrong_one_is_usage():
    a = search_core.SearchArgs.parse(["x"], limit=500, budget=300_000)
    assert (a.limit, a.budget, a.notes) == (
        200,
        200_000,
        ("limit 500 clamped to 200", "budget 300000 clamped to 200000"),
    )
    with pytest.raises(UsageError) as e:
        search_core.SearchArgs.parse(["x"], limit=0)
    assert str(e.value) == "limit 0 is out of range (limit) - use 1 to 200"


QUERIES = [
    ("python: command not found", []),
    ("orchestrator", ["--agent", "codex", "--kind", "tool_result"]),
    ("timeline filtering", ["-n", "300", "--budget", "900"]),
    ("error", ["--tool", "Bash", "-n", "5"]),
    ("pyproject.toml", ["--since", "2020-01-01", "--role", "assistant"]),
    ("no-such-word-zzqx", []),
]


@pytest.mark.parametrize("query,args", QUERIES, ids=[q for q, _ in QUERIES])
def test_search_prints_what_the_models_print(corpus_store, query, args):
    """``search --json`` prints byte for byte what ``QueryHits.as_json`` printed, and
    the text its hits' ``SearchHit.render``; the notes as before."""
    home = corpus_store[0]
    r = runner.invoke(app, ["search", query, "--home", str(home), "--json", *args])
    assert r.exit_code == 0, r.output
    opts = dict(zip(args[::2], args[1::2], strict=True))
    filters = {
        k.lstrip("-"): ([v] if k in ("--agent", "--kind", "--role") else v)
        for k, v in opts.items()
        if k in ("--agent", "--kind", "--tool", "--since", "--role")
    }
    req = SearchRequest.parse(
        queries=[query],
        limit=int(opts.get("-n", 10)),
        budget=int(opts["--budget"]) if "--budget" in opts else None,
        filters=filters,
    )
    res = search(home, req)
    want = res.results[0].as_json()
    assert r.stdout == json.dumps(want, indent=2, ensure_ascii=False) + "\n"
    text = runner.invoke(app, ["search", query, "--home", str(home), *args])
    assert text.exit_code == 0, text.output
    lines = [ln for h in res.results[0].hits for _, ln in h.render()]
    shown = [" ".join(ln.split()) for ln in text.stdout.splitlines() if ln.strip()]
    if lines:  # (Rich prints a tab as spaces)
        assert shown == [" ".join(ln.split()) for ln in lines]
    else:
        assert shown == ["no matches"]
    for n in res.notes:
        assert n in text.stderr


def _keys(model) -> tuple[str, ...]:
    return tuple(f.alias or n for n, f in model.model_fields.items() if (f.alias or n) != "schema")


def test_stats_and_conversation_keys_are_the_models():
    from ctxkeep.service import conversation_core, stats_core
    from ctxkeep.service.conversation import ConversationResult, Turn
    from ctxkeep.service.stats import AgentStats, Contents, Redactions, StatsResult, UsageTotals

    assert {
        "stats": _keys(StatsResult),
        "agents": _keys(AgentStats),
        "contents": _keys(Contents),
        "usage": _keys(UsageTotals),
        "redactions": _keys(Redactions),
    } == stats_core.KEYS
    assert _keys(ConversationResult) == conversation_core.CONVERSATION_KEYS
    assert _keys(Turn) == conversation_core.TURN_KEYS


def test_stats_prints_what_the_models_print(corpus_store):
    from ctxkeep.service.stats import StatsRequest, stats

    home = corpus_store[0]
    res = stats(home, StatsRequest.parse())
    r = runner.invoke(app, ["stats", "--home", str(home), "--json"])
    assert r.exit_code == 0, r.output
    assert r.stdout == json.dumps(res.as_json(), indent=2, ensure_ascii=False) + "\n"
    text = runner.invoke(app, ["stats", "--home", str(home)]).stdout
    assert res.redactions.line() in text and res.redactions.total > 0  # the corpus holds secrets
    for agent, d in res.agents.items():
        row = next(ln.split() for ln in text.splitlines() if ln.split()[:1] == [agent])
        assert row[1:3] == [f"{d.sessions:,}", f"{d.entries:,}"]
    assert f"usage: {res.usage.responses:,} responses" in text


@pytest.mark.parametrize("session,budget", [("c61729d4", None), ("c61729d4", 300), ("019a802a", 10**9)])
def test_show_session_prints_what_the_models_print(corpus_store, session, budget):
    from ctxkeep.service.conversation import ConversationRequest, conversation

    home = corpus_store[0]
    res = conversation(home, ConversationRequest.parse(session=session, budget=budget))
    args = ["show", "--session", session, "--home", str(home)] + (["--budget", str(budget)] if budget else [])
    r = runner.invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.output
    assert r.stdout == json.dumps(res.as_json(), indent=2, ensure_ascii=False) + "\n"
    assert res.turns
    text = runner.invoke(app, args).stdout
    assert text.splitlines()[0].startswith(f"{res.agent} session {res.session_short_id}")
    assert all(t.entry_id[:12] in text for t in res.turns if t.kind in ("message", "tool_call"))
    bad = runner.invoke(app, ["show", "--session", session, "--home", str(home), "--budget", "0"])
    assert (
        bad.exit_code == 2
        and bad.stderr.strip() == "error: budget 0 is out of range (--budget) - use 1 to 200000"
    )


#: a read command in a fresh interpreter, then whether pydantic was imported
_READ = """
import sys
sys.argv = ["ctxkeep", *sys.argv[1:]]
from ctxkeep.cli import main
try:
    main()
except SystemExit as e:
    assert not e.code, e.code
print("PYDANTIC", "pydantic" in sys.modules)
"""


@pytest.mark.parametrize(
    "args",
    [
        ["search", "python: command not found", "--json"],
        ["search", "orchestrator", "--agent", "codex", "-n", "500"],
        ["show", "--session", "c61729d4"],
        ["show", "--session", "c61729d4", "--json", "--budget", "300"],
        ["stats"],
        ["stats", "--json"],
        ["sessions"],
        ["sessions", "--json", "--limit", "5", "--agent", "codex"],
        ["report", "daily"],
        ["report", "weekly", "--json", "-b"],
    ],
)
def test_read_commands_import_no_pydantic(corpus_store, args):
    """``search``, ``show --session``, ``stats``, ``sessions`` and ``report`` (text and ``--json``) never load
    pydantic (its import and first model builds: ~0.06-0.08 s of CPU of each)."""
    import subprocess
    import sys

    from conftest import ROOT, child_env

    r = subprocess.run(
        [sys.executable, "-c", _READ, *args, "--home", str(corpus_store[0])],
        env=child_env(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "PYDANTIC False"


def test_the_session_list_keys_are_the_models():
    from ctxkeep.service import sessions_core
    from ctxkeep.service.sessions import SessionRow, SessionsResult

    assert ("schema", *sessions_core.RESULT_KEYS) == tuple(
        f.alias or n for n, f in SessionsResult.model_fields.items()
    )
    assert tuple(SessionRow.model_fields) == sessions_core.ROW_KEYS


_SESSION_ARGS = [
    {},
    {"limit": 3},
    {"limit": 4, "offset": 2},
    {"all": True},
    {"agent": ["codex,claude-code"], "limit": 5},
    {"since": "2025-01-01", "until": "2026-12-31"},
    {"project": "/", "limit": 2},
]


@pytest.mark.parametrize("kw", _SESSION_ARGS)
def test_sessions_prints_what_the_models_print(corpus_store, kw):
    """``sessions --json`` (``sessions_core``, no pydantic) is the object the models
    make (``service.sessions``: MCP, the app), row for row and key for key."""
    from ctxkeep.service.sessions import SessionsRequest, sessions
    from ctxkeep.service.sessions_core import SessionsArgs, session_list

    home = corpus_store[0]
    plain = session_list(home, SessionsArgs.parse(**kw)).as_json()
    model = sessions(home, SessionsRequest.parse(**kw)).as_json()
    assert plain["sessions"], kw
    assert json.dumps(plain) == json.dumps(model)


@pytest.mark.parametrize(
    "kw",
    [
        {"limit": 0},
        {"offset": -1},
        {"agent": ["codx"]},
        {"since": "2026-01-02", "until": "2025-01-01"},
        {"since": "not a time"},
        {"project": "a\x00b"},
        {"limit": 0, "agent": ["nosuch"]},
    ],
)
def test_session_arguments_fail_as_the_model_fails(kw):
    from ctxkeep.service.sessions import SessionsRequest
    from ctxkeep.service.sessions_core import SessionsArgs

    with pytest.raises(UsageError) as plain:
        SessionsArgs.parse(**kw)
    with pytest.raises(UsageError) as model:
        SessionsRequest.parse(**kw)
    assert (str(plain.value), plain.value.where) == (str(model.value), model.value.where)


@pytest.mark.parametrize(
    "name", ["daily", "weekly", "monthly", "session", "projects", "models", "blocks", "tools"]
)
def test_reports_print_what_the_models_print(corpus_store, name):
    """``report NAME --json`` (``report_core``, no pydantic) is the object the models
    make (``service.report``: MCP, the app, notebooks), with and without
    ``--breakdown``, a time window, an agent."""
    from ctxkeep.service.report import ReportRequest, report
    from ctxkeep.service.report_core import ReportArgs, report_json

    home = corpus_store[0]
    for kw in (
        {},
        {"breakdown": True},
        {"since": "2025-01-01", "until": "2026-06-30"},
        {"agents": ["codex"]},
    ):
        kw = {"timezone": "UTC", **kw}
        plain = report_json(home, ReportArgs.parse(report=name, **kw))
        model = report(home, ReportRequest.parse(report=name, **kw)).as_json()
        assert json.dumps(plain) == json.dumps(model), (name, kw)
        if len(kw) == 1:  # the whole store: the corpus has usage of every kind
            assert plain["rows"], name


@pytest.mark.parametrize(
    "kw",
    [
        {"report": "daily", "mode": "cheap"},
        {"report": "daily", "by": "machine"},
        {"report": "dayly"},
        {"report": "daily", "project": "a\x00b"},
        {"report": "daily", "by": "host", "lake": "/tmp/x"},
    ],
)
def test_report_arguments_fail_as_the_model_fails(kw):
    from ctxkeep.service.report import ReportRequest
    from ctxkeep.service.report_core import ReportArgs

    with pytest.raises(UsageError) as plain:
        ReportArgs.parse(**kw)
    with pytest.raises(UsageError) as model:
        ReportRequest.parse(**kw)
    assert (str(plain.value), plain.value.where) == (str(model.value), model.value.where)
