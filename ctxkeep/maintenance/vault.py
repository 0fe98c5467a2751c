"""``ctxkeep vault status | verify | restore``: what the vault holds, whether it reads
back, and the native files of a session made again from it (``sinks.vault``).

The agents' own deletion schedules read here (``cleanup_schedules``):

- Claude Code deletes session transcripts whose last change is older than
  ``cleanupPeriodDays`` days (``~/.claude/settings.json``, default 30; Claude Code's
  settings documentation, docs.anthropic.com/en/docs/claude-code/settings);
- Gemini CLI deletes sessions older than ``general.sessionRetention.maxAge`` (``"30d"``,
  ``"24h"``, ``"2w"``) when ``general.sessionRetention.enabled`` is true
  (``~/.gemini/settings.json``; google-gemini/gemini-cli docs/cli/session-management.md);
  ``maxCount`` keeps only the newest N sessions.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep import config
from ctxkeep.errors import CtxkeepError, NotFound
from ctxkeep.paths import is_relative_stored
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks import vault
from ctxkeep.sinks.sqlite.lookup import resolve_session
from ctxkeep.sinks.vault import manifest
from ctxkeep.sinks.vault.packs import vault_dir
from ctxkeep.sources.contract import DiscoveryContext
from ctxkeep.sources.readers.sidecar import SHARED, SIDECAR
from ctxkeep.timeutil import parse_utc

DAY_NS = 86_400 * 10**9
CLAUDE_DEFAULT_DAYS = 30
_AGE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hdwm]?)\s*$")
_AGE_UNIT_DAYS = {"h": 1 / 24, "d": 1, "w": 7, "m": 30, "": 1}


def _json_file(p: Path) -> dict:
    try:
        v = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


@dataclass
class Schedule:
    """An agent's own deletion rule: ``agent``, ``days`` (age at which it deletes a
    session; None: it keeps them), ``max_count`` (newest sessions kept; None: no
    cap), ``setting`` (where it was read, or that the default applies)."""

    agent: str
    days: float | None
    setting: str
    max_count: int | None = None


def cleanup_schedules(home_dir: Path) -> list[Schedule]:
    """The deletion rules of the agents that have one, read from ``home_dir`` (the
    user's home: see the module doc for the settings and their sources)."""
    out = []
    cs = home_dir / ".claude" / "settings.json"
    days = _json_file(cs).get("cleanupPeriodDays")
    if isinstance(days, int | float) and not isinstance(days, bool) and days > 0:
        out.append(Schedule("claude-code", float(days), f"{cs}: cleanupPeriodDays = {days}"))
    else:
        out.append(
            Schedule(
                "claude-code",
                CLAUDE_DEFAULT_DAYS,
                f"cleanupPeriodDays not set: {CLAUDE_DEFAULT_DAYS} (default)",
            )
        )
    gs = home_dir / ".gemini" / "settings.json"
    ret = (_json_file(gs).get("general") or {}).get("sessionRetention") or {}
    if isinstance(ret, dict) and ret.get("enabled"):
        m = _AGE_RE.match(str(ret.get("maxAge", "")))
        n = ret.get("maxCount")
        out.append(
            Schedule(
                "gemini-cli",
                float(m.group(1)) * _AGE_UNIT_DAYS[m.group(2)] if m else None,
                f"{gs}: general.sessionRetention = {json.dumps(ret, sort_keys=True)}",
                n if isinstance(n, int) and n > 0 else None,
            )
        )
    else:
        out.append(Schedule("gemini-cli", None, "general.sessionRetention not enabled: sessions are kept"))
    return out


@dataclass
class AtRisk:
    """A session file its agent will delete (``due``: UTC ISO time, or ``now`` when
    ``max_count`` already excludes it) whose bytes the vault does not hold whole."""

    agent: str
    path: str
    due: str
    vaulted_bytes: int
    size: int
    #: bytes past ``vaulted_bytes`` that are one line the agent has not ended (no
    #: newline): an append-only file's unterminated tail, which ingest holds back until
    #: the line ends (so no ingest now brings it into the vault); 0 otherwise
    unfinished_bytes: int = 0
    #: the store's watermark covers the file as it is (same inode, offset at its size):
    #: an ingest reads nothing of it, so only a re-read from byte 0 (``backfill``)
    #: brings the missing bytes into the vault (a file scrubbed before scrub captured
    #: its rewrite, newuser15 F17)
    read_all: bool = False


#: bytes read at a time when looking for a newline in a file's unvaulted tail
_TAIL_READ = 1 << 20


def unfinished_tail(agent: str, path: str, held: int, size: int) -> int:
    """``size - held`` when ``path`` is read append-only (``sources.file_mode``) and its
    bytes from ``held`` to ``size`` hold no newline (one unterminated last line: the
    JSONL readers read only whole lines, ``sources.readers.jsonl``); else 0. Reads
    that tail in 1 MiB steps, stopping at the first newline."""
    from ctxkeep.sources import file_mode

    if size <= held or file_mode(agent, path) != "append":
        return 0
    try:
        with open(path, "rb") as fh:
            fh.seek(held)
            left = size - held
            while left > 0:
                chunk = fh.read(min(_TAIL_READ, left))
                if not chunk:
                    break
                if b"\n" in chunk:
                    return 0
                left -= len(chunk)
    except OSError:
        return 0
    return size - held


@dataclass
class AgentStatus:
    """One agent's line of ``vault status``."""

    agent: str
    files: int
    sessions: int
    generations: int
    raw_bytes: int
    stored_bytes: int
    redactions: dict[str, int]
    deletes: str | None = None
    next_deletion: str | None = None
    at_risk: list[AtRisk] = field(default_factory=list)


def _iso(ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ns / 1e9))


def _held(conn, path: str) -> int | None:
    """Original bytes of ``path``'s newest generation from byte 0 (0: partial; None:
    the vault does not know the file)."""
    g = manifest.latest_of(conn, path)
    if g is None:
        return None
    return g.length if g.start == 0 else 0


def _tree_sessions(conn) -> dict[str, int]:
    """Per agent, the sessions held by JSON-tree documents (``meta.vault_tree``:
    sst/opencode's ``storage/session/<project>/<id>.json`` captured with its message and
    part files, ``sources.opencode``): the entries are on the message and part files,
    not on the session file the vault row names, so a session counts when entries of
    session ``<id>`` (the file's stem, the session id opencode names it by) come from a
    file under its ``storage`` folder."""
    out: dict[str, int] = {}
    rows = conn.execute(
        "SELECT agent, path, json_extract(meta, '$.storage') FROM vault_files "
        "WHERE json_extract(meta, '$.vault_tree') AND json_extract(meta, '$.storage') IS NOT NULL"
    ).fetchall()
    for agent, path, storage in rows:
        lo = storage.rstrip("/") + "/"
        hit = conn.execute(
            "SELECT 1 FROM entry_rows e JOIN files fi ON fi.file_id = e.file_id "
            "WHERE e.session_id = ? AND fi.path >= ? AND fi.path < ? LIMIT 1",
            (Path(path).stem, lo, lo[:-1] + "0"),
        ).fetchone()
        if hit:
            out[agent] = out.get(agent, 0) + 1
    return out


def vault_status(home: Path, ctx: DiscoveryContext | None = None, now_ns: int | None = None) -> dict:
    """Per agent: files, sessions, generations, bytes raw (original) and stored
    (compressed), values redacted per kind; the agents' deletion schedules with the next
    deletion of a session file on disk and the files at risk (due for deletion and not
    whole in the vault; ``unfinished_bytes``: how much of what is missing is a last line
    the agent never ended, which no ingest reads until it does); the files the vault
    holds that are gone from disk (``missing``: what ``vault restore --all-missing``
    writes back; a database agent's file: the database). Returns ``{"vault_dir", "pack_bytes",
    "stored_bytes", "shared_bytes", "per_reference_bytes" (``manifest.stored_figures``: each object
    counted once), "agents": [...], "schedules": [...], "at_risk": n, "missing": [paths]}``. Raises
    StoreError without a store."""
    from ctxkeep.sources import discover_all

    ctx = ctx or DiscoveryContext.from_env()
    now_ns = time.time_ns() if now_ns is None else now_ns
    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        figs = manifest.figures(conn)
        stored = manifest.stored_figures(conn)
        total, per = stored["pack_bytes"], stored["agents"]
        sessions = dict(
            conn.execute(
                "SELECT vf.agent, count(DISTINCT e.session_id) FROM vault_files vf JOIN files fi "
                "ON fi.path = coalesce(json_extract(vf.meta, '$.db'), vf.path) "  # (a database's rows)
                "JOIN entry_rows e ON e.file_id = fi.file_id GROUP BY vf.agent"
            ).fetchall()
        )
        for tree_agent, n in _tree_sessions(conn).items():
            sessions[tree_agent] = sessions.get(tree_agent, 0) + n
        agents: dict[str, AgentStatus] = {
            a: AgentStatus(
                a, f["files"], sessions.get(a, 0), f["generations"], f["raw"], per.get(a, 0), f["redactions"]
            )
            for a, f in sorted(figs.items())
        }
        missing = sorted(
            {g.disk_path for g in manifest.generations(conn, latest=True) if not _on_disk(g.disk_path)}
        )
        scheds = cleanup_schedules(ctx.home)
        wms = None  # the watermarks, read for the first file at risk
        from ctxkeep.sinks import vault as vault_sink

        # (the vault off: a re-read captures nothing either, so backfill is no advice)
        capturing = vault_sink.enabled() and vault_sink.configured(Path(home))
        for s in scheds:
            a = agents.setdefault(s.agent, AgentStatus(s.agent, 0, 0, 0, 0, 0, {}))
            if s.days is None and s.max_count is None:
                a.deletes = "never (" + s.setting + ")"
                continue
            a.deletes = (f"after {s.days:g} days" if s.days else "") + (
                f"{', ' if s.days else ''}beyond the newest {s.max_count}" if s.max_count else ""
            )
            files = [f for d in discover_all(ctx, [s.agent]) for f in d.files]
            stats = []
            for f in files:
                try:
                    st = f.path.stat()
                except OSError:
                    continue
                stats.append((st.st_mtime_ns, st.st_size, str(f.path), (st.st_dev, st.st_ino)))
            stats.sort(reverse=True)
            dues = []
            for i, (mt, size, path, ident) in enumerate(stats):
                due = mt + int(s.days * DAY_NS) if s.days else None
                if s.max_count is not None and i >= s.max_count:
                    due = now_ns
                if due is None:
                    continue
                dues.append(due)
                held = _held(conn, path)
                if held is None or held < size:
                    tail = unfinished_tail(s.agent, path, held or 0, size)
                    if wms is None:
                        wms = sqlite_store.load_watermarks(conn)
                    wm = wms.get(path)
                    read_all = (
                        capturing and wm is not None and wm.offset >= size and (wm.dev, wm.ino) == ident
                    )
                    a.at_risk.append(AtRisk(s.agent, path, _iso(due), held or 0, size, tail, read_all))
            if dues:
                a.next_deletion = _iso(min(dues))
    finally:
        conn.close()
    rows = list(agents.values())
    return {
        "vault_dir": str(vault_dir(home)),
        "pack_bytes": total,
        "stored_bytes": stored["stored_bytes"],
        "shared_bytes": stored["shared_bytes"],
        "per_reference_bytes": stored["per_reference_bytes"],
        "agents": [r.__dict__ | {"at_risk": [x.__dict__ for x in r.at_risk]} for r in rows],
        "schedules": [s.__dict__ for s in scheds],
        "at_risk": sum(len(r.at_risk) for r in rows),
        "missing": missing,
    }


def _on_disk(path: str) -> bool:
    """Whether ``path`` exists (a dangling symlink counts: restore would not overwrite it)."""
    p = Path(path)
    return p.exists() or p.is_symlink()


def vault_verify(home: Path, full: bool = False, progress=None) -> dict:
    """``manifest.verify`` of the store at ``home``: ``{"generations", "objects",
    "problems": [line, …], "ok"}``."""
    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        n = conn.execute("SELECT count(*) FROM vault_generations").fetchone()[0]
        objects, problems = manifest.verify(conn, Path(home), full=full, progress=progress)
    finally:
        conn.close()
    return {
        "generations": n,
        "objects": objects,
        "problems": [p.line() for p in problems if not p.what.startswith("orphan pack")],
        "orphans": [p.line() for p in problems if p.what.startswith("orphan pack")],
        "orphan_packs": [
            {"path": p.where, "bytes": _size_of(p.where)}
            for p in problems
            if p.what.startswith("orphan pack")
        ],
        "ok": not [p for p in problems if not p.what.startswith("orphan pack")],
    }


def vault_repair(home: Path, dry_run: bool = False, timeout: float = 0) -> dict:
    """Remove the orphan packs (``vault verify --full``) whose contents the store holds
    already (``capture.orphan_verdicts``), under the store lock (waiting ``timeout``
    seconds; StoreBusy past it): a running ingest names its pack only at its commit,
    so no orphan is judged while a run could be about to commit it. Each file is
    unlinked, then its folder fsynced; nothing else changes (no manifest row names an
    orphan), so a crash leaves at worst some of them for the next repair.
    ``dry_run``: judge, remove nothing. Returns ``{"orphan_packs": [{"path",
    "bytes", "removed", "removable", "why"}], "removed", "removed_bytes", "kept",
    "dry_run"}``."""
    from ctxkeep.sinks import recovery
    from ctxkeep.sinks.files import fsync_dir
    from ctxkeep.sinks.lock import hold
    from ctxkeep.sinks.vault import capture

    home = Path(home)
    rows = []
    with hold(home, timeout, what="vault verify --repair"):
        conn = sqlite_store.connect(home)
        try:
            if not dry_run:
                recovery.recover(conn, home, check=True)  # a purge's sweep finished first
            verdicts = capture.orphan_verdicts(conn, home)
        finally:
            conn.close()
        for path, removable, why in verdicts:
            size = _size_of(str(path))
            removed = False
            if removable and not dry_run:
                path.unlink(missing_ok=True)
                fsync_dir(path.parent)
                removed = True
            rows.append(
                {"path": str(path), "bytes": size, "removable": removable, "removed": removed, "why": why}
            )
    gone = [r for r in rows if r["removed"] or (dry_run and r["removable"])]
    return {
        "orphan_packs": rows,
        "removed": len(gone),
        "removed_bytes": sum(r["bytes"] for r in gone),
        "kept": len(rows) - len(gone),
        "dry_run": dry_run,
    }


def _size_of(path: str) -> int:
    """``path``'s size in bytes (0: gone since)."""
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def session_files(conn, session_id: str) -> list[str]:
    """The paths of the files the vault holds for ``session_id`` and its sub-agents
    (the files its entries came from, and their sidecars), sorted."""
    rows = conn.execute(
        "SELECT DISTINCT fi.path FROM entry_rows e JOIN files fi ON fi.file_id = e.file_id "
        "JOIN vault_files vf ON vf.path = fi.path WHERE e.session_id = ?1 OR e.parent_session_id = ?1",
        (session_id,),
    ).fetchall()
    # an sst/opencode JSON tree is held as its session file (``storage/session/<project
    # id>/<name>.json``); its entries name its message files (``storage/message/<name>/``)
    # and part files
    trees = conn.execute("SELECT path, meta FROM vault_files WHERE meta LIKE '%\"vault_tree\"%'").fetchall()
    out = {r[0] for r in rows}
    # an agent database's session is held as its rows (``sources.readers.rows``):
    # the documents of the databases its entries came from, named by the session's
    # id (or a database kept as one document, session "")
    dbs = conn.execute(
        "SELECT DISTINCT vf.path, vf.meta FROM vault_files vf WHERE vf.meta LIKE '%\"vault_rows\"%' AND "
        "json_extract(vf.meta, '$.db') IN (SELECT DISTINCT fi.path FROM entry_rows e JOIN files fi "
        "ON fi.file_id = e.file_id WHERE e.session_id = ?1 OR e.parent_session_id = ?1)",
        (session_id,),
    ).fetchall()
    if dbs:
        native = {session_id, ""} | {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT session_id FROM entry_rows WHERE parent_session_id = ?1", (session_id,)
            )
        }
        out |= {path for path, meta in dbs if json.loads(meta or "{}").get("session") in native}
    if trees:
        srcs = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT fi.path FROM entry_rows e JOIN files fi ON fi.file_id = e.file_id "
                "WHERE e.session_id = ?1 OR e.parent_session_id = ?1",
                (session_id,),
            )
        ]
        for path, meta in trees:
            p = Path(path)
            storage = str(json.loads(meta or "{}").get("storage") or p.parent.parent.parent)
            msgs = f"{storage}/message/{p.stem}/"
            if any(x.startswith(msgs) for x in srcs):
                out.add(path)
    # the sidecars of those files (``sources.readers.sidecar``: a Claude Code sub-agent's
    # ``.meta.json``, a tool output kept in ``tool-results/``, Vibe's ``meta.json``): no
    # entry names them, the vault files them under the transcript they belong to
    out |= set(manifest.sidecars_of(conn, out))
    return sorted(out)


def _targets(
    g: manifest.Generation, data: bytes, to: Path | None, user_home: Path
) -> list[tuple[Path, bytes, int | None]]:
    """Where each file of generation ``g`` goes, with its bytes and mtime: the file
    itself, or (a JSON tree, ``sources.readers.tree``) each file of the tree under the
    storage folder the vault met it in."""
    from ctxkeep.sources.readers import tree

    if g.meta.get("vault_rows"):  # an agent database's session: its rows as JSONL, only under ``to``
        if to is None:
            return []
        name = f"{g.meta.get('session') or 'rows'}.jsonl".replace("/", "_")
        return [(Path(to) / _relative(g.disk_path + ".rows", user_home) / name, data, g.mtime_ns)]
    if not g.meta.get("vault_tree"):
        files = [(Path(g.path), data, g.mtime_ns)]
    else:
        storage = Path(g.meta.get("storage") or Path(g.path).parent.parent.parent)
        files = [(storage / rel, body, m) for rel, m, body in tree.unbundle(data)]
    return [(p if to is None else Path(to) / _relative(str(p), user_home), d, m) for p, d, m in files]


def _relative(path: str, user_home: Path) -> Path:
    p = Path(path)
    try:
        return p.relative_to(user_home)
    except ValueError:
        return p.relative_to(p.anchor)


def _file_mode(target: Path) -> int:
    """The permission bits a restored file gets: the file's own when it exists (a
    ``--force`` overwrite keeps them), else what the agent gets when it makes a new file:
    0o666 less the user's umask (``config.new_file_mode``: the umask the process started
    with, not the 0o077 the CLI narrows its own to: 0644 under the usual 022; before,
    restored files came back 0600). The vault records no mode (docs/design.md, vault)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return config.new_file_mode()


#: the bytes ``_write_restored`` writes between two looks at a stop (Ctrl-C answered
#: within one piece: ~1 ms in the page cache)
RESTORE_PIECE = 1 << 20


class _Abandoned(Exception):
    """A signal stopped ``_write_restored`` inside a file: the target is untouched."""


def _write_restored(target: Path, data: bytes, mtime_ns: int | None, stop=None) -> None:
    """Write ``data`` to ``target`` through a temporary file beside it (fsync'd, given
    the target's mode and ``mtime_ns``, renamed over it). With ``stop``
    (``maintenance.stopping.Stop``): a signal seen before a piece (``RESTORE_PIECE``
    bytes), before the fsync or before the rename abandons the file: the temporary
    file is removed, the target never touched, ``_Abandoned`` raised. Any error (or a
    second Ctrl-C's KeyboardInterrupt) removes the temporary file too."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.ctxkeep-restore.tmp")
    mode = _file_mode(target)

    def check() -> None:
        if stop is not None and stop.signal is not None:
            raise _Abandoned

    try:
        # written 0600 while the bytes go in, then given the mode (before, it stayed 0600)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                check()
                view = view[os.write(fd, view[:RESTORE_PIECE]) :]
            check()
            os.fsync(fd)
        finally:
            os.close(fd)
        if mtime_ns:
            os.utime(tmp, ns=(mtime_ns, mtime_ns))
        check()
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _pick(conn, path: str, generation: int | None, at: dt.datetime | None) -> manifest.Generation | None:
    """The generation of ``path`` to restore: the newest, generation ``generation``, or
    the newest captured before ``at`` (an aware UTC instant, exclusive: ``--at``'s
    ``timeutil.when_bound(upper=True)``). None when the vault holds no generation of
    it; NotFound (naming the generations it holds) when none fits."""
    if generation is None and at is None:
        return manifest.latest_of(conn, path)
    gens = manifest.generations_of(conn, path)
    if not gens:
        return None
    if generation is not None:
        fit = [g for g in gens if g.gen == generation]
    else:
        assert at is not None
        fit = [g for g in gens if g.created_at and parse_utc(g.created_at) < at]
    if not fit:
        held = ", ".join(f"{g.gen} ({(g.created_at or '?')[:19]})" for g in gens)
        asked = f"generation {generation}" if generation is not None else "generation captured by then"
        raise NotFound(
            f"the vault holds no {asked} of {path}",
            where="vault restore",
            hint=f"its generations (captured, UTC): {held}",
        )
    return fit[-1]


def vault_restore(
    home: Path,
    session: str | None,
    *,
    to: Path | None = None,
    force: bool = False,
    all_missing: bool = False,
    user_home: Path | None = None,
    generation: int | None = None,
    at: dt.datetime | None = None,
    dry_run: bool = False,
) -> dict:
    """Write the native files of ``session`` (an id or its first characters) back from
    the vault's newest generation of each (``generation``: generation N of each file;
    ``at``: the newest generation of each captured before that aware instant, exclusive): at their original paths, or under ``to``
    with the same layout relative to the user's home (``user_home``, default
    ``$HOME``; a path outside it under its full path), each with its original mtime.
    ``all_missing``: every file the vault holds that is missing on disk (no session).
    An sst/opencode JSON tree comes back as its files (session, messages, parts). An
    agent database's session (held as its rows, ``sources.readers.rows``) cannot be
    written back into the agent's database: under ``to`` it comes back as its rows
    document, JSONL (``<to>/<database path>.rows/<session id>.jsonl``: a header line
    naming the database, session and tables' statements, then one line per row,
    redacted as the vault keeps it); without ``to`` it is named in ``skipped_rows``
    (and restoring only such a session is an error saying to pass ``--to``).

    A sidecar's target that already holds the bytes to write is left as it is (not
    listed).
    Nothing is written when one target exists and ``force`` is not given (but for a
    sidecar several sessions share, ``sources.readers.sidecar.SHARED``: on disk, it is
    left as it is, named in ``left_shared``; ``force`` overwrites it too). ``dry_run``:
    nothing is written, each file says whether it ``exists`` (what ``--force`` would
    overwrite). ``all_missing`` restores every file it can: a file it cannot (held only
    from an offset, damaged, not writable) is named in ``not_restored`` with the reason and
    the others are restored all the same. Returns ``{"session", "dry_run", "files":
    [{"path", "to", "bytes", "redactions", "exists"}], "skipped_rows": [databases],
    "not_restored": [{"path", "reason"}], "left_shared": [targets on disk left as they
    are], "interrupted", "not_started"}`` (a SIGINT or
    SIGTERM stops it at once: while the vault is read, before anything is written; in
    a file's write, that file abandoned, its temporary file removed and the target
    untouched (``_write_restored``); ``interrupted`` names the signal, ``not_started``
    counts the files left unwritten; ``maintenance.stopping``). Raises
    ``NotFound`` (no such session, nothing in the vault for it, a generation the vault
    holds only from an offset), ``CtxkeepError`` (a target exists: exit 1), ``VaultDamaged``."""
    user_home = user_home or Path(os.environ.get("HOME") or Path.home())
    from ctxkeep.maintenance.stopping import stop_between_files

    conn = sqlite_store.connect(Path(home), readonly=True)
    try:
        # under the stop from the first read of the vault: a signal while it is read
        # stops before anything is written; one in a file's write abandons that file at
        # once (``_write_restored``). Before, a Ctrl-C while the vault was read raised
        # KeyboardInterrupt, and one in the last file's write was not answered (exit 0)
        with stop_between_files() as stop:
            return _restore(
                conn,
                Path(home),
                session,
                stop,
                to=to,
                force=force,
                all_missing=all_missing,
                user_home=user_home,
                generation=generation,
                at=at,
                dry_run=dry_run,
            )
    finally:
        conn.close()


def _restore(
    conn,
    home: Path,
    session: str | None,
    stop,
    *,
    to: Path | None,
    force: bool,
    all_missing: bool,
    user_home: Path,
    generation: int | None,
    at: dt.datetime | None,
    dry_run: bool,
) -> dict:
    """``vault_restore``'s work on an open store under ``stop``
    (``maintenance.stopping.Stop``); its return value."""
    if all_missing:
        sid = None
        paths = [g.path for g in manifest.generations(conn, latest=True) if not Path(g.disk_path).exists()]
    else:
        sid = resolve_session(conn, session or "")
        paths = session_files(conn, sid)
        if not paths:
            raise NotFound(
                f"the vault holds no file of session {sid}",
                where=str(vault_dir(home)),
                hint=(
                    "its agent keeps it in a database, or it was ingested before the vault: "
                    "run `ctxkeep ingest` while its files exist"
                    if vault.enabled() and vault.configured(home)
                    else "the vault is off (CTXKEEP_VAULT=0 or [vault] enabled = false): ingest kept "
                    "none of its bytes; turn it on and run `ctxkeep ingest` while its files exist"
                ),
            )
    plans = []
    rows_only: list[str] = []  # database sessions, written only under ``to``
    not_restored: list[dict] = []  # (--all-missing) files that cannot be restored, and why
    left_shared: list[str] = []  # shared sidecars on disk, left as they are
    for path in paths:
        if stop.signal is not None:  # Ctrl-C while the vault is read: nothing written
            return _stopped_result(sid, dry_run, rows_only, not_restored, stop, len(paths))
        try:
            g = _pick(conn, path, generation, at)
            if g is None:
                continue
            if to is None and is_relative_stored(g.disk_path):
                # a path stored as typed (``compress FILE`` before newuser24 F1): taken
                # from this process's directory it wrote session files wherever the
                # command ran; ``doctor --repair`` gives it its absolute name
                raise CtxkeepError(
                    f"the vault holds {g.disk_path} under a relative path, which names no one place",
                    where="vault restore",
                    hint="run `ctxkeep doctor --repair` (it merges it into its absolute path), "
                    "or pass --to DIR",
                )
            if g.start != 0 and all_missing:  # never stops the others' recovery
                not_restored.append(
                    {
                        "path": path,
                        "reason": f"the vault holds it only from byte {g.start:,} (restore needs a "
                        "generation kept from its first byte)",
                    }
                )
                continue
            if g.start != 0:
                raise NotFound(
                    f"the vault holds {path} only from byte {g.start}",
                    where=str(vault_dir(home)),
                    hint="restore needs a generation kept from its first byte",
                )
            if g.meta.get("vault_rows") and to is None:
                rows_only.append(g.disk_path)
                continue
            plans.append((g, _targets(g, manifest.gen_bytes(conn, Path(home), g), to, user_home)))
        except CtxkeepError as e:  # (VaultDamaged too)
            if not all_missing:  # one session: its error is the answer
                raise
            # every other lost file is still restored (newuser15 F18: one file the
            # vault held only from an offset stopped the recovery of all of them)
            not_restored.append({"path": path, "reason": _reason(e)})
    if rows_only and not plans and not all_missing:
        raise CtxkeepError(
            f"session {sid} is held as the rows of {rows_only[0]}, which cannot be written back into "
            "the agent's database",
            where="vault restore",
            hint="pass --to DIR to write its rows there as JSONL",
        )
    if all_missing:  # (a tree's files that are on disk stay as they are)
        plans = [(g, [x for x in ts if not (x[0].exists() or x[0].is_symlink())]) for g, ts in plans]
    elif not force:  # a sidecar the folder's sessions share (Kiro IDE's index) on disk
        # stays as it is: it lists the sessions still there, the vault's may be older
        # (the result names it: ``left_shared``)
        for g, ts in plans:
            if g.meta.get(SHARED):
                left_shared += [str(x[0]) for x in ts if x[0].exists() or x[0].is_symlink()]
        plans = [
            (g, [x for x in ts if not (g.meta.get(SHARED) and (x[0].exists() or x[0].is_symlink()))])
            for g, ts in plans
        ]
    if not force:  # a sidecar whose target holds the very bytes to write (a Kiro IDE
        # session's execution log the IDE kept when the session went) is no conflict:
        # left as it is (a transcript's target on disk still is one)
        plans = [(g, [x for x in ts if not (g.meta.get(SIDECAR) and _holds(x[0], x[1]))]) for g, ts in plans]
    exists = [str(t) for _, ts in plans for t, _d, _m in ts if t.exists() or t.is_symlink()]
    if exists and not force and not dry_run:  # a failure (exit 1), not wrong usage: the command was right
        raise CtxkeepError(
            f"{len(exists):,} file{' exists' if len(exists) == 1 else 's exist'}, e.g. {exists[0]}",
            where="vault restore",
            hint="pass --force to overwrite them, or --to DIR",
        )
    done = []
    todo = [(g, t) for g, targets in plans for t in targets]
    not_started = 0
    for i, (g, (target, data, mtime_ns)) in enumerate(todo):
        if stop.signal is not None:  # Ctrl-C or SIGTERM: the rest stay unwritten
            not_started = len(todo) - i
            break
        there = str(target) in exists
        if not dry_run:
            try:
                _write_restored(target, data, mtime_ns, stop)
            except _Abandoned:  # a signal in its write: it and the rest stay unwritten
                not_started = len(todo) - i
                break
            except OSError as e:
                if not all_missing:
                    raise
                not_restored.append({"path": g.path, "reason": f"{target}: {e.strerror or e}"})
                continue
        done.append(
            {
                "path": g.path,
                "to": str(target),
                "bytes": len(data),
                "redactions": g.redactions,
                "exists": there,
            }
        )
    return {
        "session": sid,
        "dry_run": dry_run,
        "files": done,
        "skipped_rows": sorted(set(rows_only)),
        "not_restored": not_restored,
        "left_shared": sorted(set(left_shared)),
        "interrupted": stop.name if not_started else None,
        "not_started": not_started,
    }


def _holds(target: Path, data: bytes) -> bool:
    """Whether ``target`` is a regular file (not a symlink) holding exactly ``data``."""
    try:
        st = os.lstat(target)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        return target.read_bytes() == data
    except OSError:
        return False


def _stopped_result(sid, dry_run: bool, rows_only: list, not_restored: list, stop, n: int) -> dict:
    """The result of a restore a signal stopped while the vault was read: nothing
    written, the ``n`` files not started."""
    return {
        "session": sid,
        "dry_run": dry_run,
        "files": [],
        "skipped_rows": sorted(set(rows_only)),
        "not_restored": not_restored,
        "interrupted": stop.name,
        "not_started": n,
    }


def _reason(e: Exception) -> str:
    """One line of why a file is not restored: the error's message (its hint after
    `` - ``)."""
    hint = getattr(e, "hint", None)
    return str(getattr(e, "message", None) or e) + (f" - {hint}" if hint else "")


__all__ = [
    "AgentStatus",
    "AtRisk",
    "Schedule",
    "cleanup_schedules",
    "session_files",
    "vault_restore",
    "vault_status",
    "vault_verify",
]
