"""A sidecar several sessions share (``sources.readers.sidecar.SHARED``: Kiro IDE's
per-workspace ``sessions.json``, which lists the folder's sessions with their titles),
rewritten in the vault without what it holds of purged sessions.

A purge takes such a file out of the vault only with the folder's last session
(``maintenance.purge._sidecars``): the index names the others. Before, a purge of one
session left its title in every version the vault kept until then. Now, when any
generation of the file holds something of the purged sessions (``without(agent,
bytes)`` differs from the bytes: ``contract.SharedIndex``), in the purge's
transaction:

1. the newest version without it is captured as the file's next generation
   (``capture.Capturer.prepare``: redacted bytes, FastCDC chunks, its pack durable
   before the rows naming it; the newest's stat facts, meta and redaction counts);
2. every older generation is pruned (``prune.prune``: the cut fsynced to
   ``vault/pruned`` first, so a replay of the packs leaves those captures out; the
   rows and the objects nothing kept uses deleted);
3. the purge's completion sweeps the packs with the pruned captures left out
   (``forget.sweep(drop=prune.pruned_captures)``, ``sinks.recovery``: again after a
   crash).

A kill before the commit leaves an orphan pack holding only the filtered version and a
cut naming generations still held, which a sweep ignores (``prune.live``); the purge
itself is rolled back. A kill after it leaves the intent, whose completion sweeps.
The file's older versions are given up (a restore writes the newest; a reparse reads
the newest through ``readers.jsonl.VIEW``); the agent's file on disk is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from ctxkeep.sinks.vault import manifest
from ctxkeep.sources.contract import RawCapture

#: a shared sidecar's bytes without what it holds of the purged sessions: ``(agent,
#: bytes) -> bytes`` (the bytes themselves when it holds nothing of them)
Without = Callable[[str, bytes], bytes]


def holding(conn, home: Path, paths: Collection[str], without: Without) -> list[str]:
    """Of ``paths`` (vault files of shared sidecars), those with a generation that
    ``without`` changes: what ``rewrite`` would rewrite (a purge's preview). Sorted.
    Raises ``VaultDamaged`` when a generation does not read."""
    out = []
    for path in sorted(set(paths)):
        for g in manifest.generations_of(conn, path):
            data = manifest.gen_bytes(conn, home, g)
            if without(g.agent, data) != data:
                out.append(path)
                break
    return out


def rewrite(conn, home: Path, paths: Collection[str], without: Without) -> list[str]:
    """Rewrite the vault's copy of each of ``paths`` (vault files of shared sidecars a
    purge keeps) whose generations hold something ``without`` takes out (module doc),
    in the caller's transaction (the purge's). Returns the paths rewritten, sorted.
    Raises OSError when a pack cannot be written, ``VaultDamaged`` when a generation
    does not read (the caller's transaction then rolls back)."""
    from ctxkeep.sinks.sqlite.intents import kill_point
    from ctxkeep.sinks.vault.capture import Capturer, record
    from ctxkeep.sinks.vault.prune import prune

    done = []
    for path in holding(conn, home, paths, without):
        gens = manifest.generations_of(conn, path)
        newest = gens[-1]
        data = manifest.gen_bytes(conn, home, newest)
        new = without(newest.agent, data)
        old = gens
        if new != data:
            raw = RawCapture(
                path,
                newest.agent,
                "document",
                0,
                new,
                newest.dev or 0,
                newest.ino or 0,
                newest.size if newest.size is not None else len(new),
                newest.mtime_ns or 0,
                dict(newest.meta),
            )
            # the generation's bytes are the vault's (redacted): taken as they are
            raw.redacted = (new, dict(newest.redactions))
            record(conn, home, Capturer(home, conn).prepare([raw]))
            kill_point("purge", "shared-captured")
        else:  # the newest holds none of it (the agent dropped it): only the older go
            old = gens[:-1]
        prune(conn, home, old)
        done.append(path)
    return done


__all__ = ["Without", "holding", "rewrite"]
