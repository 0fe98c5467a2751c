"""What an ingest will read: the files that may hold new bytes (with their watermark),
and the parts an ingest splits them into (one agent's files, in plan order)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.errors import ConfigError
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite.params import in_parts
from ctxkeep.sources import (
    SOURCES,
    discover_all,
    file_unchanged,
    files_for_paths,
    needs_state,
    reads_state,
    sidecars_for,
)
from ctxkeep.sources.contract import MAX_LINE_ENV, Discovery, DiscoveryContext, SourceFile, Watermark
from ctxkeep.sources.readers.jsonl import facts_unchanged
from ctxkeep.sources.readers.rows import SEP as ROWS_SEP
from ctxkeep.sources.readers.sidecar import SIDECAR_OF

#: the line cap was set in the environment this process started with (it then wins
#: over ``config.toml``'s ``[ingest] max_line_mb``, which ``plan`` exports otherwise)
_LINE_CAP_FROM_ENV = bool(os.environ.get(MAX_LINE_ENV))

#: files to read, each with its watermark (None: read from byte 0)
Todo = list[tuple[SourceFile, Watermark | None]]


def pending_bytes(todo: Todo) -> int:
    """New raw bytes of ``todo``: size minus watermark offset per file (the whole size
    for a file read again from the start or a rewritten document, which is read
    whole); a file that vanished counts 0."""
    total = 0
    for f, wm in todo:
        try:
            size = f.path.stat().st_size
        except OSError:
            continue
        off = wm.offset if wm is not None and f.mode != "rewrite" and size >= wm.offset else 0
        total += size - off
    return total


@dataclass
class Plan:
    """What an ingest will read: ``todo`` files (with their watermark), the number of
    ``unchanged`` files skipped, discoveries per agent, and problems (with --path, and
    agents config.toml names that have no source)."""

    todo: Todo
    unchanged: int
    discoveries: list[Discovery]
    problems: list[str] = field(default_factory=list)

    @property
    def pending_bytes(self) -> int:
        """New raw bytes to read (``pending_bytes(todo)``), for a progress bar."""
        return pending_bytes(self.todo)


#: a plan of at most this many files (``ingest --path FILE``: the hook path; a small
#: backfill) reads the watermarks' stat facts and the vault's manifest rows of its own
#: files only, by primary key, not the whole store's: at 12 GB (25,728 watermarks and
#: vault files) those two reads were ~55 ms of CPU per plan, and the hook path plans
#: twice (the service's read-only plan, the engine's under the lock; session 24)
FEW_FILES = 256

#: new raw bytes of one part at most (a part of one file may hold more): the unit a
#: Prefect task extracts and transforms, and holds in memory until the writer takes it
PART_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Part:
    """Consecutive ``todo`` files of one ``agent`` (plan order), at most
    ``PART_BYTES`` new bytes unless one file holds more: the unit of extract +
    transform (``engine.extract_transform_part``; a task in ``flows.ingest``).
    ``index`` counts the agent's parts from 0."""

    agent: str
    todo: Todo
    index: int = 0

    @property
    def name(self) -> str:
        """``agent``, or ``agent-<index>`` after its first part (task run names)."""
        return self.agent if self.index == 0 else f"{self.agent}-{self.index}"


def split_parts(todo: Todo, part_bytes: int | None = None) -> list[Part]:
    """``todo`` cut into parts: a new part at each change of agent and when a part
    would pass ``part_bytes`` new bytes (default ``PART_BYTES``). Concatenated, the
    parts are ``todo`` in order."""
    part_bytes = PART_BYTES if part_bytes is None else part_bytes
    out: list[Part] = []
    cur: Todo = []
    agent = ""  # the agent of ``cur`` (read only while ``cur`` holds files)
    size = 0
    index: dict = {}
    for f, wm in todo:
        n = pending_bytes([(f, wm)])
        if cur and (f.agent != agent or size + n > part_bytes):
            out.append(Part(agent, cur, index.get(agent, 0)))
            index[agent] = index.get(agent, 0) + 1
            cur, size = [], 0
        agent = f.agent
        cur.append((f, wm))
        size += n
    if cur:
        out.append(Part(agent, cur, index.get(agent, 0)))
    return out


def plan(
    home: Path,
    conn,
    *,
    agents: list[str] | None = None,
    paths: list[Path] | None = None,
    ctx: DiscoveryContext | None = None,
    force: bool = False,
    files: list[SourceFile] | None = None,
) -> Plan:
    """Discover files and keep those that may hold new bytes.

    With ``files``, exactly those source files are considered (no discovery; a
    backfill's selection); with ``paths``, only those files/dirs; otherwise every
    enabled agent's default and configured locations. ``force`` ignores watermarks
    (backfill). ``conn`` None: no store yet (every file is read from byte 0; ``ingest
    --dry-run`` never creates one).
    """
    try:
        cfg = cfgmod.load_config(home)
    except ConfigError as e:  # its agent names that no source has: said with the error
        e.warnings += cfgmod.unknown_agent_lines_of_file(home, SOURCES)
        raise
    if not _LINE_CAP_FROM_ENV:  # the reader (and the reader processes it starts) read it
        os.environ[MAX_LINE_ENV] = str(cfg.ingest.max_line_mb)
    ctx = ctx or DiscoveryContext.from_env()
    problems: list[str] = cfgmod.unknown_agent_lines(cfg, SOURCES) + [
        f"{cfg.path}: {w}" for w in cfg.warnings
    ]
    if files is not None:
        discoveries = [Discovery(a, files=[f for f in files if f.agent == a]) for a in SOURCES]
    elif paths:
        files, path_problems = files_for_paths(paths, agents)
        files += sidecars_for(files)
        problems += path_problems
        discoveries = [Discovery(a, files=[f for f in files if f.agent == a]) for a in SOURCES]
    else:
        discoveries = discover_all(
            ctx,
            agents,
            enabled={a: cfg.agent(a).enabled for a in SOURCES},
            extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
        )
        files = [f for d in discoveries for f in d.files]
    # a few files (``--path``: the hook path) are looked up by path, not the whole store's
    few = [str(f.path) for f in files] if len(files) <= FEW_FILES else None
    facts, stateful = _watermarks(conn, files, few)
    # wholly purged files: nothing of them may come back, so they are not read
    purged = delete_store.purged_files(conn) if conn is not None else set()
    # files the vault does not hold yet (a store from before the vault) are read once
    # from byte 0, so the vault takes in what the agent still keeps; dedup keeps the
    # store as it was
    vaulted = (
        _vault_held(conn, few if few is not None and not any(f.mode == "sqlite" for f in files) else None)
        if facts
        else None
    )
    problems += reparse_due(conn)
    # the stat discovery took of each file it found (moments ago): no second and
    # third stat per file (``exists``, the test's own) over 25,727 files
    found: dict[str, tuple[str, os.stat_result]] = {}
    for d in discoveries:
        found.update(d.found())
    #: agent -> (whether its change test reads the state, its parser version)
    tests: dict[str, tuple[bool, int]] = {}
    read: list[tuple[SourceFile, bool]] = []  # (file, whether it has a watermark)
    unchanged = 0
    for f in files:
        key = str(f.path)
        got = found.get(key)
        if got is not None:
            st = got[1]
        else:
            try:
                st = os.stat(key)
            except OSError:
                continue  # gone
        if purged and (key in purged or f.meta.get(SIDECAR_OF) in purged):
            # (a sidecar of a purged transcript: a purge before sidecars were read
            # remembered the transcript only)
            continue
        wm = None if force else facts.get(key)
        if wm is not None and vaulted is not None and _unvaulted_file(f, key, vaulted):
            wm = None
        if not force:
            test = tests.get(f.agent)
            if test is None:
                src = SOURCES[f.agent]
                test = tests[f.agent] = (reads_state(f.agent), src.PARSER_VERSION)
            if f.mode == "sqlite" or test[0]:  # ``needs_state``
                same = file_unchanged(f, stateful.get(key) if wm is not None else None, st)
            else:  # the default test: the stat facts alone (``facts_unchanged``)
                same = facts_unchanged(st, wm, test[1])
            if same:
                unchanged += 1
                continue
        read.append((f, wm is not None))
    todo: Todo = [(f, None) for f, _ in read]
    if conn is not None and read and not force:  # the states of the files read
        full = sqlite_store.load_watermarks(conn, [str(f.path) for f, has in read if has])
        todo = [(f, full.get(str(f.path)) if has else None) for f, has in read]
        todo = [(f, _rows_held(conn, f, wm)) for f, wm in todo]
    return Plan(todo, unchanged, discoveries, problems)


def _rows_held(conn, f: SourceFile, wm: Watermark | None) -> Watermark | None:
    """``wm`` of a database whose sessions' rows the vault keeps, without the sessions of
    its ``state["vault"]`` whose version the vault does not hold (a generation pruned, a
    store restored from an older backup): the reader sends those whole instead of
    building on a version that is not there (``sinks.vault.rows_capture``)."""
    if wm is None or f.mode != "sqlite" or not isinstance(wm.state.get("vault"), dict):
        return wm
    from ctxkeep.sinks import vault
    from ctxkeep.sinks.vault.rows_capture import held_marks

    v = wm.state["vault"]
    home = vault.home_of(conn)
    if not vault.enabled() or home is None or not vault.configured(home) or not isinstance(v.get("s"), dict):
        return wm
    held = held_marks(conn, str(f.path))
    keep = {sid: e for sid, e in v["s"].items() if isinstance(e, dict) and e.get("k") in held.get(sid, ())}
    if len(keep) == len(v["s"]):
        return wm
    return dataclasses.replace(wm, state=dict(wm.state, vault=dict(v, s=keep)))


#: the file modes the vault captures (``sources.readers.jsonl`` and ``document``)
VAULTED_MODES = ("append", "rewrite", "tree")  # (tree: sst/opencode's JSON tree, one document)


def reparse_due(conn) -> list[str]:
    """One line per agent whose files, gone from disk, the vault holds as read by an
    older parser than today's (a reparse would read them with today's: ``ctxkeep
    reparse``). Files still on disk need nothing: a new parser version reads them
    again from byte 0."""
    from ctxkeep.sources import SOURCES

    if conn is None:
        return []
    join = "FROM watermarks w JOIN vault_files v ON v.path = w.path"
    try:  # the versions first (of every file: no join), a row per file only where one is old
        versions = conn.execute("SELECT DISTINCT agent, parser_version FROM watermarks").fetchall()
        conn.execute("SELECT 1 FROM vault_files LIMIT 1").fetchall()  # (raises before v11)
    except Exception:  # a read-only plan of a store before v11
        return []
    due: dict[str, int] = {}
    for agent, version in versions:
        src = SOURCES.get(agent)
        if src is None or version == src.PARSER_VERSION:
            continue
        for (path,) in conn.execute(
            f"SELECT w.path {join} WHERE w.agent = ? AND w.parser_version IS ?", (agent, version)
        ):
            if not Path(path).exists():
                due[agent] = due.get(agent, 0) + 1
    return [
        f"{n} {agent} file(s) are gone from disk and were parsed by an older {agent} parser than today's: "
        f"the vault holds them - run `ctxkeep reparse --agent {agent}`"
        for agent, n in sorted(due.items())
    ]


def _vault_held(conn, paths: list[str] | None = None) -> tuple[set[str], set[str]] | None:
    """What the vault's manifest (``vault_files``) holds, when the vault is on: (the
    paths of the files it holds, the databases whose sessions' rows it holds); None
    when it is off (``[vault] enabled = false``), or for a store before v11. With
    ``paths`` (a plan of a few files, none a database): which of those it holds, and no
    databases (``_unvaulted_file`` asks only about the plan's own files, and about
    databases only for a ``sqlite`` file)."""
    from ctxkeep.sinks import vault

    if conn is None or not vault.enabled():
        return None
    home = vault.home_of(conn)
    if home is None or not vault.configured(home):  # ``[vault] enabled = false``
        return None
    try:
        if paths is not None:
            held: set[str] = set()
            for part in in_parts(paths):
                q = f"SELECT path FROM vault_files WHERE path IN ({','.join('?' * len(part))})"
                held.update(r[0] for r in conn.execute(q, part))
            return held, set()
        held = {r[0] for r in conn.execute("SELECT path FROM vault_files")}
    except Exception:  # a read-only plan of a store before v11
        return None
    # a database is held as its sessions' rows (``sources.readers.rows``: ``<db>#session=<id>``)
    dbs = {p.partition(ROWS_SEP)[0] for p in held if ROWS_SEP in p}
    return held, dbs


def _unvaulted_file(f: SourceFile, key: str, vaulted: tuple[set[str], set[str]]) -> bool:
    """Whether ``f`` (``key``: its path), which has a watermark, is a file the vault
    should hold but does not (``_vault_held``'s ``vaulted``): read again from byte 0."""
    if f.mode in VAULTED_MODES:
        return key not in vaulted[0]
    return f.mode == "sqlite" and _rows_vaulted(f.agent) and key not in vaulted[1]


def _rows_vaulted(agent: str) -> bool:
    """Whether ``agent``'s database reader hands its sessions' rows to the vault
    (``readers.sqlite.database_reader(vault=…)``)."""
    src = SOURCES.get(agent)
    return bool(getattr(getattr(src, "read", None), "vault_tables", ()))


def _watermarks(
    conn, files: list[SourceFile], few: list[str] | None = None
) -> tuple[dict[str, tuple], dict[str, Watermark]]:
    """What the plan tests ``files`` against: every watermark's stat facts, or with
    ``few`` (the files' paths, a plan of at most ``FEW_FILES``) those paths' only
    (``sinks.sqlite.watermark_facts``: rows, no objects) and the whole watermarks of
    the files whose test reads their ``state`` (``sqlite`` mode, a source with its own
    ``ChangeTest``); the files read get their whole watermark afterwards. A Claude
    Code watermark's state is up to ~30 KB of JSON: parsing them all took ~70 ms of a
    no-op ingest over 2,600 files."""
    if conn is None:
        return {}, {}
    stateful = [str(f.path) for f in files if needs_state(f)]
    return sqlite_store.watermark_facts(conn, few), sqlite_store.load_watermarks(
        conn, stateful
    ) if stateful else {}


def dry_run_report(p: Plan) -> dict:
    """What ``p`` would read, per agent, for ``ingest --dry-run``: ``{"dry_run": True,
    "files": n to read, "bytes": new raw bytes (``pending_bytes``), "unchanged": n
    skipped, "agents": [{"agent", "files", "bytes", "paths": [the files, at most 20]}]
    (agents with something to read, in plan order), "problems": [...]}``. Reads only
    file sizes; nothing is parsed or written."""
    agents: dict[str, dict] = {}
    for f, wm in p.todo:
        a = agents.setdefault(f.agent, {"agent": f.agent, "files": 0, "bytes": 0, "paths": []})
        a["files"] += 1
        a["bytes"] += pending_bytes([(f, wm)])
        if len(a["paths"]) < 20:
            a["paths"].append(str(f.path))
    return {
        "dry_run": True,
        "files": len(p.todo),
        "bytes": sum(a["bytes"] for a in agents.values()),
        "unchanged": p.unchanged,
        "agents": list(agents.values()),
        "problems": p.problems,
    }
