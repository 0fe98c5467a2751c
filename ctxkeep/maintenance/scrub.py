"""``ctxkeep secrets --scrub``: redact the secrets in the agents' own session files.

Which files: the session files (``entries.source_path``) of the entries whose stored
text holds a redaction marker, and the files of redacted quarantined lines
(``query.secrets``); ``paths`` narrows them. Each file goes through compress's safe
rewrite (``maintenance.compress.rewrite``): skipped when modified within
``[compress] active_minutes`` (the agent may be writing it) or when its last line is
incomplete; else the file is first ingested (the store holds every line before it
changes), each line whose text the redaction rules change is rewritten:

- a line that parses as a JSON object: every string value (keys are left alone) goes
  through ``transforms.redact.redact`` and the object is written back compact
  (``separators=(",", ":")``, non-ASCII as is) — the record's ids, parents and types
  are untouched, so the file stays a valid session the agent resumes;
- a line that does not parse (already quarantined, redacted, in the store) is kept
  where it was, its secrets redacted in its raw bytes (``redact_bytes``), as compress
  keeps such a line (``validate_jsonl`` does not judge it); the backup keeps the original;
- other lines keep their bytes.

Then a verified ``<file>.backup``, the new content validated and renamed over the
original (``rewrite.replace_file``), and the entries' byte offsets moved to the new
file (``sinks.sqlite.EntryChanges``). The watermark moves to the new end (the next
ingest reads only what the agent appends) and the scrubbed file enters the vault as
the file's next generation in the same transaction (``compress.run.vault_capture``,
``extra["scrubbed"]``): the vault restores the file whole after the agent wrote to it
again (newuser15 F18).

The backups hold the secrets (that is what makes the rewrite undoable): the result
lists them, with every older ``.backup.*`` of each file, to delete once checked.
A one-document JSON session (Gemini CLI's chats) is redacted the same way and written
back as one compact line (``_scrub_document``); other files (SQLite stores) are listed
as not scrubbed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB


@dataclass
class ScrubFile:
    """One file's outcome: ``status`` scrubbed | would-scrub | clean | skipped | failed;
    ``values`` redacted per kind; ``lines_changed``, ``dropped_bad_lines`` (0: a line that does not parse is kept, redacted in place); bytes
    before/after; ``backup`` (the path holding the original bytes)."""

    path: str
    agent: str
    status: str = "clean"
    reason: str = ""
    values: dict = field(default_factory=dict)
    lines_changed: int = 0
    dropped_bad_lines: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    backup: str | None = None
    older_backups: list[str] = field(default_factory=list)


def _redact_obj(obj, counts):
    """``obj`` with every string value redacted (dict keys kept); Counter ``counts``
    gets the values replaced per kind."""
    from ctxkeep.transforms.redact import redact_counts

    if isinstance(obj, str):
        out, c = redact_counts(obj)
        counts.update(c)
        return out
    if isinstance(obj, list):
        return [_redact_obj(x, counts) for x in obj]
    if isinstance(obj, dict):
        return {k: _redact_obj(v, counts) for k, v in obj.items()}
    return obj


def scrub_bytes(data: bytes) -> tuple[bytes, dict, int, int, int]:
    """``data`` (a JSONL file's bytes, complete lines) with its secrets redacted (see
    the module doc). Returns ``(new bytes, {kind: n}, lines changed, bad lines
    dropped (0: kept, see below), lines kept)``.

    A line that does not parse as a JSON object (a torn line, quarantined and redacted
    in the store) is kept where it was, its secrets redacted in its raw bytes
    (``transforms.redact.redact_bytes``, as the quarantine and the vault hold it): it
    was dropped, and a file whose only secret sat in such a line was called "clean"
    with the secret left in it (newuser15 F12)."""
    from collections import Counter

    from ctxkeep.transforms.redact import count_markers, redact_bytes, redact_counts

    counts: Counter = Counter()
    out, changed, dropped, kept = [], 0, 0, 0
    for raw in data.splitlines(keepends=True):
        body = raw.rstrip(b"\r\n")
        end = raw[len(body) :]
        if not body.strip():
            out.append(raw)
            continue
        text = body.decode("utf-8", "surrogateescape")
        try:
            rec = json.loads(text)
        except ValueError:
            rec = None
        kept += 1
        if not isinstance(rec, dict):
            red = redact_bytes(body)
            if red != body:
                added = count_markers(red.decode("utf-8", "surrogateescape"))
                added.subtract(count_markers(text))
                counts.update({k: n for k, n in added.items() if n > 0})
                changed += 1
            out.append(red + end)
            continue
        _, probe = redact_counts(text)  # the raw line holds nothing: keep its bytes
        if not probe:
            out.append(raw)
            continue
        c: Counter = Counter()
        new = _redact_obj(rec, c)
        if not c:
            out.append(raw)
            continue
        counts.update(c)
        changed += 1
        out.append(
            json.dumps(new, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
            + end
        )
    return b"".join(out), dict(counts.most_common()), changed, dropped, kept


def scrub_file(conn, home: Path, path: Path, agent: str, *, dry_run: bool, active_minutes: int) -> ScrubFile:
    """Scrub one file (see the module doc). Never raises for the file's own trouble:
    the result says skipped/failed and why."""
    r = ScrubFile(str(path), agent)
    if not path.is_file():
        r.status, r.reason = "skipped", "the file is gone"
        return r
    if path.suffix not in (".jsonl", ".json"):
        r.status, r.reason = "skipped", "not a JSON or JSONL session file"
        return r
    age = time.time() - path.stat().st_mtime
    if age < active_minutes * 60:
        r.status = "skipped"
        r.reason = f"modified {age / 60:.1f} min ago (< active_minutes {active_minutes}): the agent may be writing it"
        return r
    from ctxkeep.sources import files_for_paths

    files, _ = files_for_paths([path], [agent] if agent != "unknown" else None)
    if not files:
        r.status, r.reason = "skipped", "no agent's session file"
        return r
    file = files[0]
    if not dry_run:
        from ctxkeep.pipeline import engine

        rewrite.cleanup_temps(path)
        wm = sqlite_store.load_watermarks(conn).get(str(path))
        engine.ingest_file(conn, file, wm, sqlite_store.tombstoned(conn))
    data, state = rewrite.read_state(path)
    if path.suffix == ".json":
        return _scrub_document(r, path, data, state, dry_run)
    lines, rest = cp.split_lines(data)
    r.bytes_before = r.bytes_after = len(data)
    if rest.strip():
        r.status, r.reason = "skipped", "the last line is incomplete (the agent may be writing it)"
        return r
    new, values, changed, dropped, kept = scrub_bytes(data)
    r.values, r.lines_changed, r.dropped_bad_lines, r.bytes_after = values, changed, dropped, len(new)
    r.older_backups = [str(p) for p in rewrite.backup_paths(path)]
    if not changed:
        r.status = "clean"
        r.dropped_bad_lines = 0
        r.bytes_after = len(data)
        return r
    if dry_run:
        r.status = "would-scrub"
        return r
    # the entries of each line, by line (none for a line that does not parse): a
    # changed line of an agent without per-record ids (Codex) would parse to new ids,
    # so the old ids move with it
    old_ids = cp.line_entry_ids(file.agent, cp.line_entries(file, lines))
    # the lines that do not parse are the original's (kept, maybe redacted): not judged
    bad = {ln.body for ln in cp.split_lines(new)[0] if ln.rec is None}
    new_st = rewrite.replace_file(path, new, state, expected_lines=kept, kept_bad=bad, backup_of=data)
    backup = Path(str(path) + rewrite.BACKUP_SUFFIX)
    r.backup, r.status = str(backup), "scrubbed"
    r.older_backups = [p for p in r.older_backups if p != str(backup)]
    _after_rewrite(conn, home, file, new, new_st, old_ids)
    return r


def _scrub_document(r: ScrubFile, path: Path, data: bytes, state, dry_run: bool) -> ScrubFile:
    """A one-document session (Gemini CLI's ``chats/session-*.json``): every string
    value redacted, written back as one compact JSON line (``JSON.parse`` reads it as
    the pretty-printed original; ``validate_jsonl`` checks it). Its entries are
    identified by the messages' own ids, so the next ingest, which re-reads a rewritten
    document, stores nothing new."""
    from collections import Counter

    r.bytes_before = r.bytes_after = len(data)
    try:
        doc = json.loads(data.decode("utf-8", "surrogateescape"))
    except ValueError:
        r.status, r.reason = "skipped", "the document does not parse (the agent may be writing it)"
        return r
    c: Counter = Counter()
    new_doc = _redact_obj(doc, c)
    if not c:
        return r
    new = (
        json.dumps(new_doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogateescape")
        + b"\n"
    )
    r.values, r.lines_changed, r.bytes_after = dict(c.most_common()), 1, len(new)
    r.older_backups = [str(p) for p in rewrite.backup_paths(path)]
    if dry_run:
        r.status = "would-scrub"
        return r
    rewrite.replace_file(path, new, state, expected_lines=1, backup_of=data)
    backup = Path(str(path) + rewrite.BACKUP_SUFFIX)
    r.backup, r.status = str(backup), "scrubbed"
    r.older_backups = [p for p in r.older_backups if p != str(backup)]
    return r


def _after_rewrite(conn, home: Path, file, new: bytes, new_st, old_ids: list[list[str]]) -> None:
    """The store follows the rewritten file: its watermark at the new end with the
    parser state of the old end (the next ingest reads only what the agent appends, as
    after compress), and each kept line's entries at their new byte offsets."""
    import hashlib

    from ctxkeep.pipeline.transform import transform_batch
    from ctxkeep.sinks.sqlite import EntryChanges, Relocation
    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.contract import Batch, Watermark

    path = str(file.path)
    old_wm = sqlite_store.load_watermarks(conn).get(path)
    hl = min(4096, len(new))
    wm = Watermark(
        path=path,
        agent=file.agent,
        dev=new_st.st_dev,
        ino=new_st.st_ino,
        size=new_st.st_size,
        mtime_ns=new_st.st_mtime_ns,
        offset=len(new),
        head_len=hl,
        head_hash=hashlib.sha256(new[:hl]).hexdigest(),
        parser_version=SOURCES[file.agent].PARSER_VERSION,
        state=dict(old_wm.state) if old_wm else {},
    )
    tombs = sqlite_store.tombstoned(conn)
    frames = transform_batch(conn, Batch([], [], wm), tombs)
    cur, _ = cp.split_lines(new)
    moves = (
        [(x, ln.offset) for ln, ls in zip(cur, old_ids, strict=True) for x in ls]
        if len(cur) == len(old_ids)
        else []
    )
    # the scrubbed file enters the vault as the file's next generation, in the
    # watermark's transaction, as compress's rewrite does: without it the next
    # generation started at the new watermark's offset, with no prefix, and the vault
    # could no longer restore the file once the agent wrote to it (newuser15 F18); and
    # `vault status` compared the old generation's size with the new file's (F17)
    from ctxkeep.maintenance.compress.run import vault_capture
    from ctxkeep.sinks import vault

    vg = vault_capture(conn, file, new, new_st, [], moves, extra={"scrubbed": True})
    sqlite_store.load_batch(
        conn,
        quarantine=[],
        watermarks=[wm],
        before_watermarks=None if vg is None else (lambda c: vault.record_in(c, vg)),
        **frames,
    )
    if moves:
        sqlite_store.apply_changes(conn, EntryChanges(moves=[Relocation(path, tuple(moves))]), home=home)


def run_scrub(home: Path, *, dry_run: bool = False, paths: list[Path] | None = None, on_file=None) -> dict:
    """Scrub every file holding a redacted value. A real run takes the maintenance
    lock. Returns ``{"dry_run", "files": [ScrubFile dicts], "scrubbed", "would_scrub",
    "skipped", "failed", "values": {kind: n}, "backups": [paths holding the
    originals], "note"}``. Raises StoreError/NotFound when there is no store."""
    from collections import Counter

    from ctxkeep.errors import NotFound

    home = Path(home)
    if not (home / STORE_DB).exists():
        raise NotFound("no store", where=str(home), hint="run `ctxkeep ingest` first")
    cc = cfgmod.load_config(home).compress
    conn = sqlite_store.connect(home, readonly=True)
    try:
        from ctxkeep.query.secrets import secret_files

        todo = secret_files(conn, paths)
    finally:
        conn.close()
    results: list[ScrubFile] = []

    def go(conn):
        for p, agent in todo:
            try:
                res = scrub_file(
                    conn, home, Path(p), agent, dry_run=dry_run, active_minutes=cc.active_minutes
                )
            except Exception as e:  # one file's trouble never stops the run
                res = ScrubFile(p, agent, status="failed", reason=f"{type(e).__name__}: {e}")
            results.append(res)
            if on_file:
                on_file(res)

    if dry_run:
        conn = sqlite_store.connect(home, readonly=True)
        try:
            go(conn)
        finally:
            conn.close()
    else:
        from ctxkeep.sinks.lock import hold

        with hold(home, -1, what="secrets --scrub"):
            conn = sqlite_store.connect(home)
            try:
                go(conn)
            finally:
                conn.close()
    values: Counter = Counter()
    for x in results:
        if x.status in ("scrubbed", "would-scrub"):
            values.update(x.values)
    backups = sorted({b for x in results for b in ([x.backup] if x.backup else []) + x.older_backups})
    return {
        "dry_run": dry_run,
        "files": [asdict(x) for x in results],
        "scrubbed": sum(x.status == "scrubbed" for x in results),
        "would_scrub": sum(x.status == "would-scrub" for x in results),
        "skipped": sum(x.status == "skipped" for x in results),
        "failed": sum(x.status == "failed" for x in results),
        "values": dict(values.most_common()),
        "backups": backups,
        "note": (
            "these backups hold the original bytes, secrets included: delete them once the "
            "scrubbed files check out (`ctxkeep compress --restore FILE` puts one back)"
            if backups
            else ""
        ),
    }
