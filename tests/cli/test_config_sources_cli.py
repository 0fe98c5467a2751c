"""config.toml (agents, the seed's tools form, env overrides, ~ expansion, missing dirs)
and the ``ctxkeep sources`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep import config as cfgmod
from ctxkeep.cli import app
from ctxkeep.errors import ConfigError
from ctxkeep.pipeline.engine import run_ingest
from ctxkeep.sources.contract import DiscoveryContext
from dbhelpers import corpus_part, fixture_home


def write_cfg(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_agents_section_tilde_and_relative_dirs(tmp_path):
    h = tmp_path / "ck"
    write_cfg(
        h, '[agents.crush]\nsession_dirs = ["~/work", "rel/projects"]\n[agents.codex]\nenabled = false\n'
    )
    cfg = cfgmod.load_config(h, env={"HOME": str(tmp_path)})
    assert cfg.agent("codex").enabled is False
    assert cfg.agent("crush").session_dirs == [Path("~/work").expanduser(), h / "rel/projects"]
    assert cfg.agent("goose").enabled is True  # not configured: defaults


def test_seed_tools_form_and_aliases(tmp_path):
    h = tmp_path / "ck"
    write_cfg(
        h,
        '[tools.claude]\nsessionDir = "/data/claude"\nenabled = "false"\n'
        '[tools.goose]\nsessionDir = "/data/goose"\n',
    )
    cfg = cfgmod.load_config(h, env={})
    assert cfg.agent("claude-code").enabled is False
    assert cfg.agent("claude-code").session_dirs == [Path("/data/claude")]
    assert cfg.agent("goose").session_dirs == [Path("/data/goose")]


def test_env_overrides(tmp_path):
    h = tmp_path / "ck"
    write_cfg(h, "[agents.cursor]\nenabled = false\n")
    env = {
        "CTXKEEP_DISABLE": "goose, crush",
        "CTXKEEP_ENABLE": "cursor",
        "CTXKEEP_OPENCODE_GO_DIRS": f"/a{__import__('os').pathsep}~/b",
    }
    cfg = cfgmod.load_config(h, env=env)
    assert (cfg.agent("goose").enabled, cfg.agent("crush").enabled, cfg.agent("cursor").enabled) == (
        False,
        False,
        True,
    )
    assert cfg.agent("opencode-go").session_dirs == [Path("/a"), Path("~/b").expanduser()]


@pytest.mark.parametrize(
    "text, msg",
    [
        ("[agents.crush]\nenabled = 3\n", "agents.crush.enabled = 3: must be true or false"),
        (
            "[agents.crush]\nsession_dirs = 5\n",
            "agents.crush.session_dirs = 5: must be a path or a list of paths",
        ),
        ("agents = 1\n", "agents = 1: must be a table ([agents])"),
        ("[agents\n", "config.toml does not parse"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, text, msg):
    h = tmp_path / "ck"
    write_cfg(h, text)
    with pytest.raises(ConfigError) as ei:
        cfgmod.load_config(h, env={})
    assert msg in str(ei.value) and str(h / "config.toml") in str(ei.value)


def test_missing_and_unknown_are_reported_not_errors(tmp_path):
    h = tmp_path / "ck"
    write_cfg(h, f'[agents.crush]\nsession_dirs = ["{tmp_path}/nope"]\n[agents.windsurf]\nenabled = true\n')
    cfg = cfgmod.load_config(h, env={})
    assert cfgmod.missing_dirs(cfg) == {"crush": [tmp_path / "nope"]}
    assert cfgmod.unknown_agents(cfg, ["crush", "goose"]) == ["windsurf"]


# ------------------------------------------------------------------ ctxkeep sources


@pytest.fixture
def mixed_home(tmp_path):
    """A home with the corpus databases and sst tree, and the goose/cursor fixtures."""
    home = tmp_path / "home"
    corpus_part("code/noora/.opencode/opencode.db", home)
    corpus_part("code/dbos-transact-golang/.crush/crush.db", home)
    corpus_part(".local/share/opencode/storage", home)
    fixture_home("goose", home)
    fixture_home("cursor", home)
    return home


def run_cli(args, home: Path, store: Path):
    env = {"HOME": str(home), "CTXKEEP_HOME": str(store), "COLUMNS": "200"}
    return CliRunner().invoke(app, args, env=env)


def test_sources_before_and_after_ingest(mixed_home, tmp_path):
    store = tmp_path / "store"
    write_cfg(store, f'[agents.crush]\nsession_dirs = ["{tmp_path}/gone"]\n[agents.codex]\nenabled = false\n')
    r = run_cli(["sources", "--json"], mixed_home, store)
    assert r.exit_code == 0, r.output
    rows = {x["agent"]: x for x in json.loads(r.output)["rows"]}
    assert rows["crush"]["files"] == 1 and rows["crush"]["entries"] == 0
    assert "found but not ingested yet" in rows["crush"]["reason"]
    assert f"configured dir missing: {tmp_path}/gone" in rows["crush"]["reason"]
    assert rows["codex"]["enabled"] is False and rows["codex"]["reason"] == "disabled in config"
    run_ingest(store, ctx=DiscoveryContext(home=mixed_home, env={}))
    r = run_cli(["sources", "--json"], mixed_home, store)
    rows = {x["agent"]: x for x in json.loads(r.output)["rows"]}
    got = {
        a: (rows[a]["files"], rows[a]["sessions"], rows[a]["entries"])
        for a in ("opencode", "opencode-go", "crush", "goose", "cursor")
    }
    assert got == {
        "opencode": (1, 1, 3),
        "opencode-go": (1, 1, 146),
        "crush": (1, 2, 136),
        "goose": (2, 3, 18),
        "cursor": (2, 3, 14),
    }
    assert rows["crush"]["bytes"] >= 1581056 and rows["crush"]["last_ingest"].endswith("Z")
    assert rows["crush"]["where"] == str(mixed_home / "code/dbos-transact-golang/.crush")
    assert rows["claude-code"]["files"] == 0 and rows["claude-code"]["reason"]
    # the table form names each agent and the reason for an empty one
    t = run_cli(["sources"], mixed_home, store)
    assert t.exit_code == 0
    assert "opencode-go" in t.output and "146" in t.output and "disabled in config" in t.output


def test_sources_with_a_broken_config_is_one_line(tmp_path):
    store = tmp_path / "store"
    write_cfg(store, "[agents\n")
    r = run_cli(["sources"], tmp_path, store)
    assert r.exit_code == 1
    assert "config.toml does not parse" in r.output and "Traceback" not in r.output


def test_sources_never_imports_prefect(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from typer.testing import CliRunner; from ctxkeep.cli import app; "
        "r = CliRunner().invoke(app, ['sources', '--json']); "
        "assert r.exit_code == 0, r.output; print('prefect' in sys.modules)"
    )
    env = {"HOME": str(tmp_path), "CTXKEEP_HOME": str(tmp_path / "store"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


# ------------------------------------------------------------------ validation (issue 15)


def test_ranges_and_types_one_line_per_problem_naming_file_and_key(tmp_path):
    h = tmp_path / "ck"
    write_cfg(
        h,
        '[compress]\nmax_size_kb = -5\nkeep_messages = "ten"\n'
        "[retention]\narchive_after_days = -1\n[purge]\nolder_than_days = 0\nevery_hours = 1.5\n",
    )
    with pytest.raises(ConfigError) as ei:
        cfgmod.load_config(h, env={})
    path = h / "config.toml"
    assert ei.value.problems == [
        f"{path}: compress.max_size_kb = -5: Input should be greater than or equal to 1",
        f'{path}: compress.keep_messages = "ten": Input should be a valid integer',
        f"{path}: retention.archive_after_days = -1: Input should be greater than or equal to 0",
        f"{path}: purge.older_than_days = 0: Input should be greater than or equal to 1",
        f"{path}: purge.every_hours = 1.5: Input should be a valid integer",
    ]
    # the CLI says each problem on a line of its own (ingest, sources), exit 1
    r = CliRunner().invoke(app, ["sources", "--home", str(h)], env={"HOME": str(tmp_path)})
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [f"error: {p} - fix config.toml" for p in ei.value.problems]


def test_unknown_keys_are_reported_with_the_closest_valid_one(tmp_path):
    h = tmp_path / "ck"
    write_cfg(
        h,
        "[compress]\nmax_sizekb = 800\n[agents.codx]\nenabled = false\n"
        '[agents.codex]\nsesion_dirs = ["x"]\n[retension]\narchive_after_days = 3\n',
    )
    cfg = cfgmod.load_config(h, env={})
    assert cfg.compress.max_size_kb == 500  # the typo is not applied …
    assert cfg.warnings == [  # … but named, with what was meant
        "unknown key compress.max_sizekb - did you mean max_size_kb?",
        "unknown key agents.codex.sesion_dirs - did you mean session_dirs?",
        "unknown table [retension] - did you mean retention?",
    ]
    assert cfgmod.unknown_agent_lines(cfg, ["codex", "crush", "goose"]) == [
        "config.toml names agent 'codx', which ctxkeep has no source for - did you mean codex?"
    ]
    r = CliRunner().invoke(app, ["sources", "--home", str(h), "--json"], env={"HOME": str(tmp_path)})
    assert r.exit_code == 0 and "did you mean max_size_kb?" in r.stderr
    assert next(x for x in json.loads(r.stdout)["rows"] if x["agent"] == "codx")["reason"].endswith(
        "did you mean codex?"
    )


def test_purge_section_and_its_absence(tmp_path):
    h = tmp_path / "ck"
    h.mkdir()
    assert cfgmod.load_config(h, env={}).purge is None
    write_cfg(h, '[purge]\nprojects = ["~/clients/acme"]\nagents = ["cursor"]\nolder_than_days = 365\n')
    p = cfgmod.load_config(h, env={}).purge
    assert (p.projects, p.agents, p.older_than_days, p.every_hours) == (
        ["~/clients/acme"],
        ["cursor"],
        365,
        24,
    )


def test_validation_runs_only_when_the_file_changed(tmp_path):
    import subprocess
    import sys

    h = tmp_path / "ck"
    write_cfg(h, "[compress]\nmax_size_kb = 800\n")
    code = (
        "import sys; from pathlib import Path; from ctxkeep import config as c; "
        f"cfg = c.load_config(Path({str(h)!r}), env={{}}); "
        "print(cfg.compress.max_size_kb, 'pydantic' in sys.modules)"
    )

    def run():
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()

    assert run() == ["800", "True"]  # first sight: validated
    assert run() == ["800", "False"]  # unchanged: the stamp says it passed, no pydantic
    write_cfg(h, "[compress]\nmax_size_kb = -5\n")  # changed: validated again, and refused
    with pytest.raises(ConfigError, match="compress.max_size_kb = -5"):
        cfgmod.load_config(h, env={})


def test_unknown_key_warnings_come_before_an_invalid_value_error(tmp_path):
    """An unknown key next to a wrong value: the warning is said (once, before the
    error line), not lost behind the error."""
    h = tmp_path / "ck"
    write_cfg(h, "[compress]\nmax_sizekb = 3\nmax_size_kb = -5\n")
    path = h / "config.toml"
    r = CliRunner().invoke(app, ["ingest", "--home", str(h)], env={"HOME": str(tmp_path)})
    assert r.exit_code == 1
    assert r.stderr.splitlines() == [
        f"warning: {path}: unknown key compress.max_sizekb - did you mean max_size_kb?",
        f"error: {path}: compress.max_size_kb = -5: Input should be greater than or equal to 1"
        " - fix config.toml",
    ]


def test_sources_agent_filters_without_coverage(tmp_path):
    """newuser15 F15: ``sources --agent codex`` listed every agent (the option worked
    only with --coverage) and ``--agent nosuch`` exited 0."""
    import json as _json

    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["sources", "--agent", "codex", "--json", "--home", str(tmp_path / "s")])
    assert r.exit_code == 0, r.output
    assert [x["agent"] for x in _json.loads(r.stdout)["rows"]] == ["codex"]
    r = CliRunner().invoke(app, ["sources", "--agent", "codexx", "--home", str(tmp_path / "s")])
    assert r.exit_code == 2 and "unknown agent 'codexx'" in r.stderr
