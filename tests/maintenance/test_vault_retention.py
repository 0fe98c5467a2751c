"""Vault generation retention (issue 27: "retention may prune vault generations by
policy (default: keep)"): ``[vault] keep_generations`` / ``generation_max_age_days``,
``ctxkeep retention`` (``maintenance.retention``, ``sinks.vault.prune``).

After a prune: the kept generations restore byte-identical, ``vault verify --full``
finds nothing, a reparse gives the same store, the packs are smaller by what only the
pruned generations used, and a manifest rebuilt from the packs alone
(``capture.replay``) holds the kept generations with their numbers and never the pruned
ones. A generation whose entries the kept ones do not give (an append file rewritten
with other lines) is held back. SIGKILL trials of the prune (its kill points, and random
times: slow) leave a vault that verifies and still restores the kept generation.

Sessions are the corpus's Gemini CLI document rewritten (versions of its messages) and
handmade Claude Code lines, in tmp."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ctxkeep.cli import app
from ctxkeep.config import load_config
from ctxkeep.errors import ConfigError
from ctxkeep.maintenance.reparse import from_vault, reparse
from ctxkeep.maintenance.retention import run_retention
from ctxkeep.maintenance.vault import vault_restore, vault_verify
from ctxkeep.schema import STORED_COLUMNS
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.vault import manifest, packs, prune
from forkserver import Child, forkserver
from tests import phase_kill
from tests.conftest import CORPUS_HOME, ingest, q
from tests.session_lines import claude_lines

GEMINI_DOC = (
    ".gemini/tmp/3f1c0a6c9e5b4d2f8a7e6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d5e/chats/"
    "session-2025-12-03T08-28-fc2fd534.json"
)
ENTRIES = f"SELECT {', '.join(STORED_COLUMNS)} FROM entries ORDER BY entry_id"
USAGE = "SELECT * FROM usage ORDER BY usage_key"
ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(autouse=True)
def _user_home(tmp_path, monkeypatch):
    """Retention looks for old compress backups in the agents' folders of ``$HOME``:
    an empty one."""
    (tmp_path / "user").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "user"))


def _versions(n: int = 4) -> list[bytes]:
    """``n`` versions of the corpus's Gemini CLI session: its messages cut to a growing
    prefix (each a later rewrite of the one before), the last one whole."""
    src = json.loads((CORPUS_HOME / GEMINI_DOC).read_bytes())
    msgs = src["messages"]
    cuts = [max(1, len(msgs) * (i + 1) // n) for i in range(n)]
    return [json.dumps(dict(src, messages=msgs[:k]), indent=2).encode() for k in cuts]


def _gemini_store(tmp_path: Path, n: int = 4) -> tuple[Path, Path, Path, list[bytes]]:
    """A home whose Gemini CLI session was ingested at each of ``n`` versions (``n``
    vault generations); returns ``(home, store, session file, versions)``."""
    if not (CORPUS_HOME / GEMINI_DOC).is_file():
        pytest.skip("shared/corpus not present")
    home, store = tmp_path / "home", tmp_path / "store"
    doc = home / GEMINI_DOC
    doc.parent.mkdir(parents=True)
    vs = _versions(n)
    t = time.time() - 3600
    for i, v in enumerate(vs):
        doc.write_bytes(v)
        os.utime(doc, (t + 60 * i, t + 60 * i))
        ingest(home, store, "gemini-cli")
    return home, store, doc, vs


def _gens(store: Path, path: str | None = None) -> list[manifest.Generation]:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return manifest.generations_of(conn, path) if path else manifest.generations(conn)
    finally:
        conn.close()


def _gen_bytes(store: Path, g: manifest.Generation) -> bytes:
    conn = sqlite_store.connect(store, readonly=True)
    try:
        return manifest.gen_bytes(conn, store, g)
    finally:
        conn.close()


def _packs(store: Path) -> int:
    return sum(p.stat().st_size for _, p in packs.pack_names(store))


def _policy(store: Path, **kv) -> None:
    (store / "config.toml").write_text("[vault]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()))


def test_the_policy_is_validated_and_keeps_every_generation_by_default(tmp_path):
    cfg = load_config(tmp_path)
    assert (cfg.vault.keep_generations, cfg.vault.generation_max_age_days) == (None, None)
    _policy(tmp_path, keep_generations=2, generation_max_age_days=30)
    cfg = load_config(tmp_path)
    assert (cfg.vault.keep_generations, cfg.vault.generation_max_age_days) == (2, 30)
    for bad in ("keep_generations = 0", 'keep_generations = "all"', "generation_max_age_days = -1"):
        (tmp_path / "config.toml").write_text(f"[vault]\n{bad}\n")
        with pytest.raises(ConfigError) as e:
            load_config(tmp_path)
        assert "vault." + bad.split(" ")[0] in str(e.value)


def test_default_policy_prunes_nothing(tmp_path):
    _home, store, doc, _vs = _gemini_store(tmp_path, 3)
    before = [(g.gen, g.gen_id) for g in _gens(store)]
    assert len(before) == 3
    rep = run_retention(store)
    assert rep["vault"]["generations"] == [] and rep["vault"]["keep_generations"] is None
    assert rep["vault"]["pruned"] == {"generations": 0, "files": 0, "objects": 0}
    assert [(g.gen, g.gen_id) for g in _gens(store)] == before
    assert not (packs.vault_dir(store) / prune.PRUNED).exists()


def test_keep_newest_prunes_older_versions_and_keeps_what_the_kept_ones_need(tmp_path):
    home, store, doc, vs = _gemini_store(tmp_path, 4)
    entries, usage = q(store, ENTRIES), q(store, USAGE)
    gens = _gens(store, str(doc))
    assert [g.gen for g in gens] == [1, 2, 3, 4]
    assert [_gen_bytes(store, g) for g in gens] == vs
    sizes = _packs(store)

    # the dry run lists what would go and the bytes freed, and changes nothing
    dry = run_retention(store, dry_run=True, keep_generations=2)
    v = dry["vault"]
    assert [(g["path"], g["gen"], g["reason"]) for g in v["generations"]] == [
        (str(doc), 1, "beyond the newest 2"),
        (str(doc), 2, "beyond the newest 2"),
    ]
    assert [g["bytes"] for g in v["generations"]] == [len(vs[0]), len(vs[1])]
    assert v["held"] == [] and v["objects_freed"] > 0 and v["objects_bytes"] > 0
    assert [g.gen for g in _gens(store)] == [1, 2, 3, 4] and _packs(store) == sizes

    # the CLI says the same
    r = runner.invoke(app, ["retention", "--dry-run", "--keep-generations", "2", "--home", str(store)])
    assert r.exit_code == 0, r.output
    assert "vault: would prune 2 generations (beyond the newest 2)" in r.output
    assert f"{doc} generation 1: beyond the newest 2" in r.output

    # the prune: generations 3 and 4 kept, byte-identical, numbered as before
    _policy(store, keep_generations=2)
    rep = run_retention(store)
    assert rep["vault"]["pruned"] == {"generations": 2, "files": 1, "objects": v["objects_freed"]}
    assert rep["vault"]["packs_rewritten"] >= 1
    kept = _gens(store, str(doc))
    assert [g.gen for g in kept] == [3, 4]
    assert [_gen_bytes(store, g) for g in kept] == vs[2:]
    assert sizes - _packs(store) == rep["vault"]["bytes_freed"] > 0
    # the dry run's figure is what the packs shed (objects and records' lines), to 1 %
    assert abs(rep["vault"]["bytes_freed"] - v["bytes_freed"]) <= rep["vault"]["bytes_freed"] // 100
    assert v["objects_bytes"] < v["bytes_freed"]

    # verify finds nothing (no orphan pack either); the CLI exits 0
    assert vault_verify(store, full=True)["problems"] == []
    r = runner.invoke(app, ["vault", "verify", "--full", "--home", str(store)])
    assert r.exit_code == 0, r.output

    # restore of each kept generation: byte-identical
    sid = q(store, "SELECT session_id FROM entries WHERE source_path = ? LIMIT 1", str(doc))[0][0]
    for g, want in zip(kept, vs[2:], strict=True):
        out = tmp_path / f"out{g.gen}"
        (f,) = vault_restore(store, sid, to=out, user_home=home, generation=g.gen)["files"]
        assert Path(f["to"]).read_bytes() == want
    r = runner.invoke(
        app,
        ["vault", "restore", sid, "--generation", "1", "--to", str(tmp_path / "o1"), "--home", str(store)],
    )
    assert r.exit_code == 1 and "the vault holds no generation 1" in r.stderr

    # a reparse with the file gone gives the same store
    doc.unlink()
    rr = reparse(store)
    assert all(e["removed"] == 0 and e["changed"] == 0 and e["added"] == 0 for e in rr["diff"]["entries"])
    assert q(store, ENTRIES) == entries and q(store, USAGE) == usage

    # a manifest rebuilt from the packs alone holds the kept generations, numbered as before
    from_vault(store)
    again = _gens(store, str(doc))
    assert [g.gen for g in again] == [3, 4]
    assert [_gen_bytes(store, g) for g in again] == vs[2:]
    assert vault_verify(store, full=True)["problems"] == []
    assert q(store, ENTRIES) == entries

    # pruning again: nothing more is due, nothing rewritten
    rep = run_retention(store)
    assert rep["vault"]["generations"] == [] and rep["vault"]["packs_rewritten"] == 0


def test_age_rule_counts_from_when_a_generation_was_superseded(tmp_path):
    _home, store, doc, vs = _gemini_store(tmp_path, 3)
    now = dt.datetime.now(dt.UTC)
    assert (
        run_retention(store, dry_run=True, generation_max_age_days=1, now=now)["vault"]["generations"] == []
    )
    later = now + dt.timedelta(days=2)
    v = run_retention(store, dry_run=True, generation_max_age_days=1, now=later)["vault"]
    assert [g["gen"] for g in v["generations"]] == [1, 2]
    assert v["generations"][0]["reason"].startswith("superseded " + now.strftime("%Y-%m-%d")[:4])
    rep = run_retention(store, generation_max_age_days=1, now=later)
    assert rep["vault"]["pruned"]["generations"] == 2
    (g,) = _gens(store, str(doc))
    assert g.gen == 3 and _gen_bytes(store, g) == vs[-1]


def test_a_generation_whose_entries_the_kept_ones_lack_is_held_back(tmp_path):
    """An append file rewritten with other lines: its first generation holds the only
    raw copy of entries the store has; a reparse without it would lose them."""
    home, store = tmp_path / "home", tmp_path / "store"
    f = home / ".claude" / "projects" / "-tmp-p" / "9b0e8f6a-1d2c-4e3f-8a5b-6c7d8e9f0a1b.jsonl"
    f.parent.mkdir(parents=True)
    start = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)
    first = "".join(ln + "\n" for ln in claude_lines(f.stem, 10, start, cwd="/tmp/p", word="heronfirst"))
    f.write_text(first)
    ingest(home, store, "claude-code")
    second = "".join(ln + "\n" for ln in claude_lines(f.stem, 4, start, cwd="/tmp/p", word="otherwords"))
    f.write_text(second)  # shorter, other bytes: generation 2
    ingest(home, store, "claude-code")
    assert [g.gen for g in _gens(store, str(f))] == [1, 2]
    entries = q(store, ENTRIES)
    rep = run_retention(store, keep_generations=1)
    v = rep["vault"]
    assert v["generations"] == [] and v["pruned"]["generations"] == 0
    assert [(g["gen"], g["reason"]) for g in v["held"]] == [
        (1, "the kept generations do not give the same entries")
    ]
    assert [_gen_bytes(store, g) for g in _gens(store, str(f))] == [first.encode(), second.encode()]
    f.unlink()
    reparse(store)
    assert q(store, ENTRIES) == entries


# ---------------------------------------------------------------- SIGKILL trials

#: the prune's kill points (``CTXKEEP_KILL_AT``): after the cuts are written (before the
#: commit), after the manifest's commit, after each pack rewritten
KILL_POINTS = ["vault-prune:cuts", "vault-prune:manifest", "vault-prune:pack:1", "vault-prune:pack:2"]
#: random-time trials: this many rounds of the phases between the kill points (each
#: trial kills at a random point of its phase, timed from the child's marks:
#: ``forkserver.Child``); ``VAULT_PRUNE_KILL_TRIALS`` sets the number of trials
ROUNDS = 2


def _env(user_home: Path, kill_at: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXKEEP_", "PREFECT_API"))}
    env.update(HOME=str(user_home), CTXKEEP_IDLE_SECONDS="0")
    if kill_at:
        env["CTXKEEP_KILL_AT"] = kill_at
    return env


def _retention(
    ctx, store: Path, user_home: Path, kill_at: str | None = None, phase: tuple[str, float] | None = None
) -> tuple[bool, list[tuple[str, float]]]:
    """``ctxkeep retention --no-prefect`` in a child forked warm (``cli_child``),
    SIGKILLed by ``kill_at`` or ``phase[1]`` s after its mark ``phase[0]``;
    ``(ended by itself with exit 0, its marks)``."""
    import cli_child

    child = Child(
        ctx, cli_child.run, ["retention", "--no-prefect", "--home", str(store)], _env(user_home, kill_at)
    )
    if phase:
        child.kill_after(*phase)
    code = child.finish()
    if code == -signal.SIGKILL:
        return False, child.marks
    assert code == 0 and child.done and child.done[2] == 0, (code, child.done)
    return True, child.marks


@pytest.fixture(scope="module")
def prune_base(tmp_path_factory):
    root = tmp_path_factory.mktemp("prune-kill")
    home, store, doc, vs = _gemini_store(root, 4)
    _policy(store, keep_generations=1)
    (root / "user-home").mkdir()
    mpatch = pytest.MonkeyPatch()
    ctx = forkserver(mpatch, "cli_child")
    yield ctx, root, store, doc, vs, q(store, ENTRIES)
    mpatch.undo()


def _trial(prune_base, n: int, kill_at: str | None, phase: tuple[str, float] | None) -> str:
    ctx, root, base, doc, vs, entries = prune_base
    store = root / f"trial-{n}"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(base, store, ignore=shutil.ignore_patterns("*.lock"))
    ended, _ = _retention(ctx, store, root / "user-home", kill_at, phase)
    if kill_at:
        assert not ended, f"{kill_at} was not reached"
    pruned_now = [g.gen for g in _gens(store, str(doc))]
    # the vault reads back as it is (orphan packs of the kill allowed)
    v = vault_verify(store, full=True)
    assert all("orphan pack" in p for p in v["problems"]), v["problems"]
    # one ordinary command: retention again ends the prune, and leaves no garbage a row needs
    assert _retention(ctx, store, root / "user-home")[0]
    v = vault_verify(store, full=True)
    assert all("orphan pack" in p for p in v["problems"]), v["problems"]
    (g,) = _gens(store, str(doc))
    assert g.gen == 4 and _gen_bytes(store, g) == vs[-1]
    assert q(store, ENTRIES) == entries
    # a manifest rebuilt from the packs alone: the kept generation, nothing pruned back
    from_vault(store)
    (g,) = _gens(store, str(doc))
    assert g.gen == 4 and _gen_bytes(store, g) == vs[-1]
    assert vault_verify(store)["problems"] == []
    assert q(store, ENTRIES) == entries
    shutil.rmtree(store, ignore_errors=True)
    how = kill_at or (f"{phase[0]} + {phase[1]:.3f} s" if phase else "not killed")
    return f"{how}: {'ended' if ended else 'killed'}, generations after the kill {pruned_now}"


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_a_prune_killed_at_each_step_then_retention_again(prune_base, kill_at):
    print(_trial(prune_base, KILL_POINTS.index(kill_at), kill_at, None))


@pytest.mark.slow
def test_prunes_killed_at_random_times(prune_base):
    """Kills at random points of each phase of the run (from its start to the cuts,
    between the kill points, after the last pack to its end), ``ROUNDS`` times round."""
    ctx, root, base, *_ = prune_base
    store = root / "calibrate"
    shutil.copytree(base, store, ignore=shutil.ignore_patterns("*.lock"))
    ended, marks = _retention(ctx, store, root / "user-home")
    assert ended
    shutil.rmtree(store)
    keys = [k for k, _ in marks]
    # the reference run passed every kill point (a pack rewritten each): the phases
    # are the stretches between them
    assert keys[:4] == ["ready", "vault-prune:cuts#1", "vault-prune:manifest#1", "vault-prune:pack#1"], keys
    assert keys[-1] == "done" and keys[-2].startswith("vault-prune:pack#"), keys
    rng = random.Random("ctxkeep-vault-prune")
    env_trials = os.environ.get("VAULT_PRUNE_KILL_TRIALS")
    kills = phase_kill.plan(marks, rng, int(env_trials) if env_trials else ROUNDS * (len(marks) - 1))
    outcomes = [_trial(prune_base, 100 + i, None, k) for i, k in enumerate(kills)]
    print("\n".join(outcomes))
    killed = sum(": killed" in o for o in outcomes)
    assert killed >= len(kills) // 3, outcomes


def test_pruned_generations_leave_the_lakes_raw_table_at_the_next_export(tmp_path):
    """``export parquet --tables raw`` puts every generation in the lake; after a prune
    the next export rewrites the partition without the pruned ones."""
    import pyarrow.dataset as ds

    from ctxkeep.maintenance.export import export_parquet

    _home, store, doc, vs = _gemini_store(tmp_path, 3)
    lake = tmp_path / "lake"

    def lake_gens() -> list[tuple[int, bytes]]:
        t = ds.dataset(lake / "raw", format="parquet", partitioning="hive").to_table().to_pylist()
        return sorted((x["gen"], x["data"]) for x in t if x["path"] == str(doc))

    export_parquet(store, str(lake), tables=("raw",))
    assert lake_gens() == list(enumerate(vs, 1))
    assert run_retention(store, keep_generations=1)["vault"]["pruned"]["generations"] == 2
    export_parquet(store, str(lake), tables=("raw",))
    assert lake_gens() == [(3, vs[2])]
