"""Taking files out of the vault (a purge): their manifest rows go in the purge's
transaction (``forget``), their bytes leave the packs afterwards (``sweep``, run by
the purge's completion, ``sinks.recovery``, again after a crash: idempotent).

A pack holding bytes no manifest row uses any more is written again without them (and
without the forgotten files' captures in its record), durably, before the rows move to
it; the old pack is deleted after that commit. The SHA-256 of each forgotten path is
appended (fsync) to ``vault/forgotten`` before the rows go, so a replay of the packs
(``capture.replay``: a lost store) never brings a forgotten file back, even from an
old pack a crash left on disk.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable, Collection
from pathlib import Path

from ctxkeep.sinks.vault import manifest, packs
from ctxkeep.timeutil import now_iso

FORGOTTEN = "forgotten"


def path_hash(path: str) -> str:
    """The SHA-256 hex of a forgotten path as ``vault/forgotten`` keeps it."""
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


def forgotten(home: Path) -> set[str]:
    """The path hashes ``forget`` recorded."""
    p = packs.vault_dir(home) / FORGOTTEN
    try:
        return {ln.strip() for ln in p.read_text().splitlines() if ln.strip()}
    except OSError:
        return set()


def forget(conn, home: Path, paths: list[str]) -> int:
    """Remove the vault's rows of ``paths`` (generations, segments, files) and the
    objects nothing else uses, in the caller's transaction; their hashes are appended
    to ``vault/forgotten`` first. Returns the files forgotten."""
    ids = [
        (r[0], r[1])
        for p in paths
        for r in conn.execute("SELECT vfile_id, path FROM vault_files WHERE path = ?", (p,)).fetchall()
    ]
    if not ids:
        return 0
    d = packs.vault_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / FORGOTTEN, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, "".join(path_hash(p) + "\n" for _, p in ids).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    for vid, _ in ids:
        conn.execute(
            "DELETE FROM vault_media WHERE gen_id IN (SELECT gen_id FROM vault_generations WHERE vfile_id = ?)",
            (vid,),
        )
        conn.execute(
            "DELETE FROM vault_segments WHERE gen_id IN (SELECT gen_id FROM vault_generations WHERE vfile_id = ?)",
            (vid,),
        )
        conn.execute("DELETE FROM vault_generations WHERE vfile_id = ?", (vid,))
        conn.execute("DELETE FROM vault_files WHERE vfile_id = ?", (vid,))
    used = used_objects(conn)
    gone = [r[0] for r in conn.execute("SELECT sha FROM vault_objects") if r[0] not in used]
    conn.executemany("DELETE FROM vault_objects WHERE sha = ?", [(s,) for s in gone])
    return len(ids)


def rows_documents(conn, sessions: Collection[str], whole: Collection[str] = ()) -> list[str]:
    """The vault paths of the rows documents (``sources.readers.rows``: ``meta``
    ``vault_rows``, path ``<db>#session=<id>``) of ``sessions`` (a purge's whole
    sessions, its sub-agents included), and those of a database kept as one document
    (session ``""``) when the database is in ``whole`` (a purge removed it wholly).
    Sorted; empty for a store without the vault's tables."""
    want, dbs = set(sessions), set(whole)
    try:
        rows = conn.execute(
            "SELECT path, json_extract(meta, '$.session'), json_extract(meta, '$.db') FROM vault_files "
            "WHERE json_extract(meta, '$.vault_rows')"
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return sorted(p for p, sid, db in rows if (sid in want and sid) or (not sid and db in dbs))


def preview(conn, paths: Collection[str]) -> dict[str, int]:
    """What ``forget`` of ``paths`` would take out of the vault, changing nothing:
    ``{"vault_files": files the vault holds of them, "vault_bytes": stored (compressed)
    bytes of the objects no other file uses, "vault_raw_bytes": their original bytes}``.
    Zeros for a store without the vault's tables."""
    out = {"vault_files": 0, "vault_bytes": 0, "vault_raw_bytes": 0}
    try:
        gens = {
            r[0]: r[1]
            for p in paths
            for r in conn.execute(
                "SELECT g.gen_id, f.path FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id "
                "WHERE f.path = ?",
                (p,),
            )
        }
        out["vault_files"] = sum(
            conn.execute("SELECT count(*) FROM vault_files WHERE path = ?", (p,)).fetchone()[0] for p in paths
        )
        if not gens:
            return out
        keep = used_objects(conn, exclude=gens)
        mine = used_objects(conn) - keep
        for sha in mine:
            row = conn.execute("SELECT stored, raw FROM vault_objects WHERE sha = ?", (sha,)).fetchone()
            if row:
                out["vault_bytes"] += row[0]
                out["vault_raw_bytes"] += row[1]
    except sqlite3.OperationalError:
        return dict.fromkeys(out, 0)
    return out


def used_objects(conn, exclude: Collection[int] = ()) -> set[bytes]:
    """The SHA-256s of the objects the manifest's generations name (segments, media,
    a version's chunks), those of the generations ``exclude`` (gen ids) left out."""
    ex = set(exclude)
    used = {r[1] for r in conn.execute("SELECT gen_id, sha FROM vault_segments") if r[0] not in ex}
    used.update(r[1] for r in conn.execute("SELECT gen_id, sha FROM vault_media") if r[0] not in ex)
    for g in manifest.generations(conn):
        if g.mode == "document" and g.gen_id not in ex:
            used.update(manifest.object_list(conn, g))
    return used


def ordered_packs(conn, home: Path) -> list[tuple[int, str, Path]]:
    """``(pack_id, name, path)`` of the manifest's packs in replay order (their record's
    ``t``, then name; packs without a record last)."""
    out = []
    for pack_id, name in conn.execute("SELECT pack_id, name FROM vault_packs").fetchall():
        path = packs.pack_path(home, name)
        rec = packs.read_record(path)
        out.append(((rec[0].get("t", 0) if rec else float("inf")), name, pack_id, path))
    out.sort(key=lambda r: (r[0], r[1]))
    return [(pack_id, name, path) for _t, name, pack_id, path in out]


def sweep(
    conn,
    home: Path,
    after_pack: Callable[[], None] | None = None,
    drop: Collection[tuple[str, int]] = (),
) -> int:
    """Write again every pack holding objects no manifest row names or captures of
    forgotten files (or ``drop``: ``(pack name, capture index)`` of captures to leave
    out, retention's pruned generations, ``prune.pruned_captures``), without them,
    then delete the old pack. Returns the packs rewritten. Each pack: new pack durable
    → its rows (one transaction) → old file removed; packs in replay order
    (``ordered_packs``: a pruned file's cut is in its last pack rewritten);
    ``after_pack()`` after each one rewritten."""
    from ctxkeep.sinks import sqlite as sqlite_store

    gone = forgotten(home)
    order = ordered_packs(conn, home)
    pruned = set(drop)
    n = 0
    for pack_id, name, path in order:
        rec = packs.read_record(path)
        if rec is None:
            continue
        record, objects = rec
        keep = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT sha, offset, stored, raw FROM vault_objects WHERE pack_id = ?", (pack_id,)
            )
        }
        caps = [
            c
            for i, c in enumerate(record.get("captures", []))
            if path_hash(c["path"]) not in gone and (name, i) not in pruned
        ]
        if len(keep) == len(objects) and len(caps) == len(record.get("captures", [])):
            continue
        b = packs.PackBuilder()
        for sha, (off, stored, raw) in sorted(keep.items(), key=lambda kv: kv[1][0]):
            b.add(sha, packs.read_object(home, name, off, stored, raw, sha))
        b.record = dict(record, captures=caps) if (caps or keep) else None
        if b.record is not None:
            b.record.pop("objects", None)
        new = packs.write_pack(home, b)
        with sqlite_store.write(conn):
            if new is None:
                conn.execute("DELETE FROM vault_packs WHERE pack_id = ?", (pack_id,))
            else:
                conn.execute(
                    "INSERT OR IGNORE INTO vault_packs(name, bytes, created_at) VALUES(?,?,?)",
                    (new[0], new[1], now_iso()),
                )
                nid = conn.execute("SELECT pack_id FROM vault_packs WHERE name = ?", (new[0],)).fetchone()[0]
                conn.executemany(
                    "UPDATE vault_objects SET pack_id = ?, offset = ?, stored = ? WHERE sha = ?",
                    [(nid, off, st, sha) for sha, off, st, _ in b.objects],
                )
                if nid != pack_id:
                    conn.execute("DELETE FROM vault_packs WHERE pack_id = ?", (pack_id,))
        if new is None or new[0] != name:
            path.unlink(missing_ok=True)
        n += 1
        if after_pack:
            after_pack()
    return n


__all__ = [
    "FORGOTTEN",
    "forget",
    "forgotten",
    "ordered_packs",
    "path_hash",
    "preview",
    "rows_documents",
    "sweep",
    "used_objects",
]
