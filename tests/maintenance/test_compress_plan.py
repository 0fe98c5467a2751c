"""The compression plan (maintenance.compress.plan): pure, on the real corpus lines."""

from __future__ import annotations

import json

import pytest

from compress_helpers import (
    claude_messages,
    conversational,
    dangling_parents,
    orphan_codex_outputs,
    orphan_tool_results,
    records,
)
from conftest import CORPUS_HOME, corpus
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.sources.contract import SourceFile
from ctxkeep.transforms.normalize import entries_frame

CLAUDE = (
    sorted(p.relative_to(CORPUS_HOME).as_posix() for p in (CORPUS_HOME / ".claude").rglob("*.jsonl"))
    if CORPUS_HOME.is_dir()
    else []
)
CODEX = (
    sorted(p.relative_to(CORPUS_HOME).as_posix() for p in (CORPUS_HOME / ".codex").rglob("*.jsonl"))
    if CORPUS_HOME.is_dir()
    else []
)
EF958 = ".claude/projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
CODEX_034 = (
    ".codex/sessions/2025/10/31/rollout-2025-10-31T19-02-58-c61729d4-da6d-46a4-9a29-ec2c614e5e23.jsonl"
)
CODEX_040 = (
    ".codex/sessions/2025/09/26/rollout-2025-09-26T17-01-04-019985ca-7ef7-7580-a921-c20ac619f40b.jsonl"
)


def _plan(rel: str, keep: int, system: int = 5):
    data = corpus(rel).read_bytes()
    lines, rest = cp.split_lines(data)
    assert rest == b""
    agent = "claude-code" if rel.startswith(".claude") else "codex"
    return data, lines, cp.plan_compression(agent, lines, keep, system, marker_note="see the store")


@pytest.mark.parametrize("rel", CLAUDE)
@pytest.mark.parametrize("keep", [3, 10])
def test_claude_plan_invariants(rel, keep):
    data, lines, plan = _plan(rel, keep)
    before = records(data)
    after = records(b"".join(x + b"\n" for x in plan.new_lines))  # every line parses
    assert dangling_parents(after) == []
    assert orphan_tool_results(after) == []
    msgs_before, msgs_after = len(claude_messages(before)), len(claude_messages(after))
    assert msgs_after == plan.messages_after
    conv_before, conv_after = len(conversational(before)), len(conversational(after))
    assert (conv_before, conv_after) == (plan.conversation_before, plan.conversation_after)
    assert conv_after >= min(keep, conv_before)  # never fewer conversational messages than asked
    markers = [r for r in after if isinstance(r.get("ctxkeep"), dict)]
    if plan.changes:
        assert len(markers) == 1
        m = markers[0]
        assert m["type"] == "system" and m["subtype"] == "informational"
        assert f"{plan.removed_messages} earlier messages" in m["content"]
        assert "see the store" in m["content"]
        assert m["ctxkeep"]["compressed"]["removed_messages"] == plan.removed_messages
        assert msgs_before - msgs_after == plan.removed_messages > 0
        # the first kept message hangs off the marker (a cut on the main chain; a cut
        # inside a sidechain keeps the sidechain's own parent)
        first = after[after.index(m) + 1]
        main_side = all(r.get("isSidechain") for r in claude_messages(before))
        if bool(lines[plan.cut].rec.get("isSidechain")) == main_side:
            assert first["parentUuid"] == m["uuid"]
        else:
            assert first["parentUuid"] in {r.get("uuid") for r in after}
        # kept lines are byte-identical unless re-linked
        originals = {ln.raw for ln in lines}
        changed = [x for x in plan.new_lines if x not in originals]
        assert len(changed) == 1 + len(plan.relinked)
    else:
        assert markers == [] and plan.new_lines == [ln.raw for ln in lines]


def test_claude_cut_at_turn_keeps_latest_state_records():
    data, lines, plan = _plan(EF958, 4)
    assert plan.cut_kind == "turn"
    cut_rec = lines[plan.cut].rec
    assert cut_rec["type"] == "user" and isinstance(cut_rec["message"]["content"], str)
    after = records(b"".join(x + b"\n" for x in plan.new_lines))
    before = records(data)
    for t in ("permission-mode", "last-prompt", "file-history-snapshot"):
        latest = [r for r in before if r["type"] == t][-1]
        assert latest in after, t
    # the first 5 system/meta lines of the file are kept, in order
    head = [r for r in before if r["type"] not in ("user", "assistant")][:5]

    def no_parent(r):
        return {k: v for k, v in r.items() if k != "parentUuid"}

    assert all(no_parent(r) in [no_parent(a) for a in after] for r in head)
    assert after[0] == before[0]  # permission-mode first, as in the original
    assert plan.messages_before == len(claude_messages(before)) == 107
    assert plan.messages_after == len(claude_messages(after)) < 107
    # 10 conversational messages (by the tests' own rule, compress_helpers.conversational)
    assert len(conversational(before)) == plan.conversation_before == 10
    assert len(conversational(after)) == plan.conversation_after >= 4


def test_sidechain_heavy_file_relinks_to_roots():
    # fe5e1c67: 405 of 438 lines are inline sidechains of parallel Task calls
    data, lines, plan = _plan(".claude/projects/sample-project/fe5e1c67-53e7-4862-81ae-d0e013e3270b.jsonl", 5)
    before = records(data)
    assert plan.changes and plan.removed_messages > 0
    assert plan.conversation_after >= 5 and plan.removed_messages == len(claude_messages(before)) - len(
        claude_messages(records(b"".join(x + b"\n" for x in plan.new_lines)))
    )
    after = records(b"".join(x + b"\n" for x in plan.new_lines))
    assert dangling_parents(after) == [] and orphan_tool_results(after) == []


@pytest.mark.parametrize("rel", CODEX)
@pytest.mark.parametrize("keep", [3, 10])
def test_codex_plan_invariants(rel, keep):
    data, lines, plan = _plan(rel, keep)
    before = records(data)
    after = records(b"".join(x + b"\n" for x in plan.new_lines))
    # the synthetic 0.14x fixture reuses a placeholder call_id; real rollouts have none
    assert set(orphan_codex_outputs(after)) <= set(orphan_codex_outputs(before))
    if "fixture" not in rel:
        assert orphan_codex_outputs(after) == []
    assert [r for r in after if r["type"] == "session_meta"] == [
        r for r in before if r["type"] == "session_meta"
    ]
    tcs = [r for r in before if r["type"] == "turn_context"]
    if tcs:
        assert tcs[-1] in after
    assert not any(isinstance(r.get("ctxkeep"), dict) for r in after)  # no marker in rollouts
    if plan.changes:
        assert plan.messages_after >= keep and plan.removed_messages > 0


def test_codex_cuts_at_user_prompt():
    data, lines, plan = _plan(CODEX_034, 20)
    assert plan.cut_kind == "turn"
    p = lines[plan.cut].rec["payload"]
    assert p["type"] == "message" and p["role"] == "user"
    assert plan.messages_before == 1029 and plan.messages_after == 22
    # the kept context: session_meta and the <environment_context> messages come first
    after = records(b"".join(x + b"\n" for x in plan.new_lines))
    assert after[0]["type"] == "session_meta"


def test_codex_turn_context_in_effect_is_kept():
    data, lines, plan = _plan(CODEX_040, 5)
    before = records(data)
    in_effect = [r for r in before[: plan.cut] if r["type"] == "turn_context"][-1]
    assert in_effect in records(b"".join(x + b"\n" for x in plan.new_lines))


def test_other_formats_are_refused():
    lines, _ = cp.split_lines(b'{"a":1}\n')
    with pytest.raises(cp.Refused, match="only Claude Code and Codex"):
        cp.plan_compression("gemini-cli", lines, 10, 5)


def test_bad_lines_are_kept_where_they_were():
    # a line that does not parse is never cut, even before the cut point: it stays,
    # byte for byte, between the kept lines that surrounded it (newuser15 F2)
    src = corpus(EF958).read_bytes().splitlines(keepends=True)
    torn = b'{"type":"user", broken'
    data = b"".join(src[:50] + [torn + b"\n"] + src[50:])
    lines, _ = cp.split_lines(data)
    bad = [ln.index for ln in lines if ln.rec is None]
    assert bad == [50]
    plan = cp.plan_claude(lines, 5, 5)
    assert plan.cut is not None and plan.cut > 50 and 50 not in plan.removed
    assert plan.kept_bad == [50]
    assert plan.new_lines.count(torn) == 1
    at = plan.new_lines.index(torn)
    # the kept lines before it come from before line 50 of the original, those after it
    # from after (matched in order: the lines a rewrite keeps as they were)
    unchanged = [x for x in plan.new_lines if x != torn]
    i, order = 0, []
    for x in plan.new_lines:
        j = next((k for k in range(i, len(lines)) if lines[k].raw == x), None)
        if j is not None:  # (a marker or a re-linked line is not in the original)
            order.append((lines[j].index, x))
            i = j + 1
    assert [j for j, x in order if x == torn] == [50]
    assert [j for j, _ in order] == sorted(j for j, _ in order) and len(order) > len(unchanged) / 2
    assert all(j < 50 for j, x in order[: [x for _, x in order].index(torn)])
    assert all(json.loads(x) for i, x in enumerate(plan.new_lines) if i != at)


def test_codex_bad_lines_are_kept_where_they_were():
    src = corpus(CODEX_040).read_bytes().splitlines(keepends=True)
    torn, tail = b'{"type":"response_item", broken', b'{"type":"event_msg", cut'
    data = b"".join(src[:3] + [torn + b"\n"] + src[3:] + [tail + b"\n"])
    lines, _ = cp.split_lines(data)
    plan = cp.plan_codex(lines, 5, 5)
    assert plan.cut is not None and plan.cut > 3
    assert plan.kept_bad == [3, len(lines) - 1]
    assert plan.new_lines[-1] == tail and torn in plan.new_lines
    assert not set(plan.kept_bad) & set(plan.removed)


def test_unterminated_last_line_is_returned_apart():
    lines, rest = cp.split_lines(b'{"a":1}\n\n{"b":2}\r\n{"c":')
    assert [ln.rec for ln in lines] == [{"a": 1}, {"b": 2}]
    assert [ln.offset for ln in lines] == [0, 9]
    assert rest == b'{"c":'


@pytest.mark.parametrize("rel", [EF958, CODEX_040])
def test_entry_ids_match_the_ingest(rel):
    path = corpus(rel)
    agent = "claude-code" if rel.startswith(".claude") else "codex"
    f = SourceFile(agent, path)
    lines, _ = cp.split_lines(path.read_bytes())
    per_line = cp.line_entries(f, lines)
    ids = [x for ls in cp.line_entry_ids(agent, per_line) for x in ls]
    frame = entries_frame([e for ls in per_line for e in ls])
    assert set(ids) == set(frame["entry_id"].to_list())
    assert len(set(ids)) == frame.height > 100
