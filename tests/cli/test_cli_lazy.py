"""The command modules load lazily (issue 14, target 2): ``ctxkeep ingest`` imports
the module of ``ingest`` only, while help, ``ctxkeep help`` and completion list every
command as an eager build of the same registrations would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

#: a fresh interpreter: import every module of ctxkeep/cli, then print what each
#: registered on ``app`` (top-level command name → the module defining it)
_REGISTERED = """
import importlib, json, pkgutil, sys
import ctxkeep.cli as cli
from typer.main import get_command_name
for m in pkgutil.iter_modules(cli.__path__):
    importlib.import_module(f"ctxkeep.cli.{m.name}")
got = {}
for c in cli.app.registered_commands:
    got[c.name or get_command_name(c.callback.__name__)] = c.callback.__module__
for g in cli.app.registered_groups:
    owner = [n for n, mod in sys.modules.items() if n.startswith("ctxkeep.cli.")
             and any(v is g.typer_instance for v in vars(mod).values())]
    got[g.name] = sorted(owner)[0]
print(json.dumps(got))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_the_command_table_is_what_the_modules_register():
    from ctxkeep.cli import COMMANDS

    r = _python(_REGISTERED)
    assert r.returncode == 0, r.stderr
    registered = json.loads(r.stdout)
    assert set(registered) == set(COMMANDS)
    for name, module in registered.items():
        assert f"ctxkeep.cli.{COMMANDS[name][0][0]}" == module, name


def test_report_html_is_loaded_with_report():
    """``report html`` is registered by report_html.py on report.py's group."""
    from typer.testing import CliRunner

    from ctxkeep.cli import app

    r = CliRunner().invoke(app, ["report", "--help"])
    assert r.exit_code == 0 and "html" in r.stdout


def test_running_a_command_imports_its_modules_only(tmp_path):
    """``ctxkeep ingest`` (nothing to do) imports ctxkeep.cli.core and what it imports
    (sources, for ``fail_config``), and cli.upgrade (every command), none of the other
    command modules."""
    (tmp_path / "user").mkdir()
    # printed by an atexit handler: a run with nothing new ends without the interpreter's
    # teardown (prestart.exit_now), after the atexit handlers
    code = (
        "import atexit, sys, runpy; sys.argv = ['ctxkeep', 'ingest', '--home', sys.argv[1], '--json']\n"
        "atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith('ctxkeep.cli.'))))\n"
        "runpy.run_module('ctxkeep', run_name='__main__')\n"
    )
    env_home = {"HOME": str(tmp_path / "user")}
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "store")],
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}, **env_home},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1].replace("'", '"'))
    # (upgrade: the store upgrade's progress handler, installed for every command)
    assert loaded == ["ctxkeep.cli.core", "ctxkeep.cli.options", "ctxkeep.cli.sources", "ctxkeep.cli.upgrade"]


#: the top-level help's commands as an eager build lists them: every module imported
#: (in the order of the package's files), Typer's own ``TyperGroup`` over the same
#: registrations, each command in the panel ``COMMANDS`` gives it, the registrations
#: sorted by panel (Typer lists panels in the order of their first command)
_EAGER = """
import importlib, json, pkgutil
import ctxkeep.cli as cli
from typer.core import TyperGroup
from typer.main import get_command, get_command_name
for m in pkgutil.iter_modules(cli.__path__):
    importlib.import_module(f"ctxkeep.cli.{m.name}")
panels = list(dict.fromkeys(p for _, p in cli.COMMANDS.values()))
for c in cli.app.registered_commands:
    c.rich_help_panel = cli.COMMANDS[c.name or get_command_name(c.callback.__name__)][1]
for g in cli.app.registered_groups:
    g.rich_help_panel = cli.COMMANDS[g.name][1]
cli.app.registered_commands.sort(key=lambda c: panels.index(c.rich_help_panel))
cli.app.registered_groups.sort(key=lambda g: panels.index(g.rich_help_panel))
lazy = get_command(cli.app)
cli.app.info.cls = TyperGroup
eager = get_command(cli.app)
print(json.dumps([[(n, c.rich_help_panel) for n, c in g.commands.items()] for g in (eager, lazy)]))
"""


def test_help_lists_the_commands_of_an_eager_build():
    r = _python(_EAGER)
    assert r.returncode == 0, r.stderr
    eager, lazy = json.loads(r.stdout)
    assert len(eager) == 29  # reparse, vault (issue 27); ui (issue 23); secrets (issue 24)

    # the panels come in the order of their first command, each panel's commands in order
    def panels(rows):
        out: dict[str, list[str]] = {}
        for n, p in rows:
            out.setdefault(p, []).append(n)
        return list(out.items())

    assert panels(lazy) == panels(eager)


def test_help_and_usage_errors_as_whole_processes(tmp_path):
    """The top-level help lists every command by panel; a mistyped command gets Typer's
    suggestion (from the names, without loading every module)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["COLUMNS"] = "100"
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "--help"], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 0
    for panel in ("Main job", "Search and read", "Usage and cost", "Maintenance", "Store health", "Agents"):
        assert f"─ {panel} ─" in r.stdout
    for cmd in ("ingest", "search", "compress", "report", "mcp", "hooks"):
        assert f"│ {cmd} " in r.stdout
    assert "│ hook " not in r.stdout  # hidden
    r = subprocess.run(
        [sys.executable, "-m", "ctxkeep", "serach", "x"], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "error: no such command 'serach' - did you mean 'search'?"


#: ``ctxkeep compress --check [--json]`` in a fresh interpreter, then what it imported,
#: whether the BPE rank dict was loaded and which of pydantic and the store lock
#: (``filelock``, with ``sinks.analytics_current``) were imported
_CHECK = """
import json, sys
sys.argv = ["ctxkeep", "compress", "--check", *sys.argv[1:]]
from ctxkeep.cli import main
try:
    main()
except SystemExit:
    pass
from ctxkeep.transforms import tokens
heavy = ("ctxkeep.sources.", "rich", "ctxkeep.pipeline", "tiktoken")
mods = sorted(m for m in sys.modules if m.startswith(heavy))
print(json.dumps([[m for m in mods if m.split(".")[0] != "rich"], "rich" in sys.modules,
                  tokens.bpe_count.cache_info().currsize,
                  [m for m in ("pydantic.main", "filelock", "polars") if m in sys.modules]]))
"""


def test_compress_check_imports_only_what_it_reads(tmp_path):
    """``compress --check`` imports the Claude Code and Codex sources alone (the
    registry imports a source on first use), no pipeline module, no token counter, no tiktoken (the store's
    write side is imported at module top since the latency budget: compress is not an
    interactive path);
    ``--json`` no Rich; no pydantic (its request and report are dataclasses: the
    interactive path's budget, issue 26), no store lock (it only reads), no Polars (the
    corpus rollout's line that held a secret is redacted by the exact rules alone,
    ``vault.redact_raw_exact``: Polars' import and gates were ~0.15-0.2 s of its CPU)."""
    from conftest import CORPUS_HOME, child_env

    if not CORPUS_HOME.is_dir():
        import pytest

        pytest.skip("shared/corpus not present")
    env = child_env(
        HOME=str(CORPUS_HOME), CTXKEEP_HOME=str(tmp_path / "store"), CTXKEEP_CACHE_DIR=str(tmp_path)
    )

    def run(*args: str) -> str:
        r = subprocess.run(
            [sys.executable, *args], env=env, capture_output=True, text=True, cwd=ROOT, timeout=300
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    def check(*args: str) -> list:
        return json.loads(run("-c", _CHECK, *args).strip().splitlines()[-1])

    # the store holds the files' texts (their counts): the check counts only what its
    # plans rewrite (without a store it counts every text, with tiktoken's encoder)
    run("-m", "ctxkeep", "ingest", "--no-progress", "--json")
    sources = [
        # no pipeline module: the check plans no compress since newuser16 F7 (sizes and
        # counted lines only; ``--dry-run`` plans, verifying the store's lines)
        "ctxkeep.sources._util",
        "ctxkeep.sources.claude_code",
        "ctxkeep.sources.codex",
        "ctxkeep.sources.confine",
        "ctxkeep.sources.contract",
        "ctxkeep.sources.coverage",  # the readers' ledger tally (redaction imported only for a sample)
        "ctxkeep.sources.readers",
        "ctxkeep.sources.readers.jsonl",
        # the rows document's format constants (orjson and base64 only, ~0.1 ms): the
        # vault's capture imports its rows path (``sinks.vault.rows_capture``) at top
        "ctxkeep.sources.readers.rows",
        # what a sidecar is (the discovery meta's keys: Claude Code finds its sidecars;
        # its reader, ``readers.document``, is imported on a read only)
        "ctxkeep.sources.readers.sidecar",
        "ctxkeep.sources.readers.sqlite",
    ]
    # no token counted: no BPE encoder built (the plans counted their texts' tokens)
    assert check("--json") == [sources, False, 0, []]
    assert check("--json") == [sources, False, 0, []]
    assert check() == [sources, True, 0, []]


def _plugin_home(tmp_path):
    """A folder with an installed-looking distribution whose ``pydantic`` entry point
    writes ``loaded`` into ``tmp_path`` when pydantic loads it."""
    site = tmp_path / "site"
    dist = site / "spyplugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spyplugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[pydantic]\nspy = spyplugin:plugin\n")
    (site / "spyplugin.py").write_text(
        "import pathlib, sys\n"
        f"pathlib.Path({str(tmp_path / 'loaded')!r}).write_text('yes')\n"
        "class _P:\n    def new_schema_validator(self, *a, **k):\n        return None, None, None\n"
        "plugin = _P()\n"
    )
    return site


def test_pydantic_plugins_are_not_looked_up(tmp_path):
    """A command that validates a pydantic request (``resume``; ``search``, ``sessions``
    and ``report`` read their typed options without pydantic:
    tests/service/test_plain_read_path.py) does not load the
    installed pydantic plugins (nor read every package's entry points to find them);
    an explicit ``PYDANTIC_DISABLE_PLUGINS=`` (empty) turns them back on."""
    site = _plugin_home(tmp_path)
    (tmp_path / "user").mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PYDANTIC_"))}
    env = {
        **base,
        "PYTHONPATH": str(site),
        "HOME": str(tmp_path / "user"),
        "CTXKEEP_HOME": str(tmp_path / "s"),
    }
    code = "import sys; sys.argv = ['ctxkeep', *sys.argv[1:]]; from ctxkeep.cli import main; main()"
    args = [sys.executable, "-c", code, "resume"]
    r = subprocess.run(args, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 1 and "store" in r.stderr  # validated the request, then no store
    assert not (tmp_path / "loaded").exists()
    subprocess.run(
        args,
        env={**env, "PYDANTIC_DISABLE_PLUGINS": ""},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert (tmp_path / "loaded").read_text() == "yes"


def test_the_export_sources_load_ijson_only_to_read():
    """Every ingest's discovery imports the ChatGPT and Claude.ai sources (import-only:
    they find nothing); ijson loads when an export is read, not with them."""
    r = _python(
        "import sys\nfrom ctxkeep.sources import SOURCES\n"
        "SOURCES['chatgpt'], SOURCES['claude-ai']\n"
        "print('ijson' in sys.modules)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
