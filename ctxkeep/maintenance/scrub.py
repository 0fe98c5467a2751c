"""``ctxkeep secrets --scrub``: redact the secrets in the agents' own session files.

Which files: the session files (``entries.source_path``) of the entries whose stored
text holds a redaction marker, and the files of redacted quarantined lines
(``query.secrets``), then the agents' prompt histories (``maintenance.prompt_history``:
redacted in place by the same safe rewrite, no store bookkeeping; newuser18 F3);
``paths`` narrows them. Each file goes through compress's safe
rewrite (``maintenance.compress.rewrite``): skipped when modified within
``[compress] active_minutes`` (the agent may be writing it) or when its last line is
incomplete; else the file is first ingested (the store holds every line before it
changes), then redacted by the vault's own raw-line redactor (``scrub_bytes``:
``sinks.vault.redact_raw``, each line alone, on its bytes, in place):

- a line that parses keeps its bytes but for the values replaced by
  ``[REDACTED:<kind>]`` (escapes replaced whole, keys and the record's ids, parents and
  types untouched, an opaque base64 value such as an image or encrypted reasoning
  intact): the file stays a valid session the agent resumes;
- a line that does not parse (quarantined at ingest, redacted in the store) is
  redacted the same way and stays where it was, as unparsable as it was (newuser15
  F12: it was counted by ``secrets`` and left with its value, the file called clean);
- other lines keep their bytes.

The scrubbed file is then the bytes the vault keeps of the original: an entry named by
its redacted line's hash (``pipeline.stable_ids``) keeps its id when read again.

Then an intent, a verified ``<file>.backup``, the new content validated and renamed over
the original (``rewrite.replace_file``), and in one transaction the scrubbed file
captured whole as the vault's next generation with the file's watermark at its new end;
the entries' byte offsets moved to the new file (``_rewrite``; a kill in between is
completed by the next command: ``sinks.recovery``, op ``scrub-file``). Before, the
watermark moved without a capture: the next append became a generation starting at
the scrubbed size, which ``vault restore`` could not write back (newuser15 F18).

The scrubbed file keeps the original's mtime (``rewrite.keep_times``: the agents'
age-based cleanup and the next run's active-file check read it; newuser18 F4).

The backups hold the secrets (that is what makes the rewrite undoable): the result
lists them, with every older ``.backup.*`` of each file, to delete once checked.
A one-document JSON session (Gemini CLI's chats) is redacted string by string and
written back as one compact line (``_scrub_document``; the next ingest captures the new
version, a document's generation being its whole content); other files (SQLite stores)
are listed as not scrubbed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import rewrite
from ctxkeep.maintenance.prompt_history import line_ranges
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sources.readers.rows import SEP as ROWS_SEP


@dataclass
class ScrubFile:
    """One file's outcome: ``status`` scrubbed | would-scrub | clean | skipped | failed;
    ``values`` redacted per kind; ``lines_changed``, of them ``bad_lines_changed``
    (lines that do not parse, redacted on their bytes); bytes before/after;
    ``backup`` (the path holding the original bytes); ``lines``: of a file not
    rewritten, the 1-based numbers of the lines holding values (``_not_rewritten``)."""

    path: str
    agent: str
    status: str = "clean"
    reason: str = ""
    values: dict = field(default_factory=dict)
    lines_changed: int = 0
    bad_lines_changed: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    backup: str | None = None
    older_backups: list[str] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)


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


def scrub_bytes(data: bytes) -> tuple[bytes, dict, int, int]:
    """``data`` (a JSONL file's bytes, complete lines) with its secrets redacted by the
    vault's raw-line redactor (``sinks.vault.redact_raw``: each line alone, in place,
    escapes whole, JSON kept valid, an opaque base64 value left intact): the bytes the
    vault keeps of it, so the scrubbed file is what ``vault restore`` would write and
    an entry named by its redacted line's hash keeps its id. A line that does not parse
    (quarantined at ingest) is redacted the same way, on its bytes: it stays where it
    was and as unparsable as it was, only its values replaced. Returns ``(new bytes,
    {kind: n}, lines changed, of them lines that do not parse)``. Raises ValueError
    when the redaction changed the number of lines (it never does: a marker holds no
    newline)."""
    from ctxkeep.sinks.vault import redact_raw

    new, counts = redact_raw(data)
    if new == data:
        return data, {}, 0, 0
    old_lines, _ = cp.split_lines(data)
    new_lines = [ln.raw for ln in cp.split_lines(new)[0]]
    if len(old_lines) != len(new_lines):
        raise ValueError(f"the redaction made {len(new_lines)} lines of {len(old_lines)}")
    changed = [ln for ln, raw in zip(old_lines, new_lines, strict=True) if ln.raw != raw]
    return new, dict(counts.most_common()), len(changed), sum(ln.rec is None for ln in changed)


def scrub_file(conn, home: Path, path: Path, agent: str, *, dry_run: bool, active_minutes: int) -> ScrubFile:
    """Scrub one file (see the module doc). Never raises for the file's own trouble:
    the result says skipped/failed and why."""
    r = ScrubFile(str(path), agent)
    if not path.is_file():
        r.status, r.reason = "skipped", "the file is gone"
        return r
    if path.suffix not in (".jsonl", ".json"):
        return _not_rewritten(r, path)
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
    from ctxkeep.sources import as_stored

    held = sqlite_store.load_watermarks(conn, [str(path)]).get(str(path))
    file = as_stored(file, None if held is None else held.state)  # the ids the store holds
    data, state = rewrite.read_state(path)
    if path.suffix == ".json":
        return _scrub_document(r, path, data, state, dry_run)
    lines, rest = cp.split_lines(data)
    r.bytes_before = r.bytes_after = len(data)
    # a last line never ended, in a file idle past active_minutes (checked above): the
    # agent died mid-line (newuser18 F18: the file was skipped for ever, its keys kept).
    # Redacted on its bytes and left unended, where ingest holds it back.
    tail = rest if rest.strip() else b""
    new, values, changed, bad = scrub_bytes(data[: len(data) - len(tail)])
    red_tail = tail
    if tail:
        from ctxkeep.sinks.vault import redact_raw

        red_tail, tail_values = redact_raw(tail)
        if red_tail != tail:
            values = dict((Counter(values) + tail_values).most_common())
            changed, bad = changed + 1, bad + 1
            r.reason = "its last line was never ended (the agent stopped mid-line): redacted, left unended"
        new += red_tail
    r.values, r.lines_changed, r.bad_lines_changed, r.bytes_after = values, changed, bad, len(new)
    r.older_backups = [str(p) for p in rewrite.backup_paths(path)]
    if not changed:
        r.status = "clean"
        return r
    if dry_run:
        r.status = "would-scrub"
        return r
    new_lines, _ = cp.split_lines(new)
    moves = _moves(file, lines, new_lines)
    # lines that did not parse before either: not judged by the validation
    kept_bad = {nl.body for old, nl in zip(lines, new_lines, strict=True) if old.rec is None}
    _rewrite(conn, home, file, r, data, state, new, len(new_lines), kept_bad, moves, red_tail)
    return r


#: bytes of a file ``_not_rewritten`` reads to name the lines holding values
NOT_REWRITTEN_MAX_BYTES = 64 << 20
SQLITE_MAGIC = b"SQLite format 3\x00"


def _not_rewritten(
    r: ScrubFile,
    path: Path,
    what: str = "plain text, not rewritten (ctxkeep rewrites JSON and JSONL sessions only)",
) -> ScrubFile:
    """A file ``scrub`` does not rewrite, skipped with what to do (newuser18 F2: it said
    only "not a JSON or JSONL session file", and the AWS secret in an Aider history
    stayed with no way out offered):

    - an agent's SQLite database (Crush's ``crush.db``, OpenCode's): ctxkeep never
      writes one, so the keys in it are to be rotated;
    - a plain-text history (Aider's ``.aider.chat.history.md`` and
      ``.aider.input.history``, SpecStory's Markdown): the values found, per kind
      (``values``), and the 1-based numbers of the lines holding them (``lines``:
      the vault's raw-line redaction, ``sinks.vault.redact_raw``, compared line by
      line), to edit by hand. It is not rewritten: Aider's session ids are SHA-256s of
      the history's bytes (``sources.aider``), so a rewrite would make every later
      session a new one in the store.

    ``what`` names the file's kind in the reason."""
    r.status = "skipped"
    try:
        with open(path, "rb") as f:
            data = f.read(NOT_REWRITTEN_MAX_BYTES)
    except OSError as e:
        r.reason = f"not a JSON or JSONL session file, and unreadable ({e.strerror})"
        return r
    if data.startswith(SQLITE_MAGIC):
        r.reason = "an agent's database: ctxkeep never writes one; rotate the keys it holds"
        return r
    from ctxkeep.sinks.vault import redact_raw

    new, counts = redact_raw(data)
    old_lines, new_lines = data.split(b"\n"), new.split(b"\n")
    r.values = dict(counts.most_common())
    r.lines = [i + 1 for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=False)) if a != b]
    if not r.values:
        r.reason = "not a JSON or JSONL session file; no value found in it now"
        return r
    kinds = ", ".join(f"{k} {n}" for k, n in r.values.items())
    r.reason = (
        f"{what}: {kinds} on "
        f"{'line' if len(r.lines) == 1 else 'lines'} {line_ranges(r.lines)}; edit "
        f"{'it' if len(r.lines) == 1 else 'them'} out by hand, then rotate the keys"
    )
    return r


def _moves(file, old_lines: list, new_lines: list) -> list[tuple[str, int]]:
    """``(entry id, byte offset in the new file)`` of the entries of every line: each
    line named both as the old line parses and as the new one parses (the store holds
    a line that held a secret by its redacted line's hash with the vault on, by the raw
    line's with it off: a Codex line without a record id of its own), at the new
    line's offset. Ids the store does not hold move nothing."""
    out: dict[str, int] = {}
    for lines in (old_lines, new_lines):
        per_line = cp.line_entry_ids(file.agent, cp.line_entries(file, lines))
        for nl, ids in zip(new_lines, per_line, strict=True):
            for x in ids:
                out[x] = nl.offset
    return sorted(out.items(), key=lambda m: (m[1], m[0]))


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


def _rewrite(
    conn,
    home: Path,
    file,
    r: ScrubFile,
    data: bytes,
    state,
    new: bytes,
    n_lines: int,
    kept_bad: set[bytes],
    moves: list[tuple[str, int]],
    tail: bytes = b"",
) -> None:
    """Replace the file by ``new`` and make the stores follow it, crash-consistent as
    compress's rewrite is (``compress.run.compress_file``):

    1. an intent ``scrub-file`` (``sinks.recovery``: both contents' SHA-256 and sizes,
       the entries' moves), before the file changes;
    2. the verified backup and the atomic replace (``rewrite.replace_file``; the lines
       that did not parse, ``kept_bad``, are not judged by its validation);
    3. the scrubbed file captured whole, from byte 0, as the vault's next generation
       (``_after_rewrite``), in the transaction of the file's watermark at the new end;
       the entries at their new offsets; the intent advanced;
    4. DuckDB follows and the intent is finished (``recovery.complete``).

    A kill between 2 and 3 leaves the intent: the next writable command (ingest runs
    ``recovery.recover`` first) moves the entries and drops the file's watermark, and
    that ingest reads the file whole (a new inode anyway) and captures it whole: the
    vault holds the scrubbed file from its first byte (ids are stable: no entry is
    added). ``tail``: the file's last line, never ended (``scrub_file``), kept unended
    after the watermark and outside the vault's capture, as ingest holds it back.
    Raises ``RewriteError`` (nothing replaced, no backup left, the intent gone)."""
    from ctxkeep.sinks import recovery
    from ctxkeep.sinks.sqlite import intents
    from ctxkeep.sinks.sqlite.intents import kill_point

    path = Path(file.path)
    iid = intents.begin(
        conn,
        "scrub-file",
        {
            "path": str(path),
            "original_sha256": state.sha256,
            "original_bytes": len(data),
            "new_sha256": hashlib.sha256(new).hexdigest(),
            "new_bytes": len(new),
            "moves": moves,
        },
    )
    try:
        new_st = rewrite.replace_file(
            path, new, state, expected_lines=n_lines, kept_bad=kept_bad, backup_of=data, tail=tail
        )
    except rewrite.RewriteError:
        recovery.complete(conn, home, [iid])  # the file is unchanged: the intent goes
        raise
    kill_point("scrub", "renamed")
    backup = str(path) + rewrite.BACKUP_SUFFIX
    r.backup, r.status = backup, "scrubbed"
    r.older_backups = [p for p in r.older_backups if p != backup]
    try:
        # (an unended last line, ``tail``, stays past the watermark and the vault's copy)
        _after_rewrite(conn, file, new[: len(new) - len(tail)], new_st, moves)
        kill_point("scrub", "watermark")
        from ctxkeep.sinks.sqlite import EntryChanges, Relocation

        sqlite_store.apply_changes(conn, EntryChanges(moves=[Relocation(str(path), tuple(moves))]))
        intents.advance(conn, iid, "sqlite")
        recovery.complete(conn, home, [iid])  # DuckDB follows; the intent is finished
    except Exception as e:  # the file is scrubbed: its intent completes the stores
        r.reason = (
            f"the store's bookkeeping is incomplete ({type(e).__name__}: {e}); the next ingest "
            "completes it (the file is read again whole)"
        )


def _after_rewrite(conn, file, new: bytes, new_st, moves: list[tuple[str, int]]) -> None:
    """The store follows the rewritten file: its watermark at the new end with the
    parser state of the old end (the next ingest reads only what the agent appends, as
    after compress) and, in the watermark's transaction, the vault's capture of the
    whole new file from byte 0 (``compress.run.vault_capture``, its pack durable first;
    ``extra``: the moves, ``"scrubbed"``): the newest generation ends where the watermark does, so what the agent
    appends next continues it, ``vault restore`` writes the scrubbed file with what
    came after it, and ``vault status`` finds every byte held. The capture's redacted
    bytes are the file's (``scrub_bytes`` is the vault's redaction), so ``capture.record``
    usually finds them held already and extends the generation; a file now shorter
    (a marker shorter than its value) starts a new generation."""
    from ctxkeep.pipeline.transform import transform_batch
    from ctxkeep.sinks import vault
    from ctxkeep.sources import SOURCES
    from ctxkeep.sources.contract import Batch, Watermark
    from ctxkeep.sources.readers.jsonl import with_tail

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
        # the bytes before the offset are the new file's (``start_offset``'s check)
        state=with_tail(dict(old_wm.state) if old_wm else {}, new),
    )
    from ctxkeep.maintenance.compress.run import vault_capture

    vg = vault_capture(conn, file, new, new_st, [], moves, extra={"scrubbed": True})
    tombs = sqlite_store.tombstoned(conn)
    frames = transform_batch(conn, Batch([], [], wm), tombs)
    sqlite_store.load_batch(
        conn,
        quarantine=[],
        watermarks=[wm],
        before_watermarks=None if vg is None else (lambda c: vault.record_in(c, vg)),
        **frames,
    )


def scrub_history(path: Path, agent: str, *, dry_run: bool, active_minutes: int):
    """Redact the values in one prompt-history file (``maintenance.prompt_history``;
    a ``ScrubFile``
    with ``status`` scrubbed | would-scrub | clean | skipped | failed, ``values`` per
    kind, ``lines`` the 1-based numbers of the lines holding them). A JSONL file is
    redacted line by line by the vault's raw-line redactor (``scrub_bytes``); a
    ``.json`` document (Gemini CLI's array) is skipped with its values' kinds and
    lines (``_not_rewritten``: compress's rewrite validates JSON objects). Skipped when
    modified within ``active_minutes`` (the agent may be writing it) or when its last
    line is incomplete. Raises RewriteError when the file changed while it was read
    (the caller reports it as failed)."""
    r = ScrubFile(str(path), agent)
    age = time.time() - path.stat().st_mtime
    if age < active_minutes * 60:
        r.status = "skipped"
        r.reason = f"modified {age / 60:.1f} min ago (< active_minutes {active_minutes}): the agent may be writing it"
        return r
    if path.suffix == ".json":  # a JSON array: compress's rewrite validates JSON objects only
        return _not_rewritten(r, path, "a JSON array ctxkeep does not rewrite")
    data, state = rewrite.read_state(path)
    lines, rest = cp.split_lines(data)
    r.bytes_before = r.bytes_after = len(data)
    if rest.strip():
        r.status, r.reason = "skipped", "the last line is incomplete (the agent may be writing it)"
        return r
    new, values, changed, _bad = scrub_bytes(data)
    if not changed:
        return r
    r.values, r.lines_changed, r.bytes_after = values, changed, len(new)
    new_lines, _ = cp.split_lines(new)
    r.lines = [
        data.count(b"\n", 0, a.offset) + 1 for a, b in zip(lines, new_lines, strict=True) if a.raw != b.raw
    ]
    r.older_backups = [str(p) for p in rewrite.backup_paths(path)]
    if dry_run:
        r.status = "would-scrub"
        return r
    kept_bad = {nl.body for old, nl in zip(lines, new_lines, strict=True) if old.rec is None}
    rewrite.replace_file(path, new, state, expected_lines=len(new_lines), kept_bad=kept_bad, backup_of=data)
    backup = str(path) + rewrite.BACKUP_SUFFIX
    r.backup, r.status = backup, "scrubbed"
    r.older_backups = [p for p in r.older_backups if p != backup]
    return r


def run_scrub(
    home: Path, *, dry_run: bool = False, paths: list[Path] | None = None, on_file=None, on_stop=None
) -> dict:
    """Scrub every file holding a redacted value. A real run takes the maintenance
    lock. Returns ``{"dry_run", "files": [ScrubFile dicts], "scrubbed", "would_scrub",
    "skipped", "failed", "values": {kind: n}, "interrupted", "not_started",
    "backups": [paths holding the originals], "note"}`` (``interrupted``: ``SIGINT`` or
    ``SIGTERM`` when one stopped the run after the file in hand, ``not_started`` files
    left untouched: ``maintenance.stopping``; ``on_stop(stop)``: called at once on the
    first signal, ``stop.current`` the file in hand). Raises StoreError/NotFound when
    there is no store, NotFound when a file of ``paths`` does not exist (each one that
    does is answered: scrubbed, clean, or skipped with its reason)."""
    from collections import Counter

    from ctxkeep.errors import NotFound

    home = Path(home)
    if not (home / STORE_DB).exists():
        raise NotFound("no store", where=str(home), hint="run `ctxkeep ingest` first")
    for p in paths or ():
        if not Path(p).expanduser().is_file():  # a named file is always answered (newuser18 F7)
            raise NotFound(
                "no such file",
                where=str(p),
                hint="name a session file an agent wrote (`ctxkeep secrets` lists the files holding values)",
            )
    cc = cfgmod.load_config(home).compress
    conn = sqlite_store.connect(home, readonly=True)
    try:
        from ctxkeep.query.secrets import secret_files

        todo = secret_files(conn, paths)
    finally:
        conn.close()
    results: list[ScrubFile] = []
    from ctxkeep.maintenance.prompt_history import history_files

    # the agents' prompt histories (newuser18 F3): redacted in place, no store bookkeeping
    want = None if not paths else {str(Path(p).expanduser().resolve()) for p in paths}
    histories = [(p, a) for p, a in history_files() if want is None or str(p.resolve()) in want]
    is_history = {str(p) for p, _ in histories}
    todo = [(p, a) for p, a in todo if p not in is_history] + [(str(p), a) for p, a in histories]
    # a database's sessions are held as ``<db>#session=<id>`` documents
    # (``sources.readers.rows``): answered once, as their database (newuser21 M3: each
    # was "skipped: the file is gone" beside the database's own line)
    todo = list(dict.fromkeys((p.split(ROWS_SEP, 1)[0], a) for p, a in todo))

    def go(conn):
        for p, agent in todo:
            if stop.signal is not None:  # Ctrl-C or SIGTERM: the rest stay untouched
                break
            stop.current = p
            try:
                if p in is_history:
                    res = scrub_history(Path(p), agent, dry_run=dry_run, active_minutes=cc.active_minutes)
                else:
                    res = scrub_file(
                        conn, home, Path(p), agent, dry_run=dry_run, active_minutes=cc.active_minutes
                    )
            except Exception as e:  # one file's trouble never stops the run
                res = ScrubFile(p, agent, status="failed", reason=f"{type(e).__name__}: {e}")
            results.append(res)
            if on_file:
                on_file(res)

    from ctxkeep.maintenance.stopping import stop_between_files

    if dry_run:
        conn = sqlite_store.connect(home, readonly=True)
        try:
            with stop_between_files(on_stop) as stop:
                go(conn)
        finally:
            conn.close()
    else:
        from ctxkeep.sinks.lock import hold

        with hold(home, -1, what="secrets --scrub"), stop_between_files(on_stop) as stop:
            conn = sqlite_store.connect(home)
            try:
                from ctxkeep.sinks import recovery

                recovery.recover(conn, home)  # what a killed command left, first
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
        "interrupted": stop.name if len(results) < len(todo) else None,
        "not_started": len(todo) - len(results),
        "backups": backups,
        "note": (
            "these backups hold the original bytes, secrets included: delete them once the "
            "scrubbed files check out (`ctxkeep compress --restore FILE` puts one back)"
            if backups
            else ""
        ),
    }
