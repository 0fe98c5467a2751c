"""A database session's rows document (``sources.readers.rows``) captured as a version
built on the one the vault holds: only the lines the reader says changed are redacted
and chunked, the unchanged ones are referenced by their chunks (issue 27; the hook
path of a heavy OpenCode/Crush user paid ~3 CPU s per turn re-chunking whole
documents).

**Sections.** A rows document is its header line, then one section per declared table
(its rows by rowid). Each section is chunked alone (FastCDC, ``capture.chunks_of``,
cut at the section's start): an append to the ``messages`` section leaves the
``part`` section's chunks as they were, even though its bytes moved. The version's
chunk list is the sections' lists in order; its bytes are the chunks' bytes in order,
as for every document.

**What the reader sends** (``RawCapture.meta``): ``rows_layout`` = ``[[table, keep,
new], …]`` per section in document order: the first ``keep`` lines of the base
version's section stay, then come ``new`` lines of ``data`` (after the header line,
which every capture carries); ``rows_base``: the reader's token of the base version
(None or absent: a whole document, every ``keep`` 0); ``rows_marks``: its token of
this version.

**The running state** (``vault_generations.rows_state``, JSON; also in the pack's
record, so a replay rebuilds it): ``{"v": 1, "marks": token, "sections": [[table,
lines, raw bytes, redacted bytes, chunks, tail, redactions], …]}`` (table ``""``:
the header), ``tail`` the ``[raw, redacted]`` lengths of the section's last
``rows.TAIL_LINES`` lines (a third member: the values redacted in that line per
kind). A version keeping ``keep`` lines of a section needs the redacted offset ``P``
of its line ``keep``, so at most ``TAIL_LINES`` lines can be dropped (the reader sends
the whole section otherwise). The chunks ending at or before ``P`` are kept; FastCDC
restarts at the start of the chunk holding ``P`` (its first ``P - start`` bytes read
back from the vault, checked) over those bytes and the new lines: FastCDC's cut
depends only on the bytes since the chunk's start, so the list is the one chunking the
whole section would give (tested against it).

**Proof of a version** (``doc_sha``): for a rows document captured this way, the
SHA-256 of its chunk list (the 32-byte hashes concatenated), not of its bytes: the
bytes are never all in hand. Each chunk is an object checked by its own SHA-256 on
read, so the chunk list's hash proves the version's bytes as the byte hash did
(``manifest.verify`` checks it against the stored list); two captures of the same rows
give the same chunks, so a version held is still skipped. Generations written before
(``rows_state`` NULL) keep the byte hash and are read as before; a next version of
such a session is a whole document (no state to build on).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ctxkeep.sinks.vault import recipe
from ctxkeep.sinks.vault.recipe import list_sha
from ctxkeep.sources.contract import RawCapture
from ctxkeep.sources.readers.rows import TAIL_LINES

if TYPE_CHECKING:
    from ctxkeep.sinks.vault.manifest import Generation

#: ``[(redacted line, values redacted per kind)]`` of lines, each redacted alone
#: (``capture.redact_raw_many``)
RedactLines = Callable[[list[bytes]], list[tuple[bytes, Counter]]]
#: content-defined chunks of bytes (``capture.chunks_of``)
Chunker = Callable[[bytes], list[bytes]]

#: version of ``rows_state``
STATE_V = 1


def _layout_of(lines: list[bytes]) -> list[list]:
    """``[[table, 0, lines], …]`` of a whole rows document's row lines (after the header),
    read from each line's last member ``"t"`` (keys are sorted: ``row``, ``rowid``,
    ``t``): for a capture made without ``rows_layout``."""
    out: list[list] = []
    for ln in lines:
        body = ln.rstrip(b"\r\n")
        i = body.rfind(b',"t":')
        table = json.loads(body[i + 5 : -1]) if i >= 0 else ""
        if out and out[-1][0] == table:
            out[-1][2] += 1
        else:
            out.append([table, 0, 1])
    return out


def _base(conn, path: str, token: str) -> tuple[Generation, dict] | None:
    """``(generation, state)`` of the newest generation of ``path`` whose state's marks
    are ``token``, or None."""
    from ctxkeep.sinks.vault import manifest

    rows = conn.execute(
        "SELECT g.gen_id, g.rows_state FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id "
        "WHERE f.path = ? AND g.rows_state IS NOT NULL ORDER BY g.gen DESC",
        (path,),
    ).fetchall()
    for gen_id, text in rows:
        try:
            st = json.loads(text)
        except ValueError:
            continue
        if st.get("v") == STATE_V and st.get("marks") == token:
            g = next((x for x in manifest.generations_of(conn, path) if x.gen_id == gen_id), None)
            if g is not None:
                return g, st
    return None


def held_marks(conn, db: str) -> dict[str, set[str]]:
    """Session id → the reader's tokens (``rows_marks``) of the versions of its rows the
    vault holds with a state, for the database at ``db`` (``pipeline.plan``: a
    watermark naming a version the vault lacks is not built on)."""
    from ctxkeep.sources.readers.rows import SEP

    prefix = db + SEP
    out: dict[str, set[str]] = {}
    try:
        rows = conn.execute(
            "SELECT f.path, g.rows_state FROM vault_generations g JOIN vault_files f ON f.vfile_id = g.vfile_id "
            "WHERE substr(f.path, 1, ?) = ? AND g.rows_state IS NOT NULL",
            (len(prefix), prefix),
        ).fetchall()
    except Exception:  # a store before v15 (read-only plan): nothing to build on
        return out
    for path, text in rows:
        try:
            token = json.loads(text).get("marks")
        except ValueError:
            continue
        if token:
            out.setdefault(path[len(prefix) :], set()).add(token)
    return out


def _sizes(conn, shas: list[bytes]) -> dict[bytes, int]:
    out: dict[bytes, int] = {}
    todo = list(set(shas))
    for i in range(0, len(todo), 500):
        part = todo[i : i + 500]
        out.update(
            conn.execute(
                f"SELECT sha, raw FROM vault_objects WHERE sha IN ({','.join('?' * len(part))})", part
            )
        )
    return out


#: lines a section sent whole must have for the held section's clean lines to be read
#: back (``_redacted``)
REUSE_MIN_LINES = 32


def _redacted(
    lines: list[bytes],
    layout: list,
    base_secs: dict,
    conn,
    home: Path | None,
    path: str,
    redact_lines: RedactLines,
) -> list[tuple[bytes, Counter]]:
    """Each of ``lines`` redacted alone (``redact_lines``: the header and the lines sent).
    A section sent whole though the version held has it (a row rewritten more than
    ``TAIL_LINES`` lines back, a row deleted) is mostly the held lines again: the held
    section is read back (its chunks, each checked) and a line equal to one of its
    lines without a marker is taken as it is (redaction is per line and leaves a clean
    line unchanged), so only the changed lines are scanned. A whole document (no base:
    the first capture after the v15 upgrade, a base the vault lost) does the same with
    the newest version of ``path`` the vault holds, if any."""
    from ctxkeep.sinks.vault import manifest

    clean: set[bytes] = set()
    held: bytes = b""
    if not base_secs and conn is not None and home is not None and len(lines) > REUSE_MIN_LINES:
        try:
            g = manifest.latest_of(conn, path)
            held = manifest.gen_bytes(conn, home, g) if g is not None else b""
        except manifest.VaultDamaged:  # every line is scanned
            held = b""
    for table, keep, n in layout:
        if keep == 0 and n >= REUSE_MIN_LINES and table in base_secs and home is not None:
            held += manifest.objects_bytes(conn, home, base_secs[table][1])
    clean.update(ln for ln in held.splitlines(keepends=True) if b"[REDACTED:" not in ln)
    todo = [i for i, ln in enumerate(lines) if ln not in clean]
    got = redact_lines([lines[i] for i in todo])
    out: list[tuple[bytes, Counter]] = [(ln, Counter()) for ln in lines]
    for i, r in zip(todo, got, strict=True):
        out[i] = r
    return out


class BaseMissing(Exception):
    """The version a capture is built on is not in the vault (or does not fit it)."""


@dataclass
class SealedRows:
    """A rows document version made ready (``seal_rows``): as ``capture.Sealed`` (the
    original bytes' size, ``doc_sha``, redacted size, chunk list, values redacted per
    kind, ``(sha, zstd frame, size)`` of the chunks the vault lacks) and its ``state``."""

    length: int
    sha: bytes
    stored: int
    chunks: list[bytes]
    redactions: dict[str, int]
    objects: list[tuple[bytes, bytes, int]]
    state: dict
    #: the chunk list as the pack's record keeps it when built on a version held:
    #: ``{"base": <its doc_sha, hex>, "ops": <recipe delta against its list, base64>}``
    #: (a whole list of hex hashes per version grew as the square of the versions)
    delta: dict | None = None


def record_delta(chunks: list[bytes], base: list[bytes], base_sha: bytes) -> dict | None:
    """``SealedRows.delta`` of ``chunks`` against the list ``base`` of the version
    ``base_sha``; None when a delta is not smaller."""
    blob = recipe.encode(chunks, base, 0, 0)
    if blob[:1] != b"D":
        return None
    return {"base": base_sha.hex(), "ops": base64.b64encode(blob).decode("ascii")}


def resolve_delta(conn, path: str, delta: dict) -> list[bytes] | None:
    """The chunk list a record's ``delta`` names (``SealedRows.delta``), from the
    generation of ``path`` whose ``doc_sha`` is its base (a replay records the packs in
    the order written, so the base is there); None when it is not (pruned)."""
    from ctxkeep.sinks.vault import manifest

    base = bytes.fromhex(delta["base"])
    for g in reversed(manifest.generations_of(conn, path)):
        row = conn.execute("SELECT doc_sha FROM vault_generations WHERE gen_id = ?", (g.gen_id,)).fetchone()
        if row and row[0] == base:
            return _decoded_delta(delta["ops"], b"F" + b"".join(manifest.object_list(conn, g)))
    return None


def _decoded_delta(ops: str, whole: bytes) -> list[bytes] | None:
    """The list of a record's delta ``ops`` against the stored list ``whole``."""
    try:
        return recipe.decode(base64.b64decode(ops), lambda _: whole)
    except ValueError:
        return None


def seal_rows(
    raw: RawCapture,
    conn,
    home: Path | None,
    held: Callable[[bytes], bool],
    held_of: Callable[[list[bytes]], set[bytes]],
    redact_lines: RedactLines,
    chunks_of: Chunker,
) -> SealedRows:
    """``raw`` (a rows document capture, see the module doc) made ready for a pack,
    its lines redacted by ``redact_lines`` and its sections cut by ``chunks_of``.
    Raises ``BaseMissing`` when its base version is not held or does not fit the layout
    (the caller skips the capture: the plan then has the reader send the whole
    document), ``VaultDamaged`` when a chunk read back is. ``conn`` and ``home`` None
    (a reader process, ``capture.seal``): no vault to read, so only a whole document
    (no ``rows_base``) is sealed, every line redacted."""
    from ctxkeep.sinks.vault import manifest
    from ctxkeep.sinks.vault.packs import compress

    lines = raw.data.splitlines(keepends=True)
    if not lines:
        raise BaseMissing("an empty rows document")
    layout = raw.meta.get("rows_layout") or _layout_of(lines[1:])
    token = raw.meta.get("rows_base")
    base_secs: dict[str, tuple[list, list[bytes]]] = {}
    base_list: tuple[list[bytes], bytes] | None = None
    if token is not None:
        if conn is None or home is None:
            raise BaseMissing("no manifest to build on")
        found = _base(conn, raw.path, token)
        if found is None:
            raise BaseMissing(f"the base version {token} is not held")
        g, st = found
        blist = manifest.object_list(conn, g)
        base_list = (
            blist,
            conn.execute("SELECT doc_sha FROM vault_generations WHERE gen_id = ?", (g.gen_id,)).fetchone()[0],
        )
        at = 0
        for sec in st["sections"]:
            base_secs[sec[0]] = (sec, blist[at : at + sec[4]])
            at += sec[4]
    if sum(n for _, _, n in layout) != len(lines) - 1:
        raise BaseMissing("the layout does not match the document's lines")
    red = _redacted(lines, layout, base_secs, conn, home, raw.path, redact_lines)
    sections: list[list] = []
    chunks: list[bytes] = []
    fresh: list[tuple[bytes, bytes]] = []  # (hash, bytes) of chunks made now
    at = 0
    for table, keep, n in [["", 0, 1], *layout]:
        new = [(len(lines[i]), red[i][0], red[i][1]) for i in range(at, at + n)]
        at += n
        tail_new = [[r, len(d), dict(c)] if c else [r, len(d)] for r, d, c in new]
        counts: Counter = Counter()
        for _, _, c in new:
            counts.update(c)
        body = b"".join(d for _, d, _ in new)
        if keep == 0:
            kept: list[bytes] = []
            pre = b""
            raw_len = sum(r for r, _, _ in new)
            tail = tail_new[-TAIL_LINES:]
        else:
            if table not in base_secs:
                raise BaseMissing(f"no section {table!r} in the base version")
            sec, blist = base_secs[table]
            _, b_lines, b_raw, b_red, _, b_tail, b_counts = sec
            drop = b_lines - keep
            if drop < 0 or drop > len(b_tail):
                raise BaseMissing(f"section {table!r}: {drop} lines dropped, {len(b_tail)} known")
            dropped = b_tail[len(b_tail) - drop :] if drop else []
            p = b_red - sum(d[1] for d in dropped)
            raw_len = b_raw - sum(d[0] for d in dropped) + sum(r for r, _, _ in new)
            counts.update(b_counts)
            for d in dropped:
                if len(d) > 2:
                    counts.subtract(d[2])
            counts = +counts
            tail = (b_tail[: len(b_tail) - drop] + tail_new)[-TAIL_LINES:]
            if not drop and not n:  # the section as held
                sections.append([table, b_lines, b_raw, b_red, len(blist), b_tail, dict(counts)])
                chunks += blist
                continue
            # the chunk holding offset ``p`` (the last one when ``p`` is the section's end)
            sizes = _sizes(conn, blist[-64:])
            start, j = b_red, len(blist)
            while j > 0:
                j -= 1
                if blist[j] not in sizes:
                    sizes.update(_sizes(conn, blist[max(0, j - 512) : j + 1]))
                if blist[j] not in sizes:
                    raise BaseMissing(f"chunk {blist[j].hex()[:16]} of the base is not in the manifest")
                start -= sizes[blist[j]]
                if start <= p:
                    break
            if start < 0 or start > p:
                raise BaseMissing(f"section {table!r}: the chunks do not add up to its length")
            kept = blist[:j]
            assert home is not None  # a base version is read from the vault at ``home`` (above)
            pre = manifest.read_sha(conn, home, blist[j])[: p - start] if p > start else b""
        parts = chunks_of(pre + body)
        hs = [hashlib.sha256(c).digest() for c in parts]
        fresh += zip(hs, parts, strict=True)
        sections.append(
            [
                table,
                keep + n,
                raw_len,
                (p if keep else 0) + len(body),
                len(kept) + len(hs),
                tail,
                dict(counts),
            ]
        )
        chunks += kept + hs
    state = {"v": STATE_V, "marks": raw.meta.get("rows_marks"), "sections": sections}
    done = held_of([h for h, _ in fresh])
    objects = []
    for h, part in fresh:
        if h not in done and not held(h):
            done.add(h)
            objects.append((h, compress(part), len(part)))
    total: Counter = Counter()
    for sec in sections:
        total.update(sec[6])
    return SealedRows(
        sum(s[2] for s in sections),
        list_sha(chunks),
        sum(s[3] for s in sections),
        chunks,
        dict(+total),
        objects,
        state,
        record_delta(chunks, *base_list) if base_list is not None else None,
    )


__all__ = ["BaseMissing", "SealedRows", "held_marks", "record_delta", "resolve_delta", "seal_rows"]
