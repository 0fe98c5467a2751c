"""Pruning a file's older vault generations by retention's policy (``[vault]
keep_generations`` / ``generation_max_age_days``, ``config.VaultConfig``; default: keep
every one): which generations are due, what pruning them frees, and the prune.

A generation is history once its file has a newer one (an append file that shrank or
changed identity, a document's or a database session's earlier version). ``due`` picks,
per file, the generations beyond the newest ``keep`` or superseded (the next one
started) more than ``max_age_days`` ago, and every generation older than one picked:
a file's pruned generations are always its oldest (``gen`` 1..m), and its newest is
never due (ingest appends to it). What the store derives from them is retention's
concern (``maintenance.retention`` keeps those the kept generations cannot stand in
for).

``prune`` (in the caller's transaction):

1. appends to ``vault/pruned`` (fsync) one line per file, the **cut**: its path's
   SHA-256 and the facts of the last capture of its newest pruned generation (an append
   generation: its end offset, size, mtime and inode; a version: its SHA-256 and mtime).
   A pack's record keeps every capture (what rebuilds the manifest without the store,
   ``capture.replay``); ``dropped`` names the captures a cut takes out: every capture of
   the path up to the last one matching the cut, in replay order. A replay leaves them
   out and numbers the kept generations as before (``floors``);
2. writes whole the chunk list of any kept version stored as a delta against a pruned
   one (``recipe``): nothing kept reads through a pruned row;
3. deletes the pruned generations' rows (``vault_media``, ``vault_segments``,
   ``vault_generations``) and the objects nothing kept uses (reference counting:
   objects are content-addressed, an object a kept generation, or any other file, still
   names stays).

The bytes then leave the packs through ``forget.sweep`` (the repack a purge uses: a pack
holding objects no row names, or captures ``dropped`` names, is written again without
them; the old pack goes after the commit). A kill between the commit and the end of the
sweep leaves unreferenced bytes in old packs, which the next sweep (the next retention)
removes; a kill before the commit leaves a cut for generations still held, which a sweep
ignores (``live``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from ctxkeep.sinks.vault import manifest, packs, recipe
from ctxkeep.timeutil import parse_utc

#: the file of cuts under ``<home>/vault``
PRUNED = "pruned"


@dataclass
class Due:
    """A generation ``due`` picked and why (``reason``: ``beyond the newest K``,
    ``superseded <UTC date>`` or ``older than a pruned generation``)."""

    gen: manifest.Generation
    reason: str


def due(
    conn,
    *,
    keep: int | None,
    max_age_days: int | None,
    now: dt.datetime,
) -> list[Due]:
    """The generations the policy drops (module doc), by file and generation; none when
    both ``keep`` and ``max_age_days`` are None (the default: keep). A generation's age
    counts from its next generation's ``created_at`` (when it stopped growing)."""
    if keep is None and max_age_days is None:
        return []
    by: dict[str, list[manifest.Generation]] = {}
    for g in manifest.generations(conn):
        by.setdefault(g.path, []).append(g)
    limit = now - dt.timedelta(days=max_age_days) if max_age_days is not None else None
    out: list[Due] = []
    for gs in by.values():
        reasons: dict[int, str] = {}
        for i in range(len(gs) - 1):
            if keep is not None and i < len(gs) - keep:
                reasons[i] = f"beyond the newest {keep}"
                continue
            since = _time(gs[i + 1].created_at)
            if limit is not None and since is not None and since < limit:
                reasons[i] = f"superseded {since:%Y-%m-%d}"
        if reasons:
            last = max(reasons)
            out += [Due(gs[i], reasons.get(i, "older than a pruned generation")) for i in range(last + 1)]
    return out


def _time(text: str | None) -> dt.datetime | None:
    try:
        return parse_utc(text) if text else None
    except ValueError:
        return None


def freed(conn, gen_ids: Collection[int]) -> tuple[int, int]:
    """``(objects, compressed bytes)`` that pruning ``gen_ids`` takes out of the
    packs: the objects only they use."""
    from ctxkeep.sinks.vault.forget import used_objects

    if not gen_ids:
        return 0, 0
    gone = used_objects(conn) - used_objects(conn, exclude=gen_ids)
    return len(gone), sum(_stored(conn, gone))


def packs_freed(conn, home: Path, gens: list[manifest.Generation]) -> int:
    """About how many bytes of packs a prune of ``gens`` and its sweep free: per pack
    holding an object only they use or a capture their cuts take out, its size less
    the pack written without them (the kept objects' frames, its record without those
    captures, zstd-compressed as ``packs.write_pack`` writes it, and the trailer).
    Changes nothing."""
    import zstandard

    from ctxkeep.sinks.vault.forget import forgotten, ordered_packs, path_hash, used_objects

    if not gens:
        return 0
    ids = {g.gen_id for g in gens}
    gone = used_objects(conn) - used_objects(conn, exclude=ids)
    newest: dict[int, manifest.Generation] = {}
    for g in gens:
        if g.vfile_id not in newest or g.gen > newest[g.vfile_id].gen:
            newest[g.vfile_id] = g
    held = live(conn)
    all_cuts = {h: [c for c in cs if (h, c.get("gen")) not in held] for h, cs in cuts(home).items()}
    for g in newest.values():
        c = cut_of(conn, g)
        all_cuts.setdefault(c["p"], []).append(c)
    order = ordered_packs(conn, home)
    recs = {name: packs.read_record(path) for _pid, name, path in order}
    caps = [
        ((name, i), {k: v for k, v in c.items() if k != "chunks"})
        for _pid, name, _path in order
        for i, c in enumerate((recs[name] or ({}, []))[0].get("captures", []))
        if path_hash(c.get("path", "")) in all_cuts
    ]
    drop = dropped(caps, all_cuts)[0]
    forgot = forgotten(home)
    freed = 0
    zc = zstandard.ZstdCompressor(level=packs.ZSTD_LEVEL)
    for pack_id, name, path in order:
        rec = recs[name]
        if rec is None:
            continue
        record, objects = rec
        rows = conn.execute(
            "SELECT sha, stored, raw FROM vault_objects WHERE pack_id = ? ORDER BY offset", (pack_id,)
        ).fetchall()
        keep = [(sha, st, raw) for sha, st, raw in rows if sha not in gone]
        kept_caps = [
            c
            for i, c in enumerate(record.get("captures", []))
            if (name, i) not in drop and path_hash(c["path"]) not in forgot
        ]
        if len(keep) == len(objects) and len(kept_caps) == len(record.get("captures", [])):
            continue
        size = path.stat().st_size if path.exists() else 0
        if not keep and not kept_caps:
            freed += size
            continue
        new_objects, off = [], 0
        for sha, st, raw in keep:
            new_objects.append([sha.hex(), off, st, raw])
            off += st
        new_rec = {k: v for k, v in record.items() if k != "objects"} | {
            "captures": kept_caps,
            "objects": new_objects,
        }
        frame = zc.compress(json.dumps(new_rec, sort_keys=True).encode())
        freed += max(size - (off + len(frame) + len(packs.TRAILER_MAGIC) + 8), 0)
    return freed


def with_media(conn) -> set[int]:
    """The gen ids holding media compress moved out of their file (``vault_media``)."""
    return {r[0] for r in conn.execute("SELECT DISTINCT gen_id FROM vault_media")}


def packs_bytes(conn) -> int:
    """The bytes of every pack the manifest names (``vault_packs.bytes``)."""
    return conn.execute("SELECT coalesce(sum(bytes), 0) FROM vault_packs").fetchone()[0]


def _stored(conn, shas: Iterable[bytes]) -> list[int]:
    out = []
    for sha in shas:
        row = conn.execute("SELECT stored FROM vault_objects WHERE sha = ?", (sha,)).fetchone()
        if row:
            out.append(row[0])
    return out


def cut_of(conn, g: manifest.Generation) -> dict:
    """The cut of a file whose newest pruned generation is ``g`` (module doc)."""
    from ctxkeep.sinks.vault.forget import path_hash

    cut = {"p": path_hash(g.path), "gen": g.gen, "mode": g.mode, "mtime_ns": g.mtime_ns}
    if g.mode == "document":
        row = conn.execute("SELECT doc_sha FROM vault_generations WHERE gen_id = ?", (g.gen_id,)).fetchone()
        return cut | {"sha": row[0].hex() if row and row[0] else None}
    return cut | {"end": g.start + g.length, "size": g.size, "ino": g.ino}


def matches(capture: dict, cut: dict) -> bool:
    """Whether a pack record's ``capture`` (``capture.Prepared.as_record``) is the last
    capture of the generation ``cut`` names (or a re-read of it that added nothing)."""
    if capture.get("mtime_ns") != cut.get("mtime_ns"):
        return False
    if cut.get("mode") == "document":
        return capture.get("sha") == cut.get("sha")
    return (
        capture.get("offset", 0) + capture.get("length", 0) == cut.get("end")
        and capture.get("size") == cut.get("size")
        and capture.get("ino") == cut.get("ino")
    )


def cuts(home: Path) -> dict[str, list[dict]]:
    """The cuts ``prune`` recorded, by path hash (lines that do not read are skipped)."""
    try:
        text = (packs.vault_dir(home) / PRUNED).read_text()
    except OSError:
        return {}
    out: dict[str, list[dict]] = {}
    for line in text.splitlines():
        try:
            c = json.loads(line)
        except ValueError:
            continue
        if isinstance(c, dict) and isinstance(c.get("p"), str):
            out.setdefault(c["p"], []).append(c)
    return out


def live(conn) -> set[tuple[str, int]]:
    """``(path hash, gen)`` of every generation the manifest holds: a cut naming one
    is of a prune that never committed (killed before it), which a sweep ignores."""
    from ctxkeep.sinks.vault.forget import path_hash

    return {
        (path_hash(p), gen)
        for p, gen in conn.execute(
            "SELECT f.path, g.gen FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id"
        )
    }


def dropped(
    captures: list[tuple[tuple[str, int], dict]],
    all_cuts: dict[str, list[dict]],
    held: set[tuple[str, int]] | None = None,
) -> tuple[set[tuple[str, int]], dict[str, int]]:
    """Of ``captures`` (``(key, capture record)`` in replay order: packs by their
    record's ``t`` then name, each pack's captures in order), the keys of those the
    cuts take out, and per path hash the highest pruned ``gen`` (a replay numbers the
    file's next generation after it). ``held``: ``live`` (cuts of generations still
    held are ignored)."""
    from ctxkeep.sinks.vault.forget import path_hash

    if not all_cuts:
        return set(), {}
    # the kept generations' numbers follow the pruned ones, also once a sweep took the
    # pruned captures (the cut's own among them) out of the records
    floors: dict[str, int] = {}
    for h, cs in all_cuts.items():
        for cut in cs:
            if held is None or (h, cut.get("gen")) not in held:
                floors[h] = max(floors.get(h, 0), int(cut.get("gen") or 0))
    hashes = [path_hash(c.get("path", "")) for _, c in captures]
    last: dict[str, int] = {}
    for i, ((_, c), h) in enumerate(zip(captures, hashes, strict=True)):
        for cut in all_cuts.get(h, ()):
            if held is not None and (h, cut.get("gen")) in held:
                continue
            if matches(c, cut):
                last[h] = i
    out = {k for i, ((k, _), h) in enumerate(zip(captures, hashes, strict=True)) if i <= last.get(h, -1)}
    return out, floors


def pruned_captures(conn, home: Path) -> set[tuple[str, int]]:
    """``(pack name, capture index)`` of the captures the cuts take out of the
    manifest's packs (``dropped`` in replay order; cuts of generations still held
    ignored): what ``forget.sweep(drop=…)`` leaves out of the records it rewrites."""
    from ctxkeep.sinks.vault.forget import ordered_packs, path_hash

    all_cuts = cuts(home)
    if not all_cuts:
        return set()
    caps = []
    for _pid, name, path in ordered_packs(conn, home):
        rec = packs.read_record(path)
        for i, c in enumerate(rec[0].get("captures", []) if rec else []):
            if path_hash(c.get("path", "")) in all_cuts:  # (only the pruned files' captures)
                caps.append(((name, i), {k: v for k, v in c.items() if k != "chunks"}))
    return dropped(caps, all_cuts, live(conn))[0]


def _append_cuts(home: Path, lines: list[str]) -> None:
    d = packs.vault_dir(home)
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d / PRUNED, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, "".join(ln + "\n" for ln in lines).encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def prune(conn, home: Path, gens: list[manifest.Generation]) -> dict:
    """Prune ``gens`` (each file's oldest generations, never its newest: ``due``) in
    the caller's transaction (module doc). Returns ``{"generations", "files",
    "objects"}`` (objects whose rows went; their bytes leave the packs with
    ``forget.sweep``). Raises ValueError when a generation is its file's newest, or
    not its file's oldest held ones; ``VaultDamaged`` when a kept list does not read."""
    from ctxkeep.sinks.sqlite.intents import kill_point
    from ctxkeep.sinks.vault.forget import used_objects

    if not gens:
        return {"generations": 0, "files": 0, "objects": 0}
    ids = {g.gen_id for g in gens}
    by_file: dict[int, list[manifest.Generation]] = {}
    for g in gens:
        by_file.setdefault(g.vfile_id, []).append(g)
    for vid, gs in by_file.items():
        held = [
            r[0]
            for r in conn.execute("SELECT gen FROM vault_generations WHERE vfile_id = ? ORDER BY gen", (vid,))
        ]
        want = sorted(g.gen for g in gs)
        if want != held[: len(want)] or len(want) >= len(held):
            raise ValueError(f"not a prunable run of generations of {gs[0].path}: {want} of {held}")
    _append_cuts(
        home,
        [json.dumps(cut_of(conn, max(gs, key=lambda g: g.gen)), sort_keys=True) for gs in by_file.values()],
    )
    kill_point("vault-prune", "cuts")

    def fetch(gen_id: int) -> bytes | None:
        row = conn.execute("SELECT chunks FROM vault_generations WHERE gen_id = ?", (gen_id,)).fetchone()
        return row[0] if row else None

    for vid in by_file:
        for gid, blob in conn.execute(
            "SELECT gen_id, chunks FROM vault_generations WHERE vfile_id = ? AND chunks IS NOT NULL", (vid,)
        ).fetchall():
            if gid in ids or recipe.base_of(blob) not in ids:
                continue
            try:
                whole = recipe.decode(blob, fetch)
            except ValueError as e:
                raise packs.VaultDamaged(
                    f"vault damaged: a chunk list of {by_file[vid][0].path}: {e}",
                    where="store.db vault_generations",
                    hint="run 'ctxkeep vault verify'",
                ) from None
            conn.execute(
                "UPDATE vault_generations SET chunks = ? WHERE gen_id = ?",
                (recipe.encode(whole, None, None, 0), gid),
            )
    for table in ("vault_media", "vault_segments", "vault_generations"):
        conn.executemany(f"DELETE FROM {table} WHERE gen_id = ?", [(i,) for i in ids])
    used = used_objects(conn)
    gone = [r[0] for r in conn.execute("SELECT sha FROM vault_objects") if r[0] not in used]
    conn.executemany("DELETE FROM vault_objects WHERE sha = ?", [(s,) for s in gone])
    return {"generations": len(ids), "files": len(by_file), "objects": len(gone)}


__all__ = [
    "PRUNED",
    "Due",
    "cut_of",
    "cuts",
    "dropped",
    "due",
    "freed",
    "live",
    "matches",
    "packs_bytes",
    "packs_freed",
    "prune",
    "pruned_captures",
    "with_media",
]
