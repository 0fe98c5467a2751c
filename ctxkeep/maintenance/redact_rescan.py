"""``ctxkeep redact --rescan``: re-redact an existing store after a redaction rule
change (``transforms.redact``), so that a secret stored before a rule existed leaves
every store file.

What is rescanned, and how each stays in step:

- entry texts (``contents`` / ``chunks``): each content's whole text (its chunks
  joined, so a secret cut by a chunk boundary is seen) goes through
  ``transforms.redact.redact_series``; a changed text is re-hashed, re-chunked and
  re-indexed in both FTS5 tables, and its entries follow
  (``sinks.sqlite.retext.replace_texts``);
- quarantined lines (``quarantine.raw`` and ``reason``; ``raw_sha256``, the hash of the
  raw line compress verifies by, is kept);
- text media (``media`` rows of type ``text/*``: tool outputs compress moved out of a
  session file; ``bytes`` and ``sha256`` recomputed);
- the Parquet archive's ``text`` column (``sinks.parquet.rewrite_texts``);
- DuckDB holds no entry text but session titles and first prompts (``session_text``)
  and content hashes: it is rebuilt from SQLite when anything changed
  (``maintenance.reindex.rebuild_analytics``).

Crash-safe: one SQLite transaction per batch of contents (and one for the quarantine
and media rows); redaction is idempotent (a ``[REDACTED:<kind>]`` marker is never
redacted again), so a re-run after a crash finishes the work and changes nothing
already done. Afterwards, as purge does, the FTS5 segments are merged and the WAL is
truncated with ``secure_delete`` on (``sinks.sqlite.delete.scrub``), so the old values
are gone from the files, not only from the rows.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import polars as pl

from ctxkeep.errors import StoreError
from ctxkeep.sinks import parquet
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sinks.lock import hold
from ctxkeep.sinks.sqlite import delete as delete_store
from ctxkeep.sinks.sqlite import retext

BATCH_CONTENTS = 2000  # contents per transaction

#: the parts of the store a rescan covers, in the order it visits them
AREAS = ("contents", "quarantine", "media", "archive")


def _redact_many(texts: list[str], counts: Counter) -> list[str]:

    from ctxkeep.transforms.redact import redact_series

    return redact_series(pl.Series(texts, dtype=pl.String), counts).to_list()


def _rescan_contents(conn, dry_run: bool, counts: Counter, progress: Callable[[int], None] | None) -> dict:
    out = {"changed": 0, "merged": 0, "chunks_deleted": 0, "chunks_added": 0}
    last = 0
    while True:
        rows = retext.texts_after(conn, last, BATCH_CONTENTS)
        if not rows:
            break
        last = rows[-1][0]
        news = _redact_many([t for _, _, t in rows], counts)
        changes = {h: new for (_, h, old), new in zip(rows, news, strict=True) if new != old}
        out["changed"] += len(changes)
        if changes and not dry_run:
            with sqlite_store.write(conn):
                r = retext.replace_texts(conn, changes)
            out["merged"] += r["merged"]
            out["chunks_deleted"] += r["chunks_deleted"]
            out["chunks_added"] += r["chunks_added"]
        if progress:
            progress(len(rows))
    return out


def _rescan_rows(conn, dry_run: bool, counts: dict[str, Counter]) -> dict:
    """Quarantined lines and text media, in one transaction."""
    from ctxkeep.transforms.redact import redact_counts

    def red(raw: bytes, c: Counter) -> bytes:
        new, k = redact_counts(bytes(raw).decode("utf-8", "surrogateescape"))
        c.update(k)
        return new.encode("utf-8", "surrogateescape")

    q_updates, m_updates = [], []
    for qid, raw, reason in retext.quarantine_rows(conn):
        new_raw = None if raw is None else red(raw, counts["quarantine"])
        new_reason = None
        if reason is not None:
            new_reason, k = redact_counts(reason)
            counts["quarantine"].update(k)
        if new_raw != (None if raw is None else bytes(raw)) or new_reason != reason:
            q_updates.append((new_raw, new_reason, qid))
    for eid, seq, data in retext.text_media(conn):
        new = red(data, counts["media"])
        if new != bytes(data):
            m_updates.append((new, len(new), hashlib.sha256(new).hexdigest(), eid, seq))
    if not dry_run and (q_updates or m_updates):
        with sqlite_store.write(conn):
            retext.update_rows(conn, q_updates, m_updates)
    return {"quarantine": len(q_updates), "media": len(m_updates)}


def run_rescan(
    home: Path,
    *,
    dry_run: bool = False,
    timeout: float = -1,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Re-redact the store at ``home`` with today's rules (see the module doc), under
    the store lock.

    ``progress(done, total)`` is called after each batch (contents). ``dry_run``
    counts what would change and writes nothing.

    Returns ``{"dry_run": bool, "kinds": {kind: values redacted}, "areas": {area:
    {"changed": n rows or texts, "kinds": {kind: n}}}, "merged": n contents that became
    equal to another one, "analytics": note, "seconds": s}``, areas ``AREAS``. Values
    are counted, never returned. Raises StoreError when there is no store, StoreBusy
    when the lock is not free within ``timeout`` seconds.
    """
    from ctxkeep.maintenance.reindex import rebuild_analytics

    t0 = time.perf_counter()
    home = Path(home)
    if not (home / STORE_DB).exists():
        raise StoreError("no store to rescan", where=str(home / STORE_DB), hint="run `ctxkeep ingest` first")
    counts: dict[str, Counter] = {a: Counter() for a in AREAS}
    with hold(home, timeout, what="redact --rescan"):
        conn = sqlite_store.connect(home)
        try:
            if not dry_run:
                delete_store.prepare(conn, secure=True)
            total = retext.count_contents(conn)
            done = 0

            def step(n: int) -> None:
                nonlocal done
                done += n
                if progress:
                    progress(done, total)

            c = _rescan_contents(conn, dry_run, counts["contents"], step)
            r = _rescan_rows(conn, dry_run, counts)

            def redact_archive(s):
                from ctxkeep.transforms.redact import redact_series

                return redact_series(s, counts["archive"])

            a = parquet.rewrite_texts(home, redact_archive, dry_run=dry_run)
            changed = {
                "contents": c["changed"],
                "quarantine": r["quarantine"],
                "media": r["media"],
                "archive": a["rows"],
            }
            if dry_run:
                analytics = "dry run: nothing written"
            elif any(changed.values()):
                delete_store.scrub(conn)
                analytics = rebuild_analytics(conn, home)
            else:
                analytics = "nothing changed; analytics unchanged"
        finally:
            conn.close()
    kinds = sum(counts.values(), Counter())
    return {
        "dry_run": dry_run,
        "kinds": dict(sorted(kinds.items())),
        "areas": {a: {"changed": changed[a], "kinds": dict(sorted(counts[a].items()))} for a in AREAS},
        "merged": c["merged"],
        "chunks": {"deleted": c["chunks_deleted"], "added": c["chunks_added"]},
        "analytics": analytics,
        "seconds": round(time.perf_counter() - t0, 3),
    }
