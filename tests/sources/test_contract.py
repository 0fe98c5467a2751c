"""The typed source contract: every registered source satisfies ``contract.Source``
(with a ``MODE`` of ``contract.Mode``), capabilities are protocols, and the shared
discovery and text helpers give exact values."""

from __future__ import annotations

import shutil
import types
from pathlib import Path
from typing import get_args

import pytest

from conftest import FIXTURES
from ctxkeep.schema import AGENTS
from ctxkeep.schema import Watermark as SchemaWatermark
from ctxkeep.sources import SOURCES, file_unchanged, files_for_paths
from ctxkeep.sources._util import block_text, blocks_text
from ctxkeep.sources.contract import (
    ChangeTest,
    ClaimsPaths,
    Discovery,
    DiscoveryContext,
    ImportOnly,
    Mode,
    ModeByPath,
    RecordParser,
    Source,
    SourceFile,
    Watermark,
    check_source,
)
from ctxkeep.sources.readers.jsonl import file_head, record_reader


def test_every_registered_source_satisfies_the_protocol():
    assert list(SOURCES) == list(AGENTS[:-1])  # registry order; "note" is not a source
    modes = {}
    for name, src in SOURCES.items():
        assert isinstance(src, Source), name
        assert check_source(src) is src
        assert name == src.AGENT and src.PARSER_VERSION >= 1
        assert src.MODE in get_args(Mode), name
        assert isinstance(src, ClaimsPaths), name  # every source today claims --path files
        modes[name] = src.MODE
    assert modes == {
        "claude-code": "append",
        "traex": "append",
        "codex": "append",
        "gemini-cli": "rewrite",
        "copilot-cli": "append",
        "qwen-code": "append",
        "continue": "rewrite",
        "cline": "rewrite",
        "roo-code": "rewrite",
        "kilo-code": "rewrite",
        "aider": "rewrite",
        "specstory": "rewrite",
        "opencode": "sqlite",
        "opencode-go": "sqlite",
        "crush": "sqlite",
        "goose": "sqlite",
        "trae": "sqlite",
        "cursor": "sqlite",
        "gptme": "append",
        "mistral-vibe": "append",
        "openclaude": "append",
        "amp": "rewrite",
        "openclaw": "append",
        "pi": "append",
        "kimi": "append",
        "openhands": "rewrite",
        "zed": "sqlite",
        "iflow": "append",
        "deepseek-tui": "rewrite",
        "zencoder": "append",
        "grok": "append",
        "cortex": "rewrite",
        "qoder": "append",
        "kiro": "append",
        "kiro-ide": "rewrite",
        "windsurf": "sqlite",
        "forge": "sqlite",
        "devin": "sqlite",
        "codebuff": "rewrite",
        "hermes": "append",
        "warp": "sqlite",
        "antigravity-cli": "sqlite",
        "antigravity": "sqlite",
        "vscode-copilot": "rewrite",
        "visualstudio-copilot": "append",
        "cowork": "append",
        "chatgpt": "rewrite",
        "claude-ai": "rewrite",
    }


def test_capabilities_are_the_protocols():
    assert sorted(n for n, s in SOURCES.items() if isinstance(s, ModeByPath)) == [
        "claude-code",  # its sidecars (readers.sidecar) are documents beside the transcripts
        "cortex",
        "cursor",
        "devin",
        "gemini-cli",
        "goose",
        "grok",
        "hermes",
        "kiro",
        "mistral-vibe",
        "opencode",
        "qoder",
        "qwen-code",
    ]
    assert sorted(n for n, s in SOURCES.items() if isinstance(s, ChangeTest)) == ["opencode", "openhands"]
    assert sorted(n for n, s in SOURCES.items() if isinstance(s, ImportOnly)) == ["chatgpt", "claude-ai"]
    assert sorted(n for n, s in SOURCES.items() if isinstance(s, RecordParser)) == [
        "claude-code",
        "codex",
        "copilot-cli",
        "cowork",
        "gptme",
        "grok",
        "hermes",
        "iflow",
        "kimi",
        "kiro",
        "mistral-vibe",
        "openclaude",
        "openclaw",
        "pi",
        "qoder",
        "traex",
        "visualstudio-copilot",
        "zencoder",
    ]
    m = SOURCES
    assert [m["goose"].mode_for(Path(p)) for p in ("/s/sessions.db", "/s/20250301.jsonl")] == [
        "sqlite",
        "append",
    ]
    assert [m["cursor"].mode_for(Path(p)) for p in ("/u/state.vscdb", "/a/agent-transcripts/x.jsonl")] == [
        "sqlite",
        "append",
    ]
    assert [m["opencode"].mode_for(Path(p)) for p in ("/d/opencode.db", "/d/storage/session/p/s.json")] == [
        "sqlite",
        "tree",
    ]


def test_check_source_names_what_is_wrong():
    bad = types.ModuleType("ctxkeep.sources.nomode")
    bad.AGENT, bad.PARSER_VERSION = "x", 1
    bad.discover = bad.read = lambda *a: None
    with pytest.raises(TypeError, match="source ctxkeep.sources.nomode lacks MODE"):
        check_source(bad)
    bad.MODE = "tree"  # a file mode, not a source mode
    with pytest.raises(TypeError, match=r"MODE 'tree' is not one of \('append', 'rewrite', 'sqlite'\)"):
        check_source(bad)
    bad.MODE, bad.PARSER_VERSION = "append", 0
    with pytest.raises(TypeError, match="PARSER_VERSION must be an int >= 1"):
        check_source(bad)
    bad.PARSER_VERSION, bad.matches = 1, "not a function"
    with pytest.raises(TypeError, match="matches is not callable"):
        check_source(bad)


def test_watermark_lives_in_schema_and_is_reexported():
    assert Watermark is SchemaWatermark


def test_path_files_of_database_sources_get_mode_sqlite(tmp_path):
    """A database given with --path has mode sqlite (its -wal is part of the change
    test), a legacy JSONL file beside it mode append."""
    src = FIXTURES / "goose" / "home" / ".local" / "share" / "goose" / "sessions"
    dst = tmp_path / "goose" / "sessions"
    shutil.copytree(src, dst)
    files, problems = files_for_paths([dst], agents=["goose"])
    assert problems == []
    assert sorted((f.path.name, f.mode) for f in files) == [
        ("20250301_legacy.jsonl", "append"),
        ("sessions.db", "sqlite"),
    ]
    db = next(f for f in files if f.mode == "sqlite")
    wm = None
    for b in SOURCES["goose"].read(db, None):
        wm = b.watermark or wm
    assert wm is not None and file_unchanged(db, wm)
    Path(str(dst / "sessions.db") + "-wal").write_bytes(b"x")  # the -wal grew: not unchanged
    assert not file_unchanged(db, wm)


def test_discovery_add_dedups_by_resolved_path_and_skips_non_files(tmp_path):
    (tmp_path / "a").mkdir()
    f = tmp_path / "a" / "s.jsonl"
    f.write_text("{}\n")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    d = Discovery("x")
    assert d.add(f, "append", {"k": 1}) is True
    assert d.add(tmp_path / "link" / "s.jsonl", "append") is False
    assert d.add(tmp_path / "a", "append") is False
    assert [(sf.agent, sf.path, sf.mode, sf.meta) for sf in d.files] == [("x", f, "append", {"k": 1})]


def test_discovery_add_glob_and_explain_empty(tmp_path):
    base = tmp_path / "sessions"
    (base / "p").mkdir(parents=True)
    for n in ("b.json", "a.json", "sessions.json", "p/c.json"):
        (base / n).write_text("{}")
    d = Discovery("x")
    d.add_glob(base, ["*.json", "*/*.json"], "rewrite", lambda p: {"n": p.stem}, exclude=["sessions.json"])
    d.add_glob(tmp_path / "missing", ["*.json"], "rewrite")
    assert [(p.path.relative_to(base).as_posix(), p.meta) for p in d.files] == [
        ("a.json", {"n": "a"}),
        ("b.json", {"n": "b"}),
        ("p/c.json", {"n": "c"}),
    ]
    assert d.searched == [base, tmp_path / "missing"]
    d.explain_empty(tmp_path, "never set: files were found")
    assert d.reason is None
    e = Discovery("y")
    e.explain_empty(tmp_path / "nope", "no x under it")
    assert e.reason == f"{tmp_path / 'nope'} does not exist"
    e.explain_empty(tmp_path, "no x under it")
    assert e.reason == "no x under it"


def test_env_dir():
    ctx = DiscoveryContext(home=Path("/h"), env={"A": "~/alt", "B": ""})
    assert ctx.env_dir("A", Path("/d")) == Path("~/alt").expanduser()
    assert ctx.env_dir("B", Path("/d")) == Path("/d")
    assert ctx.env_dir("C", Path("/d")) == Path("/d")


def test_file_head_is_empty_when_not_applicable(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_bytes(b'{"sessionId": 1}\n' * 10)
    assert file_head(p, (".jsonl",), 8) == b'{"sessio'
    assert file_head(p, (".json",)) == b""
    assert file_head(tmp_path / "gone.jsonl", (".jsonl",)) == b""


def test_blocks_text_values():
    img = {"type": "image", "source": {"media_type": "image/png", "data": "A" * 400}}
    doc = {"type": "document", "source": {"media_type": "application/pdf", "data": "B" * 8}}
    content = [{"type": "text", "text": "hi"}, img, doc, 7]
    assert (
        blocks_text(content)
        == "hi\n[image image/png, 300 bytes]\n"
        + '{"type":"document","source":{"media_type":"application/pdf","data":"BBBBBBBB"}}\n7'
    )
    assert (
        blocks_text(content, lambda b: block_text(b, ("image", "document"), scrub=True))
        == "hi\n[image image/png, 300 bytes]\n[document application/pdf, 6 bytes]\n7"
    )
    assert blocks_text(None) == "" and blocks_text({"a": 1}) == '{"a":1}' and blocks_text("s") == "s"
    assert blocks_text({"a": 1}, scalar=str) == "{'a': 1}"
    assert blocks_text([1, {"type": "text", "text": "t"}], skip_non_dict=True) == "t"
    big = {"type": "x", "data": "data:image/png;base64," + "C" * 300}
    assert block_text(big, scrub=True) == '{"type":"x","data":"[media image/png, 241 bytes]"}'


def test_record_reader_passes_the_source_path(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_bytes(b'{"n": 1}\n{"n": 2}\n')
    seen = []

    def parse_record(rec, offset, line_hash, state, src):
        seen.append((rec["n"], offset, src, dict(state)))
        state["count"] = state.get("count", 0) + 1
        return [{"n": rec["n"]}]

    read = record_reader(3, parse_record, lambda f: {"sid": f.path.stem})
    batches = list(read(SourceFile("x", p), None))
    assert [e for b in batches for e in b.entries] == [{"n": 1}, {"n": 2}]
    assert seen == [(1, 0, str(p), {"sid": "s"}), (2, 9, str(p), {"sid": "s", "count": 1})]
    wm = batches[-1].watermark
    # the reader's state, and the hash of the bytes before the offset (session 20's
    # ``_tail``: a rewrite in place is told from an append)
    from ctxkeep.sources.readers.jsonl import tail_hash

    want = {"sid": "s", "count": 2, "_tail": tail_hash(b'{"n": 1}\n{"n": 2}\n')}
    assert (wm.offset, wm.parser_version, wm.state) == (18, 3, want)


def test_sorted_paths_is_pathlibs_order():
    """``sorted_paths`` (one NUL-joined string per path) sorts as ``sorted`` of the
    paths does (pathlib compares the parts): names that are prefixes of others, a
    character below ``/`` (``-``, ``.``, space, tab), upper case, non-ASCII, deeper
    paths; absolute, relative and both mixed."""
    import random

    from ctxkeep.sources.contract import sorted_paths

    names = [
        "a",
        "a-b",
        "a.b",
        "a b",
        "a/b",
        "a/b/c",
        "ab",
        "a!",
        "A",
        "-",
        ".x",
        "a/-",
        "a/ ",
        "é",
        "a\tb",
        "z/a",
    ]
    absolute = [Path("/r") / n for n in names]
    relative = [Path(n) for n in names]
    rnd = random.Random(7)
    for paths in (absolute, relative, absolute + relative + [Path("/")]):
        for _ in range(30):
            rnd.shuffle(paths)
            assert sorted_paths(paths) == sorted(paths)
    assert sorted_paths([]) == []
    assert [str(p) for p in sorted_paths([Path("/r/a-b"), Path("/r/a/b")])] == ["/r/a/b", "/r/a-b"]
