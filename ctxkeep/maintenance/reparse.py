"""``ctxkeep reparse``: derive the entries, usage, FTS and DuckDB again from the vault
with today's parsers, without the agents' files.

How: under the store lock, a consistent copy of ``store.db`` is made beside the vault
(``vault/tmp/reparse-<pid>/``); in the copy, the entries of the selected agents' vault
files are deleted with what only they use (``sinks.sqlite.delete``: contents, chunks,
FTS rows, usage, quarantine) and their watermarks; then every generation of every such
file, oldest first, is written to a temporary file and read by the agent's own source
as if it were the file at its original path (``sources.readers.jsonl.VIEW``), through
the ingest engine (``pipeline.engine.ingest_files``: the same transform and load).
Statuses maintenance set (``archived`` by compress, ``consumed``) are given back to
the entries that had them. The diff of the copy against the store is the answer; with
``dry_run`` the copy is dropped, else it replaces ``store.db`` in one rename (the store
checkpointed first, its WAL removed before the rename) and DuckDB is rebuilt. A dry
run on a store it may not write (a read-only mount) takes no lock, repairs nothing and
copies into a temp folder outside the store. A kill at
any point leaves the old store or the new one, never a mix; the copy left behind by a
kill is removed by the next reparse.

sst/opencode's JSON tree is one document per session (``sources.readers.tree``): it is
unpacked under the work folder and read there by its source, its paths set back
(``_tree_read``).

An agent database's sessions are rows documents (``sources.readers.rows``): every
generation of every session of one database is rebuilt into one SQLite database (its
tables' own statements (``sqlite_master.sql``), the same rowids and values; a row held again later
replaces the earlier) at the database's path under the work folder, and read there by
its source, the paths set back (``_rows_read``). A database is always derived whole.

Limits: in a file whose secrets were redacted, ``source_offset`` counts the redacted
bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterator
from contextlib import closing
from pathlib import Path

from ctxkeep.pipeline import readahead
from ctxkeep.pipeline.engine import ingest_files
from ctxkeep.sinks import recovery, vault
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import ddl as sqlite_ddl
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite import pool, requarantine
from ctxkeep.sinks.sqlite.readonly import open_ro
from ctxkeep.sinks.vault import manifest
from ctxkeep.sources import as_stored
from ctxkeep.sources.contract import SourceFile, Watermark
from ctxkeep.sources.readers import jsonl as jsonl_reader
from ctxkeep.sources.readers import sidecar

#: the old entry ids of the files a ``reparse(rekey=True)`` keyed anew, each with its
#: new id (``query.fetch.resolve_ids`` follows them): ``ddl.TABLES["entry_aliases"]``
ALIASES_DDL = sqlite_ddl.TABLES["entry_aliases"]
#: statuses that maintenance (not a parser) gives entries, kept through a reparse
KEPT_STATUSES = ("archived", "consumed")
_USAGE_SUMS = (
    "coalesce(sum(input_tokens),0), coalesce(sum(output_tokens),0), coalesce(sum(cache_read_tokens),0), "
    "coalesce(sum(cache_creation_tokens),0), coalesce(sum(cost_usd),0)"
)
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "cost_usd")


def _entries(conn, agents: list[str]) -> dict[str, tuple]:
    q = ",".join("?" * len(agents))
    return {
        r[0]: r[1:]
        for r in conn.execute(
            f"SELECT e.entry_id, e.agent, e.kind, c.content_hash, e.status, e.ts FROM entry_rows e "
            f"LEFT JOIN contents c ON c.content_id = e.content_id WHERE e.agent IN ({q})",
            agents,
        )
    }


def _usage(conn, agents: list[str]) -> dict[str, dict]:
    q = ",".join("?" * len(agents))
    out = {}
    for agent, *sums in conn.execute(
        f"SELECT agent, {_USAGE_SUMS} FROM usage WHERE agent IN ({q}) GROUP BY agent", agents
    ):
        out[agent] = dict(zip(_USAGE_KEYS, sums, strict=True))
    return out


def diff(old_conn, new_conn, agents: list[str]) -> dict:
    """Per agent and kind: entries ``added``, ``removed``, ``changed`` (same id, another
    text, status or time); per agent: usage sums before and after and their delta
    (tokens, ``cost_usd`` as logged)."""
    old, new = _entries(old_conn, agents), _entries(new_conn, agents)
    per: dict[tuple[str, str], Counter] = {}
    for eid in old.keys() | new.keys():
        o, n = old.get(eid), new.get(eid)
        row = n or o
        assert row is not None  # eid is a key of old or new
        key = row[0], row[1]
        c = per.setdefault(key, Counter())
        if o is None:
            c["added"] += 1
        elif n is None:
            c["removed"] += 1
        elif o[2:] != n[2:]:
            c["changed"] += 1
        else:
            c["same"] += 1
    uo, un = _usage(old_conn, agents), _usage(new_conn, agents)
    usage = {}
    for a in sorted(uo.keys() | un.keys()):
        b, f = uo.get(a, dict.fromkeys(_USAGE_KEYS, 0)), un.get(a, dict.fromkeys(_USAGE_KEYS, 0))
        usage[a] = {"before": b, "after": f, "delta": {k: f[k] - b[k] for k in _USAGE_KEYS}}
    return {
        "entries": [
            {"agent": a, "kind": k, **{x: c.get(x, 0) for x in ("added", "removed", "changed", "same")}}
            for (a, k), c in sorted(per.items())
        ],
        "usage": usage,
    }


def differing(old_conn, new_conn, paths: list[str]) -> list[str]:
    """The files of ``paths`` (as entries name their ``source_path``) with an entry of
    ``old_conn`` that ``new_conn`` lacks or holds with another text, status or time."""
    sql = (
        "SELECT f.path, e.entry_id, c.content_hash, e.status, e.ts FROM entry_rows e "
        "JOIN files f ON f.file_id = e.file_id LEFT JOIN contents c ON c.content_id = e.content_id "
        "WHERE f.path IN (SELECT value FROM json_each(?))"
    )

    def rows(conn) -> dict[str, dict[str, tuple]]:
        out: dict[str, dict[str, tuple]] = {}
        for path, eid, *v in conn.execute(sql, (_json(paths),)):
            out.setdefault(path, {})[eid] = tuple(v)
        return out

    old, new = rows(old_conn), rows(new_conn)
    return sorted(p for p, es in old.items() if any(new.get(p, {}).get(e) != v for e, v in es.items()))


@contextlib.contextmanager
def _views(side: dict[str, Path]) -> Iterator[None]:
    """``side`` (original path → the file holding its bytes) in ``readers.jsonl.VIEW``
    for the block (each pass sets them again: its end pops its own files' views), and
    out of it after."""
    jsonl_reader.VIEW.update(side)
    try:
        yield
    finally:
        for p in side:
            jsonl_reader.VIEW.pop(p, None)


def _materialize(conn, home: Path, gens: list[manifest.Generation], work: Path) -> dict[int, Path]:
    """Each generation's bytes in a file of ``work`` (its original mtime): ``gen_id →
    path``. Raises ``VaultDamaged``."""
    out = {}
    for g in gens:
        p = work / f"{g.gen_id}.bin"
        with open(p, "wb") as f:
            for chunk in manifest.iter_bytes(conn, home, g):
                f.write(chunk)
        if g.mtime_ns:
            os.utime(p, ns=(g.mtime_ns, g.mtime_ns))
        out[g.gen_id] = p
    return out


def _tree_read(g: manifest.Generation, doc: Path, work: Path) -> SourceFile:
    """A JSON-tree session's generation (``sources.readers.tree`` document in ``doc``)
    read by its source where it is unpacked (``work/<gen_id>/storage``, the files'
    mtimes set back), its entries' paths and its watermark's set back to the tree the
    vault met (``g.meta["storage"]``, ``g.path``); the batches wait in
    ``readahead.PREREAD`` for the engine. Returns the ``SourceFile`` to ingest.
    Raises ValueError for a document that is not a tree."""
    import dataclasses

    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.readers import tree

    storage = Path(g.meta.get("storage") or Path(g.path).parent.parent.parent)
    root = work / str(g.gen_id) / "storage"
    for rel, mtime_ns, data in tree.unbundle(doc.read_bytes()):
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        os.utime(p, ns=(mtime_ns, mtime_ns))
    try:
        rel_session = Path(g.path).relative_to(storage)
    except ValueError:
        rel_session = Path(Path(g.path).name)
    meta = {k: v for k, v in g.meta.items() if k != "vault_tree"}
    local = SourceFile(g.agent, root / rel_session, "tree", dict(meta, storage=str(root)))
    here, there = str(root), str(storage)
    batches = []
    for b in SOURCES[g.agent].read(local, None):
        for e in b.entries:
            sp = e.get("source_path")
            if isinstance(sp, str) and sp.startswith(here):
                e["source_path"] = there + sp[len(here) :]
        for row in b.quarantine:
            if isinstance(row.get("path"), str) and row["path"].startswith(here):
                row["path"] = there + row["path"][len(here) :]
        wm = b.watermark
        if wm is not None:
            # a generation captured without stat facts keeps them NULL in the store, as
            # before (the watermarks columns are nullable; Watermark types the common case)
            wm = dataclasses.replace(
                wm,
                path=g.path,
                dev=g.dev,  # type: ignore[arg-type]
                ino=g.ino,  # type: ignore[arg-type]
                size=g.size,  # type: ignore[arg-type]
                mtime_ns=g.mtime_ns,  # type: ignore[arg-type]
            )
        batches.append(dataclasses.replace(b, watermark=wm, raw=None))
    readahead.PREREAD[g.path] = batches
    return SourceFile(g.agent, Path(g.path), "tree", meta)


def _set_back(v, here: str):
    """``v`` (an entry's value, nested) with every string naming a path under ``here``
    named under ``/`` again."""
    if isinstance(v, str):
        return v[len(here) :] if v.startswith(here + "/") else v
    if isinstance(v, dict):
        return {k: _set_back(x, here) for k, x in v.items()}
    if isinstance(v, list):
        return [_set_back(x, here) for x in v]
    return v


def _rows_read(conn, home: Path, db: str, gens: list[manifest.Generation], work: Path) -> SourceFile:
    """An agent database's sessions (rows documents, ``sources.readers.rows``; ``gens``
    every generation of them, oldest first) rebuilt into one database at its original
    path under ``work`` (``rows.rebuild``: a row held again later replaces the earlier)
    and read there by its source; every path under ``work`` in the entries (their
    ``source_path``, a project derived from the database's folder) is set back, and the
    watermark names the database as the vault last met it, its state kept (rowid marks,
    digests), so a later ingest of the database still on disk reads only what changed.
    The batches wait in ``readahead.PREREAD``. Returns the ``SourceFile`` to ingest.
    Raises ValueError (a document that is not one), ``VaultDamaged``."""
    import dataclasses

    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.readers import rows

    root = work / str(gens[0].gen_id)
    local = root / Path(db).relative_to(Path(db).anchor)
    local.parent.mkdir(parents=True, exist_ok=True)
    rows.rebuild([manifest.gen_bytes(conn, home, g) for g in gens], local)
    last = max(gens, key=lambda g: g.mtime_ns or 0)
    if last.mtime_ns:  # the database's mtime as the vault met it (Windsurf's tab bubbles take it)
        os.utime(local, ns=(last.mtime_ns, last.mtime_ns))
    agent = last.agent
    meta = dict(last.meta.get("file_meta") or {})
    here = str(root)
    batches = []
    for b in SOURCES[agent].read(SourceFile(agent, local, "sqlite", meta), None):
        if b.raw is not None and not (b.entries or b.quarantine or b.watermark or b.status_changes):
            continue  # (the vault's capture of the rebuilt rows: held already)
        entries = [_set_back(e, here) for e in b.entries]
        quarantine = [_set_back(r, here) for r in b.quarantine]
        wm = b.watermark
        if wm is not None:
            wm = dataclasses.replace(  # (stat facts NULL as above when the vault has none)
                wm,
                path=db,
                dev=last.dev,  # type: ignore[arg-type]
                ino=last.ino,  # type: ignore[arg-type]
                size=last.size,  # type: ignore[arg-type]
                mtime_ns=last.mtime_ns,  # type: ignore[arg-type]
            )
        batches.append(dataclasses.replace(b, entries=entries, quarantine=quarantine, watermark=wm, raw=None))
    readahead.PREREAD[db] = batches
    return SourceFile(agent, Path(db), "sqlite", meta)


def _copy_store(home: Path, dest: Path) -> None:
    src = open_ro(home / STORE_DB)
    dst = sqlite3.connect(dest)
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def _fix_watermarks(conn, latest: list[manifest.Generation]) -> None:
    """The rebuilt watermarks name the agents' files as the vault met them (device,
    inode, size, end offset), not the temporary files read, so a later ingest of an
    unchanged file reads nothing again."""
    for g in latest:
        if g.meta.get("vault_tree") or g.meta.get("vault_rows"):  # (``_tree_read``, ``_rows_read``)
            continue
        conn.execute(
            "UPDATE watermarks SET dev = ?, ino = ?, size = ?, offset = CASE WHEN ? = 'document' THEN ? ELSE ? END "
            "WHERE path = ?",
            (g.dev, g.ino, g.size, g.mode, g.length, g.start + g.length, g.path),
        )


def _judge_tails(conn, latest: list[manifest.Generation], tombs: dict, held: dict) -> None:
    """Judge again, in the rebuilt store ``conn``, the unended last lines of the vaulted
    append files (``sources.readers.jsonl``: a last line without ``\\n`` taken as final
    after the idle time; the vault keeps a file's bytes up to its last ``\\n`` only).
    Read from the agent's file itself, and only where it is still what the vault met
    (device, inode, size: the rebuilt watermark's facts) and holds nothing past the
    watermark but that one line: whatever else it holds is the next ingest's, which
    captures it in the vault. Without this a ``reparse`` (and ``doctor --repair`` and
    ``restore``, which rebuild through it) dropped the line's entries until the next
    ingest judged it again (left19's leftover; ``tests/maintenance/test_unended_rebuild.py``)."""
    from ctxkeep.sinks.sqlite import lookup

    files = [
        g
        for g in latest
        if g.mode != "document" and not g.meta.get("vault_tree") and not g.meta.get("vault_rows")
    ]
    wms = lookup.load_watermarks(conn, [g.path for g in files]) if files else {}
    todo: list[tuple[SourceFile, Watermark | None]] = []
    for g in files:
        wm = wms.get(g.path)
        if wm is None or wm.offset >= wm.size or jsonl_reader.UNENDED_KEY in wm.state:
            continue
        try:
            st = os.stat(g.path)
            if (st.st_dev, st.st_ino, st.st_size) != (wm.dev, wm.ino, wm.size):
                continue  # changed since the vault met it: the next ingest's
            if _ends_a_line_past(Path(g.path), wm.offset):
                continue  # complete lines the vault lacks: the next ingest's
        except OSError:
            continue
        todo.append(
            (as_stored(SourceFile(g.agent, Path(g.path), "append", dict(g.meta)), held.get(g.path)), wm)
        )
    if todo:
        ingest_files(conn, todo, tombs, writer=False)


def _ends_a_line_past(path: Path, offset: int) -> bool:
    """Whether ``path`` holds a ``\\n`` at or after ``offset`` (read in 1 MiB pieces)."""
    with open(path, "rb") as f:
        f.seek(offset)
        while part := f.read(1 << 20):
            if b"\n" in part:
                return True
    return False


def _starts_with(whole: Path, head: Path) -> bool:
    """Whether the bytes of the file ``whole`` begin with all the bytes of ``head``."""
    n = head.stat().st_size
    if whole.stat().st_size < n:
        return False
    with open(whole, "rb") as a, open(head, "rb") as b:
        while n > 0:
            x, y = a.read(min(n, 1 << 20)), b.read(min(n, 1 << 20))
            if x != y or not x:
                return False
            n -= len(x)
    return True


def _undone(g: manifest.Generation, gens: list[manifest.Generation], files: dict[int, Path]) -> bool:
    """Whether a later generation of ``g``'s file undid the compress that wrote ``g``:
    it holds again, from its start, every byte of the generation compress cut (``g``'s
    predecessor): ``compress --restore`` put the backup back (the vault captured it as
    the next generation), or the file came back whole some other way. Unknown (the
    predecessor pruned, or not read here): not undone."""
    prev = next((x for x in gens if x.path == g.path and x.gen == g.gen - 1), None)
    if prev is None or prev.gen_id not in files:
        return False
    return any(
        x.path == g.path
        and x.gen > g.gen
        and x.start == prev.start
        and x.gen_id in files
        and _starts_with(files[x.gen_id], files[prev.gen_id])
        for x in gens
    )


def _compress_written(conn, home: Path, g: manifest.Generation) -> bool:
    """Whether compress wrote generation ``g`` (its capture's ``extra`` names what it
    archived or moved: ``compress.run.vault_capture``)."""
    extra = manifest.capture_extra(conn, home, g)
    return bool(extra.get("archived") or extra.get("moves"))


def _marker_ids(g: manifest.Generation, path: Path | None, state: dict | None = None) -> list[str]:
    """The entry ids of the compress marker records (a line whose record holds a
    ``"ctxkeep"`` object: ``compress.plan``) in generation ``g``'s bytes at ``path``,
    parsed as an ingest parses the file (``compress.plan.line_entries``: the vault's
    lines are redacted already, so their hashes are the ids ingest gave them); [] when
    it holds none or is not here. ``state``: the file's watermark state in the store
    (``sources.as_stored``)."""
    from ctxkeep.maintenance.compress import plan as cp

    if path is None or g.agent not in cp.SUPPORTED:
        return []
    lines, _ = cp.split_lines(path.read_bytes())
    marks = {ln.index for ln in lines if ln.rec and isinstance(ln.rec.get("ctxkeep"), dict)}
    if not marks:
        return []
    ids = cp.line_entry_ids(
        g.agent,
        cp.line_entries(as_stored(SourceFile(g.agent, Path(g.path), "append", dict(g.meta)), state), lines),
    )
    return [x for i in sorted(marks) for x in ids[i]]


def _id_map(
    gens: list[manifest.Generation], files: dict[int, Path], moving: dict[str, dict]
) -> dict[str, dict[str, str]]:
    """For each file of ``moving`` (path → its watermark state in the store, which keys
    it as before: ``sources.as_stored``): old entry id → new, from every generation of
    it in ``files``, each line parsed both ways (``compress.plan.line_entries``; the
    vault's lines are redacted, so their hashes are the ids ingest gave them). Ids a
    line gives alike both ways are left out."""
    from ctxkeep.maintenance.compress import plan as cp

    out: dict[str, dict[str, str]] = {}
    for g in gens:
        if g.path not in moving or g.gen_id not in files or g.meta.get("vault_tree"):
            continue
        lines, _ = cp.split_lines(files[g.gen_id].read_bytes())
        sf = SourceFile(g.agent, Path(g.path), "append", dict(g.meta))
        try:
            old = cp.line_entry_ids(g.agent, cp.line_entries(as_stored(sf, moving[g.path]), lines))
            new = cp.line_entry_ids(g.agent, cp.line_entries(as_stored(sf, None), lines))
        except (KeyError, TypeError):  # (a source without a line parser: its ids do not move)
            continue
        m = out.setdefault(g.path, {})
        for o_ids, n_ids in zip(old, new, strict=True):
            m.update((o, n) for o, n in zip(o_ids, n_ids, strict=True) if o != n)
    return out


def _keep_aliases(conn, idmap: dict[str, dict[str, str]]) -> None:
    """Record ``idmap``'s pairs in ``entry_aliases`` (old id → new; an old id a fork
    shared names one new id per session), so an id a user holds still resolves
    (``query.fetch.resolve_ids``)."""
    conn.execute(ALIASES_DDL)
    conn.executemany(
        "INSERT OR IGNORE INTO entry_aliases(old_id, new_id) VALUES (?, ?)",
        sorted({(o, n) for m in idmap.values() for o, n in m.items()}),
    )


def _compress_changes(
    conn,
    home: Path,
    gens: list[manifest.Generation],
    files: dict[int, Path] | None = None,
    held: dict[str, dict] | None = None,
    idmap: dict[str, dict[str, str]] | None = None,
) -> None:
    """What compress did to the store when it wrote a generation (the removed lines'
    entries ``archived``, the kept ones' new offsets: the capture's ``extra`` in its
    pack's record; the media it moved out: ``vault_media``), done again, in generation
    order; a cut a later generation undid (``_undone``: ``compress --restore``; the
    generations' bytes in ``files``, ``gen_id → path``) is not done again, so the
    entries stay active at their offsets in the restored file, as in the live store,
    and its marker entry is archived, as ``compress --restore`` archived it (a rebuild
    into an empty store left it active: newuser14). ``held``: path → the watermark
    state the store had (``sources.as_stored``: the ids it gave the file); ``idmap``:
    path → old entry id → new, for the files a ``rekey`` moved (the ids compress
    recorded are the old ones)."""
    from ctxkeep.sinks.sqlite import EntryChanges, Relocation, StatusChange
    from ctxkeep.sinks.vault import media as vault_media

    for g in gens:
        if g.gen < 2:  # compress writes a file's second generation or a later one
            continue
        rows = vault_media.rows_of(conn, home, g.gen_id)
        if rows:  # what compress moved out of the file, as it stored it
            with sqlite_store.write(conn):
                sqlite_store.put_media(conn, rows)
        extra = manifest.capture_extra(conn, home, g)
        if not extra:
            continue
        if _undone(g, gens, files or {}):
            # ``compress --restore`` archived the marker this generation wrote (it left
            # the file); a rebuild into an empty store has no status to keep for it
            marker = _marker_ids(g, (files or {}).get(g.gen_id), (held or {}).get(g.path))
            if marker:
                sqlite_store.apply_changes(conn, [StatusChange("archived", tuple(marker))])
            continue
        ids = (idmap or {}).get(g.path, {})
        if extra.get("archived"):
            archived = tuple(ids.get(x, x) for x in extra["archived"])
            sqlite_store.apply_changes(conn, [StatusChange("archived", archived)])
        if extra.get("moves"):
            moves = tuple((ids.get(i, i), off) for i, off in extra["moves"])
            sqlite_store.apply_changes(conn, EntryChanges(moves=[Relocation(g.path, moves)]))


def reparse(
    home: Path,
    *,
    agents: list[str] | None = None,
    since_ns: int | None = None,
    paths: list[str] | None = None,
    dry_run: bool = False,
    progress=None,
    exclude: Collection[int] = (),
    rekey: bool = False,
) -> dict:
    """Rebuild the selected agents' derivation from the vault (see the module doc).
    ``agents``: None for every agent the vault holds; ``since_ns``: only files whose
    newest generation's mtime is at or after it; ``paths``: only these files (as the
    manifest names them; ``backfill`` of files gone from disk). ``progress(phase)`` names each phase.
    ``exclude``: generations (gen ids) left out, as if pruned (retention asks, with
    ``dry_run``, whether the kept generations stand in for them); the answer then
    also has ``differing``: the files whose entries the derivation would remove or
    change (``differing``). ``rekey``: files a store keyed as before (a Claude Code
    file keyed by uuid alone: ``sources.as_stored``) are keyed as a new read keys them
    (``<session>:<uuid>``: a fork holds its whole history); the statuses and compress's
    records follow their ids (``_id_map``) and ``entry_aliases`` keeps old → new. Without
    it each file keeps the ids the store gave it.

    Returns ``{"dry_run", "agents", "files" (vault files: a database's rows documents
    each), "agent_files" (the agents' files, a database once), "generations", "diff": diff(), "notes",
    "seconds"}``. Raises StoreError (no store), StoreBusy, VaultDamaged (an object does
    not read back: nothing changed)."""
    t0 = time.perf_counter()
    home = Path(home)
    say = progress or (lambda _p: None)
    sqlite_store.connect(home, readonly=True).close()  # StoreError "no store yet": never made here
    # a dry run writes nothing to the store: on a read-only store (a read-only mount, a
    # folder not writable) it takes no lock, repairs nothing and works in a temp folder
    # outside it (before: refused, the lock file could not be made)
    ro = dry_run and not os.access(home, os.W_OK)
    with contextlib.nullcontext() if ro else hold(home, what="reparse"):
        live = sqlite_store.connect(home, readonly=ro)
        try:
            if not ro:
                recovery.recover(live, home)
            gens = manifest.generations(live, agents=agents)
        finally:
            live.close()
        if not dry_run:  # refused before the work, not after it (``_swap`` asks again)
            pool.wait_unopened(home, "reparse")
        if exclude:
            out_ids = set(exclude)
            gens = [g for g in gens if g.gen_id not in out_ids]
        latest: dict[str, manifest.Generation] = {}
        for g in gens:
            latest[g.path] = g
        if since_ns is not None or paths is not None:
            want = set(paths) if paths is not None else None
            keep = {
                p
                for p, g in latest.items()
                if (since_ns is None or (g.mtime_ns or 0) >= since_ns)
                and (want is None or p in want or g.disk_path in want)
            }
            # a database is derived whole: every session of one kept
            dbs = {g.disk_path for p, g in latest.items() if p in keep and g.meta.get("vault_rows")}
            keep |= {p for p, g in latest.items() if g.meta.get("vault_rows") and g.disk_path in dbs}
            # a transcript's sidecars with it (its parser reads them: Vibe's ``meta.json``)
            # (Kiro IDE's index: with any session of its folder, ``sidecar.belongs``)
            keep |= {
                p for p, g in latest.items() if g.meta.get(sidecar.SIDECAR) and sidecar.belongs(g.meta, keep)
            }
            gens = [g for g in gens if g.path in keep]
            latest = {p: g for p, g in latest.items() if p in keep}
        # a database's sessions (rows documents) are read together, once, after the files
        by_db: dict[str, list[manifest.Generation]] = {}
        for g in sorted((g for g in gens if g.meta.get("vault_rows")), key=lambda g: g.gen_id):
            by_db.setdefault(g.disk_path, []).append(g)
        gens = [g for g in gens if not g.meta.get("vault_rows")]
        chosen = sorted({g.agent for g in gens} | {gs[0].agent for gs in by_db.values()})
        if ro:
            work = Path(tempfile.mkdtemp(prefix="ctxkeep-reparse-"))
        else:
            tmp = vault.vault_dir(home) / "tmp"
            for old in tmp.glob("reparse-*"):  # a copy a killed reparse left
                shutil.rmtree(old, ignore_errors=True)
            work = tmp / f"reparse-{os.getpid()}"
        (work / "gens").mkdir(parents=True)
        (work / "store").mkdir()
        try:
            say("copying the store")
            _copy_store(home, work / "store" / STORE_DB)
            new = sqlite_store.connect(work / "store")
            try:
                paths = sorted({g.disk_path for g in latest.values()})
                if paths:
                    # what the vault's redacted bytes cannot give back: the raw lines'
                    # hashes of the quarantine (``sinks.sqlite.requarantine``)
                    qpaths = sorted(set(paths) | {g.path for g in latest.values()})
                    kept_q = requarantine.facts(new, qpaths)
                    # each file keyed as the store keyed it (``sources.as_stored``: a
                    # Claude Code file read before records were keyed by session keeps
                    # its uuid ids, which statuses and compress's records name)
                    held = {p: w.state for p, w in sqlite_store.load_watermarks(new, paths).items()}
                    moving: dict[str, dict] = {}
                    if rekey:
                        for g in latest.values():
                            sf = SourceFile(g.agent, Path(g.path), "append", dict(g.meta))
                            st = held.get(g.path)
                            if st is not None and as_stored(sf, st).meta != as_stored(sf, None).meta:
                                moving[g.path] = held.pop(g.path)
                    say("removing the old derivation")
                    statuses = new.execute(
                        "SELECT e.entry_id, e.status, f.path FROM entry_rows e JOIN files f ON f.file_id = e.file_id "
                        f"WHERE e.status IN ({','.join('?' * len(KEPT_STATUSES))}) AND f.path IN "
                        "(SELECT value FROM json_each(?))",
                        (*KEPT_STATUSES, _json(paths)),
                    ).fetchall()
                    with sqlite_store.write(new):
                        delete_store.select_where(
                            new,
                            "source_path IN (SELECT value FROM json_each(?))",
                            (_json(paths),),
                        )
                        delete_store.delete_selected(new)
                        delete_store.drop_selection(new)
                        new.execute(
                            "DELETE FROM watermarks WHERE path IN (SELECT value FROM json_each(?))",
                            (_json(paths),),
                        )
                    say("reading the vault")
                    files = _materialize(new, home, gens, work / "gens")
                    tombs = sqlite_store.tombstoned(new)
                    # generations compress wrote: the unparsable lines they kept are
                    # quarantined once, where ingest met them (``requarantine``)
                    by_compress = {g.gen_id for g in gens if g.gen >= 2 and _compress_written(new, home, g)}
                    # compress's records of a file the store no longer keys as before (a
                    # rekey, or a store rebuilt without it: ``doctor --repair``) name the
                    # old ids: translated too (``moving``'s legacy state: ``{}``)
                    for g in gens:
                        if g.gen_id in by_compress and g.path not in held and g.path not in moving:
                            moving[g.path] = {}
                    idmap = _id_map(gens, files, moving) if moving else {}
                    passes: dict[int, list[manifest.Generation]] = {}
                    for g in gens:
                        passes.setdefault(g.gen, []).append(g)
                    # the newest version of each sidecar (``sources.readers.sidecar``),
                    # where a parser reading beside its transcript finds it (Vibe's
                    # ``meta.json``: the session's id, project and usage), every pass
                    side = {p: files[g.gen_id] for p, g in latest.items() if g.meta.get(sidecar.SIDECAR)}
                    with vault.suspended(), _views(side):
                        for n in sorted(passes):
                            say(f"parsing generation {n}")
                            todo: list[tuple[SourceFile, Watermark | None]] = []
                            for g in passes[n]:
                                if g.meta.get("vault_tree"):  # sst/opencode's JSON tree
                                    sf = _tree_read(g, files[g.gen_id], work / "trees")
                                else:
                                    jsonl_reader.VIEW[g.path] = files[g.gen_id]
                                    mode = "rewrite" if g.mode == "document" else "append"
                                    sf = as_stored(
                                        SourceFile(g.agent, Path(g.path), mode, dict(g.meta)),
                                        held.get(g.path),
                                    )
                                todo.append((sf, None))
                            jsonl_reader.VIEW.update(side)
                            before_q = requarantine.last_id(new)
                            try:
                                ingest_files(new, todo, tombs, writer=False)
                            finally:
                                for g in passes[n]:
                                    jsonl_reader.VIEW.pop(g.path, None)
                                    readahead.PREREAD.pop(g.path, None)
                            after_q = requarantine.last_id(new)
                            for g in passes[n]:
                                if g.gen_id in by_compress:
                                    requarantine.drop_repeats(new, g.path, before_q, after_q)
                        if by_db:
                            say("parsing the databases' rows")
                            db_files: list[tuple[SourceFile, Watermark | None]] = [
                                (_rows_read(new, home, db, gs, work / "rows"), None)
                                for db, gs in sorted(by_db.items())
                            ]
                            try:
                                ingest_files(new, db_files, tombs, writer=False)
                            finally:
                                for db in by_db:
                                    readahead.PREREAD.pop(db, None)
                    say("applying compress's changes")
                    _compress_changes(new, home, gens, files, held, idmap)
                    requarantine.settle(new, qpaths, kept_q)
                    with sqlite_store.write(new):
                        _fix_watermarks(new, list(latest.values()))
                        for eid, st, path in statuses:
                            new.execute(
                                "UPDATE entry_rows SET status = ? WHERE entry_id = ? AND status = 'active'",
                                (st, idmap.get(path, {}).get(eid, eid)),
                            )
                        if idmap:
                            _keep_aliases(new, idmap)
                    # unended last lines an ingest judged final: the vault's generation
                    # ends at their start; judged again now from the agent's file
                    say("judging unended last lines")
                    with vault.suspended():
                        _judge_tails(new, list(latest.values()), tombs, held)
                old = sqlite_store.connect(home, readonly=True)
                try:
                    d = diff(old, new, chosen) if chosen else {"entries": [], "usage": {}}
                    if exclude:
                        d["differing"] = differing(old, new, paths)
                finally:
                    old.close()
                new.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                new.close()
            if not dry_run and chosen:
                say("installing the new store")
                _swap(home, work / "store" / STORE_DB)
                conn = sqlite_store.connect(home)
                try:
                    recovery.rebuild_analytics(conn, home)
                finally:
                    conn.close()
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return {
        "dry_run": dry_run,
        "agents": chosen,
        "files": len(latest),
        # the agents' files, a database once (as `vault status` counts them): ``files`` counts
        # each of its sessions' rows documents
        "agent_files": len({g.disk_path for g in latest.values()}),
        "generations": len(gens) + sum(len(gs) for gs in by_db.values()),
        "diff": {k: v for k, v in d.items() if k != "differing"},
        **({"differing": d.get("differing", [])} if exclude else {}),
        "notes": (
            ["a database's sessions are derived from the rows the vault holds (a database rebuilt from them)"]
            if by_db
            else []
        ),
        "seconds": round(time.perf_counter() - t0, 3),
    }


#: the vault's manifest tables, in the order their rows are deleted
MANIFEST_TABLES = (
    "vault_media",
    "vault_segments",
    "vault_generations",
    "vault_files",
    "vault_objects",
    "vault_packs",
)


def from_vault(home: Path, progress=None) -> list[str]:
    """Make the store at ``home`` (a store backup just installed, older than the vault)
    agree with the vault, then derive every vaulted file from it: the manifest is
    rebuilt from the packs on disk (its rows deleted, every pack's record replayed:
    ``sinks.vault.capture.replay``, which skips the files a purge forgot; a backup's rows
    may name packs a purge's sweep replaced), then ``reparse`` of every agent the vault
    holds. Returns the actions' lines (none when the vault has no pack). Raises what
    ``reparse`` raises."""
    from ctxkeep.sinks.vault import capture, packs

    home = Path(home)
    if not packs.pack_names(home):
        return []
    out = []
    with hold(home, what="reparse"):
        conn = sqlite_store.connect(home)
        try:
            with sqlite_store.write(conn):
                for t in MANIFEST_TABLES:
                    conn.execute(f"DELETE FROM {t}")
                n = capture.replay(conn, home)
        finally:
            conn.close()
        out.append(f"rebuilt the vault's manifest from {n:,} packs")
        r = reparse(home, progress=progress)
    added = sum(e["added"] for e in r["diff"]["entries"])
    out.append(f"derived the entries of {r['files']:,} files from the vault ({added:,} added)")
    return out


def _json(values: list[str]) -> str:

    return json.dumps(values)


def _swap(home: Path, new_db: Path) -> None:
    """Put ``new_db`` in place of ``store.db``: the store checkpointed (its WAL emptied)
    and its ``-wal``/``-shm`` removed first, so no WAL of the old database meets the new
    one; then one rename. Raises StoreBusy (nothing changed) when another process keeps
    the store open past ``pool.READERS_WAIT`` (``wait_unopened``)."""
    db = home / STORE_DB
    with closing(sqlite3.connect(db)) as c:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    # a reader of another process would read the new store through the old WAL index
    pool.wait_unopened(home, "reparse")
    for side in ("-wal", "-shm"):
        try:
            os.remove(str(db) + side)
        except FileNotFoundError:
            pass
    for side in ("-wal", "-shm"):
        try:
            os.remove(str(new_db) + side)
        except FileNotFoundError:
            pass
    os.replace(new_db, db)


__all__ = ["KEPT_STATUSES", "MANIFEST_TABLES", "diff", "differing", "from_vault", "reparse"]
