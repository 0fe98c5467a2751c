"""The media compress moves out of a file (``maintenance.compress.shrink``: images and
documents of Claude Code's inline blocks, into the store's ``media`` table), kept in
the vault too, with the generation compress wrote: the file's earlier generation holds
them inline, but only the store knew which values left and as which rows, so a lost
``store.db`` lost them (issue 27: "media rows 10 → 0").

Each value is an object (SHA-256 of the bytes the vault keeps) in the pack of
compress's capture, named by its capture's ``extra["media"]`` (``[entry id, seq,
media type, object SHA-256 hex, text flag]``; in the pack's record, so a replay of the
packs brings the rows back) and by ``vault_media`` rows. Images are kept as they are
(their bytes are no text a secret rule reads); other values (documents, text) are
redacted first (``capture.redact_raw``), so a document that held a secret comes back
with it redacted.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ctxkeep.sinks.vault.manifest import read_sha


def prepare(rows) -> tuple[list[list], dict[bytes, bytes]]:
    """``rows``: objects with ``entry_id``, ``seq``, ``media_type`` and ``data`` (bytes
    or str; ``compress.shrink.MediaRow``). Returns the capture's ``extra["media"]`` list
    and the objects to write (``SHA-256 → bytes``)."""
    from ctxkeep.sinks.vault.capture import redact_raw

    extra: list[list] = []
    blobs: dict[bytes, bytes] = {}
    for m in rows:
        text = isinstance(m.data, str)
        data = m.data.encode("utf-8", "surrogateescape") if text else bytes(m.data)
        if not (m.media_type or "").startswith("image/"):
            data, _ = redact_raw(data, whole=True)
        sha = hashlib.sha256(data).digest()
        blobs[sha] = data
        extra.append([m.entry_id, m.seq, m.media_type, sha.hex(), int(text)])
    return extra, blobs


def rows_of(conn, home: Path, gen_id: int) -> list[tuple[str, int, str, bytes | str]]:
    """The media kept with generation ``gen_id``: ``(entry_id, seq, media_type, data)``
    rows as ``sinks.sqlite.put_media`` takes them (text values as str). Raises
    ``VaultDamaged`` when an object does not read back."""
    out: list[tuple[str, int, str, bytes | str]] = []
    for eid, seq, mt, sha, text in conn.execute(
        "SELECT entry_id, seq, media_type, sha, text FROM vault_media WHERE gen_id = ? ORDER BY entry_id, seq",
        (gen_id,),
    ).fetchall():
        data = read_sha(conn, home, sha)
        out.append((eid, seq, mt, data.decode("utf-8", "surrogateescape") if text else data))
    return out


__all__ = ["prepare", "rows_of"]
