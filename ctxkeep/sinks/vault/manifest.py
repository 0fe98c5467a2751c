"""Reading the vault back through its manifest (``vault_*`` tables of ``store.db``):
the files and generations held, a generation's bytes (every object checked:
``packs.read_object``), verification, and figures per agent.

A generation's bytes are the redacted bytes: byte-identical to the agent's file when no
secret was redacted in it (``redactions`` is ``{}``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.vault import recipe
from ctxkeep.sinks.vault.packs import (
    ObjectReader,
    VaultDamaged,
    check_pack,
    pack_names,
    pack_path,
    read_object,
)


@dataclass
class Generation:
    """One generation of a file: ``path``, ``agent``, ``mode`` (``append`` /
    ``document``), ``gen`` (1, 2, … per file), ``start`` (file offset of its first
    byte: 0 unless the vault met the file after its start), ``length`` (original
    bytes), ``stored`` (redacted bytes), the stat facts of the last capture
    (``size``, ``mtime_ns``), ``redactions`` per kind, the file's discovery ``meta``."""

    gen_id: int
    vfile_id: int
    path: str
    agent: str
    mode: str
    gen: int
    start: int
    length: int
    stored: int
    size: int | None
    mtime_ns: int | None
    redactions: dict[str, int]
    meta: dict
    created_at: str | None = None
    chunks: bytes | None = field(default=None, repr=False)
    dev: int | None = None
    ino: int | None = None

    @property
    def disk_path(self) -> str:
        """The agent's file this generation came from: ``path``, or for a database's
        rows document (``sources.readers.rows``, ``meta["vault_rows"]``) the database."""
        return str(self.meta.get("db") or self.path) if self.meta.get("vault_rows") else self.path


_GEN_SQL = (
    "SELECT g.gen_id, g.vfile_id, f.path, f.agent, f.mode, g.gen, g.start, g.length, g.stored, g.size, "
    "g.mtime_ns, g.redactions, f.meta, g.created_at, g.chunks, g.dev, g.ino FROM vault_generations g "
    "JOIN vault_files f ON f.vfile_id = g.vfile_id"
)


def _gen(row) -> Generation:
    r = list(row)  # the 17 columns of _GEN_SQL: redactions and meta are JSON text
    r[11], r[12] = json.loads(r[11] or "{}"), json.loads(r[12] or "{}")
    return Generation(*r)


def generations(conn, *, latest: bool = False, agents: list[str] | None = None) -> list[Generation]:
    """Every generation (``latest``: only each file's newest), by path and generation."""
    where, params = [], []
    if latest:
        where.append("g.gen = (SELECT max(gen) FROM vault_generations x WHERE x.vfile_id = g.vfile_id)")
    if agents:
        where.append(f"f.agent IN ({','.join('?' * len(agents))})")
        params += agents
    sql = _GEN_SQL + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY f.path, g.gen"
    return [_gen(r) for r in conn.execute(sql, params).fetchall()]


def latest_of(conn, path: str) -> Generation | None:
    """The newest generation of the file at ``path``, or None."""
    row = conn.execute(_GEN_SQL + " WHERE f.path = ? ORDER BY g.gen DESC LIMIT 1", (path,)).fetchone()
    return _gen(row) if row else None


def generations_of(conn, path: str) -> list[Generation]:
    """Every generation of the file at ``path``, oldest first (``gen`` 1, 2, …)."""
    rows = conn.execute(_GEN_SQL + " WHERE f.path = ? ORDER BY g.gen", (path,)).fetchall()
    return [_gen(r) for r in rows]


def sidecars_of(conn, paths: Collection[str], shared: bool = True) -> list[str]:
    """The paths of the sidecars the vault holds (``sources.readers.sidecar``: files an
    agent keeps beside a transcript, ``vault_files.meta`` ``sidecar_of`` naming it) of
    the transcripts ``paths``, sorted; empty for a store without the vault's tables.
    ``shared``: also those the transcripts' folders share (``sidecar.SHARED``: Kiro
    IDE's ``sessions.json``, which names the folder); a purge of some sessions leaves
    them (``shared=False``: the index names the folder's other sessions too)."""
    if not paths:
        return []
    folders = sorted({os.path.dirname(p) for p in paths}) if shared else []
    try:
        rows = conn.execute(
            "SELECT path FROM vault_files WHERE meta LIKE '%\"sidecar_of\"%' AND "
            "(json_extract(meta, '$.sidecar_of') IN (SELECT value FROM json_each(?1)) OR "
            "(json_extract(meta, '$.shared') AND json_extract(meta, '$.sidecar_of') IN "
            "(SELECT value FROM json_each(?2))))",
            (json.dumps(sorted(paths)), json.dumps(folders)),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return sorted(r[0] for r in rows)


def paths_in_folder(conn, folder: str) -> set[str]:
    """The paths the vault holds directly in ``folder`` (not below it)."""
    return {
        r[0]
        for r in conn.execute(
            "SELECT path FROM vault_files WHERE substr(path, 1, ?) = ?", (len(folder) + 1, folder + os.sep)
        )
        if os.path.dirname(r[0]) == folder
    }


def _objects(conn, shas: list[bytes]) -> dict[bytes, tuple[str, int, int, int]]:
    out = {}
    for sha in set(shas):
        row = conn.execute(
            "SELECT p.name, o.offset, o.stored, o.raw FROM vault_objects o JOIN vault_packs p "
            "ON p.pack_id = o.pack_id WHERE o.sha = ?",
            (sha,),
        ).fetchone()
        if row:
            out[sha] = row
    return out


def read_sha(conn, home: Path, sha: bytes) -> bytes:
    """The bytes of the object ``sha``, checked. Raises ``VaultDamaged``."""
    o = _objects(conn, [sha]).get(sha)
    if o is None:
        raise VaultDamaged(
            f"vault damaged: object {sha.hex()[:16]} is not in the manifest",
            where=f"{STORE_DB} vault_objects",
            hint="run 'ctxkeep vault verify'",
        )
    return read_object(home, o[0], o[1], o[2], o[3], sha)


def pieces(conn, g: Generation) -> list[tuple[bytes, int]]:
    """``g``'s objects in order with the redacted bytes to skip at each one's start
    (segments; a document's chunks skip none)."""
    if g.mode == "document":
        return [(sha, 0) for sha in object_list(conn, g)]
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT sha, skip FROM vault_segments WHERE gen_id = ? ORDER BY seq", (g.gen_id,)
        )
    ]


def capture_extra(conn, home: Path, g: Generation) -> dict:
    """The ``extra`` of the capture that started generation ``g`` (compress's archived
    ids and moves), read from its pack's record; ``{}`` when there is none."""
    from ctxkeep.sinks.vault.packs import read_record

    if g.mode == "document":
        return {}
    row = conn.execute(
        "SELECT s.sha, p.name FROM vault_segments s JOIN vault_objects o ON o.sha = s.sha JOIN vault_packs p "
        "ON p.pack_id = o.pack_id WHERE s.gen_id = ? AND s.seq = 0",
        (g.gen_id,),
    ).fetchone()
    if row is None:
        return {}
    sha, name = row
    for (pname,) in conn.execute("SELECT name FROM vault_packs ORDER BY pack_id DESC"):
        # the capture's record is in the pack written for it: its object's pack, or a
        # later one when the object was held already (the same bytes captured before)
        rec = read_record(pack_path(home, pname))
        if rec is None:
            continue
        for c in rec[0].get("captures", []):
            if (
                c.get("path") == g.path
                and c.get("offset") == g.start
                and (c["pieces"][0][0] if c.get("pieces") else c.get("sha")) == sha.hex()
                and c.get("extra")
            ):
                return c["extra"]
        if pname == name:
            break
    return {}


def object_list(conn, g: Generation) -> list[bytes]:
    """The SHA-256s of ``g``'s objects in order (segments, or a document's chunks)."""
    if g.mode == "document":

        def fetch(gen_id: int) -> bytes | None:
            row = conn.execute("SELECT chunks FROM vault_generations WHERE gen_id = ?", (gen_id,)).fetchone()
            return row[0] if row else None

        try:
            return recipe.decode(g.chunks, fetch)
        except ValueError as e:
            raise VaultDamaged(
                f"vault damaged: the chunk list of {g.path} (generation {g.gen}): {e}",
                where=f"{STORE_DB} vault_generations",
                hint="run 'ctxkeep vault verify'",
            ) from None
    return [
        r[0]
        for r in conn.execute("SELECT sha FROM vault_segments WHERE gen_id = ? ORDER BY seq", (g.gen_id,))
    ]


def gen_bytes(conn, home: Path, g: Generation) -> bytes:
    """The (redacted) bytes of generation ``g``, every object checked. Raises
    ``VaultDamaged`` naming the pack (a missing object: the manifest)."""
    return b"".join(iter_bytes(conn, home, g))


def iter_bytes(conn, home: Path, g: Generation) -> Iterator[bytes]:
    """``gen_bytes`` object by object."""
    ps = pieces(conn, g)
    objs = _objects(conn, [sha for sha, _ in ps])
    with ObjectReader(home) as rd:
        yield from _pieces_bytes(g, ps, objs, rd)


def objects_bytes(conn, home: Path, shas: list[bytes]) -> bytes:
    """The bytes of the objects ``shas`` in order, each checked (a section of a rows
    document's version: ``rows_capture``). Raises ``VaultDamaged``."""
    objs = _objects_many(conn, shas)
    out = []
    with ObjectReader(home) as rd:
        for sha in shas:
            o = objs.get(sha)
            if o is None:
                raise VaultDamaged(
                    f"vault damaged: object {sha.hex()[:16]} is not in the manifest",
                    where=f"{STORE_DB} vault_objects",
                    hint="run 'ctxkeep vault verify'",
                )
            out.append(rd.read(o[0], o[1], o[2], o[3], sha))
    return b"".join(out)


def _objects_many(conn, shas: list[bytes]) -> dict[bytes, tuple[str, int, int, int]]:
    """``_objects`` of many SHA-256s, 500 to a query."""
    out = {}
    todo = list(set(shas))
    for i in range(0, len(todo), 500):
        part = todo[i : i + 500]
        for sha, *o in conn.execute(
            "SELECT o.sha, p.name, o.offset, o.stored, o.raw FROM vault_objects o JOIN vault_packs p "
            f"ON p.pack_id = o.pack_id WHERE o.sha IN ({','.join('?' * len(part))})",
            part,
        ):
            out[sha] = tuple(o)
    return out


def _pieces_bytes(g: Generation, ps, objs: dict, rd: ObjectReader) -> Iterator[bytes]:
    for sha, skip in ps:
        o = objs.get(sha)
        if o is None:
            raise VaultDamaged(
                f"vault damaged: object {sha.hex()[:16]} of {g.path} is not in the manifest",
                where=f"{STORE_DB} vault_objects",
                hint="run 'ctxkeep vault verify'",
            )
        data = rd.read(o[0], o[1], o[2], o[3], sha)
        yield data[skip:] if skip else data


@dataclass
class Problem:
    """One thing ``verify`` found wrong: ``what``, ``where`` (a pack file or the
    manifest) and the agent's ``path`` it affects."""

    what: str
    where: str
    path: str | None = None

    def line(self) -> str:
        """``<what> (<where>)[, holding <path>]``."""
        return f"{self.what} ({self.where})" + (f", holding {self.path}" if self.path else "")


def verify(conn, home: Path, *, full: bool = False, progress=None) -> tuple[int, list[Problem]]:
    """Check every generation against its objects: the segments' sequence (each
    starts where the one before ended, from the generation's start; their lengths sum
    to the generation's), each object's presence, size and SHA-256 (read back and
    decompressed), and the redacted sizes' sum. ``full`` also hashes every pack file
    whole against its name and names the packs no manifest row holds (orphans of a
    crash: harmless). ``progress(done, total)`` after each generation.

    Returns ``(objects checked, problems)``; one problem per damaged pack or
    manifest fault."""
    problems: list[Problem] = []
    bad_packs: set[str] = set()
    checked: set[bytes] = set()
    gens = generations(conn)
    for i, g in enumerate(gens, 1):
        if g.mode != "document":
            segs = conn.execute(
                "SELECT seq, offset, length FROM vault_segments WHERE gen_id = ? ORDER BY seq", (g.gen_id,)
            ).fetchall()
            pos = g.start
            for k, (seq, off, length) in enumerate(segs):
                if seq != k or off != pos:
                    problems.append(
                        Problem(f"segment {seq} out of sequence at offset {off}", STORE_DB, g.path)
                    )
                    break
                pos += length
            else:
                if pos != g.start + g.length:
                    problems.append(
                        Problem("segments do not add up to the generation's length", STORE_DB, g.path)
                    )
        try:
            ps = pieces(conn, g)
        except VaultDamaged as e:
            problems.append(Problem(e.message.removeprefix("vault damaged: "), e.where or "", g.path))
            continue
        if g.mode == "document" and not _list_proves(conn, g, [sha for sha, _ in ps]):
            problems.append(
                Problem("the chunk list does not hash to the version's doc_sha", STORE_DB, g.path)
            )
        objs = _objects(conn, [sha for sha, _ in ps])
        stored = 0
        for sha, skip in ps:
            o = objs.get(sha)
            if o is None:
                problems.append(
                    Problem(f"object {sha.hex()[:16]} missing from the manifest", STORE_DB, g.path)
                )
                continue
            stored += o[3] - skip
            if sha in checked or o[0] in bad_packs:
                continue
            try:
                read_object(home, o[0], o[1], o[2], o[3], sha)
                checked.add(sha)
            except VaultDamaged as e:
                bad_packs.add(o[0])
                problems.append(Problem(e.message.removeprefix("vault damaged: "), e.where or "", g.path))
        if stored != g.stored:
            problems.append(
                Problem(f"objects hold {stored} bytes, the manifest says {g.stored}", STORE_DB, g.path)
            )
        if progress:
            progress(i, len(gens))
    if full:
        known = {r[0] for r in conn.execute("SELECT name FROM vault_packs")}
        for name, p in pack_names(home):
            if name not in known:
                problems.append(
                    Problem("orphan pack (no manifest row: a run stopped before its commit)", str(p))
                )
            elif name not in bad_packs and not check_pack(p, name):
                problems.append(Problem("pack does not hash to its name", str(p)))
        for name in known:
            if not pack_path(home, name).exists():
                problems.append(Problem("pack missing", str(pack_path(home, name))))
    return len(checked), problems


def _list_proves(conn, g: Generation, chunks: list[bytes]) -> bool:
    """Whether a rows document version built on the one before (``rows_state`` set:
    ``rows_capture``) has the ``doc_sha`` of its chunk list; other generations' ``doc_sha``
    is the SHA-256 of their bytes, checked through their objects."""
    try:
        row = conn.execute(
            "SELECT doc_sha, rows_state FROM vault_generations WHERE gen_id = ?", (g.gen_id,)
        ).fetchone()
    except Exception:  # a store before v15: no rows state
        return True
    return row is None or row[1] is None or row[0] == recipe.list_sha(chunks)


def orphan_packs(conn, home: Path) -> list[Path]:
    """Pack files no ``vault_packs`` row names (a crash between the pack's rename and
    the commit): safe to remove."""
    known = {r[0] for r in conn.execute("SELECT name FROM vault_packs")}
    return [p for name, p in pack_names(home) if name not in known]


def figures(conn) -> dict[str, dict]:
    """Per agent: ``files`` (the agents' files: a database whose sessions' rows are
    held counts once), ``generations``, ``raw`` (original bytes of every
    generation; a database's: its rows documents'), ``stored_raw`` (redacted bytes),
    ``redactions`` per kind: the values replaced in the newest generation of each
    file (a database: of each session's rows document), each occurrence in its bytes
    — what ``vault restore`` writes back, so a restore's counts add up to them (a
    document rewritten ten times holding one value counted it ten times before). The
    vault's size on disk is ``packs`` bytes (all agents: objects are shared)."""
    out: dict[str, dict] = {}
    newest: dict[int, tuple[str, int, str | None]] = {}  # vfile → (agent, gen, redactions)
    for agent, path, length, stored, red, vfile, gen in conn.execute(
        "SELECT f.agent, coalesce(json_extract(f.meta, '$.db'), f.path), g.length, g.stored, g.redactions, "
        "g.vfile_id, g.gen FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id"
    ):
        a = out.setdefault(
            agent, {"files": set(), "generations": 0, "raw": 0, "stored_raw": 0, "redactions": {}}
        )
        a["files"].add(path)
        a["generations"] += 1
        a["raw"] += length
        a["stored_raw"] += stored
        if vfile not in newest or gen > newest[vfile][1]:
            newest[vfile] = (agent, gen, red)
    for agent, _gen, red in newest.values():
        reds = out[agent]["redactions"]
        for k, n in json.loads(red or "{}").items():
            reds[k] = reds.get(k, 0) + n
    for a in out.values():
        a["files"] = len(a["files"])
        a["redactions"] = dict(sorted(a["redactions"].items()))
    return out


def packed_bytes(conn) -> tuple[int, dict[str, int]]:
    """``(bytes of every pack, compressed bytes of each agent's objects)``: an object
    counted once per agent however many of its files and generations hold it (an
    object shared by two agents counts for both). ``stored_figures`` adds the store's
    own total and what is shared."""
    figs = stored_figures(conn)
    return figs["pack_bytes"], figs["agents"]


def stored_figures(conn) -> dict:
    """What the vault's objects take, each counted once: ``{"pack_bytes": bytes of
    every pack file, "stored_bytes": compressed bytes of the objects some generation
    holds, "shared_bytes": of those, the objects held more than once (by several
    files, generations, or twice in one), "per_reference_bytes": the sum over every
    reference (what adding up each file's pieces gives), "agents": {agent: compressed
    bytes of its objects}}``. Summing per file counted a shared piece once per file
    holding it, which exceeded the packs on disk (a new user's 2,592,037 "stored"
    beside 2,522,276 bytes of packs). The references are gathered in a temp table (a
    read-only connection makes one too): segments by SQL, a document's chunk list by
    ``object_list``."""
    total = conn.execute("SELECT coalesce(sum(bytes), 0) FROM vault_packs").fetchone()[0]
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS vault_refs(agent TEXT NOT NULL, sha BLOB NOT NULL)")
    conn.execute("DELETE FROM temp.vault_refs")
    try:
        conn.execute(
            "INSERT INTO temp.vault_refs SELECT f.agent, s.sha FROM vault_segments s JOIN vault_generations g "
            "ON g.gen_id = s.gen_id JOIN vault_files f ON f.vfile_id = g.vfile_id"
        )
        for g in generations(conn):
            if g.mode == "document":
                conn.executemany(
                    "INSERT INTO temp.vault_refs VALUES (?, ?)",
                    ((g.agent, sha) for sha in object_list(conn, g)),
                )
        per = {
            a: n or 0
            for a, n in conn.execute(
                "SELECT r.agent, sum(o.stored) FROM (SELECT DISTINCT agent, sha FROM temp.vault_refs) r "
                "JOIN vault_objects o ON o.sha = r.sha GROUP BY r.agent"
            )
        }
        stored, shared, refs = conn.execute(
            "SELECT coalesce(sum(o.stored), 0), coalesce(sum(CASE WHEN r.n > 1 THEN o.stored END), 0), "
            "coalesce(sum(o.stored * r.n), 0) FROM (SELECT sha, count(*) AS n FROM temp.vault_refs GROUP BY sha) r "
            "JOIN vault_objects o ON o.sha = r.sha"
        ).fetchone()
    finally:
        conn.execute("DELETE FROM temp.vault_refs")
    return {
        "pack_bytes": total,
        "stored_bytes": stored,
        "shared_bytes": shared,
        "per_reference_bytes": refs,
        "agents": per,
    }


__all__ = [
    "Generation",
    "Problem",
    "capture_extra",
    "figures",
    "gen_bytes",
    "generations",
    "iter_bytes",
    "latest_of",
    "object_list",
    "objects_bytes",
    "pieces",
    "read_sha",
    "orphan_packs",
    "sidecars_of",
    "packed_bytes",
    "stored_figures",
    "verify",
]
