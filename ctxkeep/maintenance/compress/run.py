"""The compress operation (no Prefect): the health check, the file selection, compressing
one file, the whole run, and restoring a file from its backup.

``flows.compress`` wraps ``run_compress`` in a Prefect flow (one task per file);
``ctxkeep compress --check``/``--dry-run``/``--no-prefect``/``--restore`` and the tests
call these directly (a temporary Prefect server costs 15–30 s per process on this kind
of machine, DESIGN.md).

Compressing one file (``compress_file``), under the store lock (``sinks.lock``):

1. refuse formats other than Claude Code / Codex, and files modified within
   ``active_minutes`` (unless ``force``);
2. ingest the file's new bytes (``pipeline.engine.ingest_file``), then verify that the
   store holds every line (``verify_store``): each line's entries (by entry id,
   computed by the agent's own parser from the line's bytes) are in ``entries``, each
   unparseable line's exact bytes (SHA-256) are in ``quarantine``;
3. plan the cut (``compress.plan``), and check that the new file reads as the same
   entries (plus the marker): nothing would be ingested twice;
4. back up, write, validate, rename (``compress.rewrite``);
5. mark the removed lines' entries ``archived``, record the new file's watermark (same
   parser state as the original's end, so the next ingest reads only what the agent
   appends) with the marker's entry, move the kept entries' ``source_offset`` to the new
   file, prune old backups. The run is recorded in ``runs`` as flow ``compress``;
   DuckDB then gets the same status and offset changes and the run's ``compression``
   rows once per run (``_complete_run``).

Crash consistency: before the rename an intent (``sinks.sqlite.intents``,
``compress-file``) records the removed entry ids, the kept entries' new offsets and
the SHA-256 of both versions of the file; a process killed after the rename leaves it,
and the next writable command completes the store from it (``sinks.recovery``). The
run itself has an intent (``compress``) that closes a killed run's record.

Every status and offset change of stored entries goes through the three functions at
the end of this module (``sinks.sqlite.status``).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ctxkeep import config as cfgmod
from ctxkeep.config import CompressConfig
from ctxkeep.errors import NotFound, StoreBusy, UsageError, from_os_error
from ctxkeep.maintenance.compress import plan as cp
from ctxkeep.maintenance.compress import rewrite, shrink
from ctxkeep.maintenance.stopping import stop_between_files
from ctxkeep.schema import content_hash
from ctxkeep.sinks import sqlite as sqlite_store
from ctxkeep.sinks import vault
from ctxkeep.sinks.files import STORE_DB
from ctxkeep.sources import SOURCES, discover_all, files_for_paths
from ctxkeep.sources.contract import Batch, DiscoveryContext, SourceFile, Watermark
from ctxkeep.sources.readers.jsonl import with_tail
from ctxkeep.sources.readers.sidecar import is_sidecar
from ctxkeep.timeutil import format_epoch
from ctxkeep.transforms.tokens import estimate_tokens


def _engine():
    """``pipeline.engine``, imported when a file is ingested or DuckDB synced: the
    health check and dry runs never import it (nor Polars through it)."""
    from ctxkeep.pipeline import engine

    return engine


__all__ = [
    "FileCheck",
    "FileResult",
    "Hooks",
    "hooks",
    "check_file",
    "check_files",
    "discovered_files",
    "files_to_compress",
    "verify_store",
    "compress_file",
    "run_compress",
    "restore_file",
]


@dataclass
class Hooks:
    """Progress callbacks of the running process (the CLI's progress bar): set here
    rather than passed through Prefect parameters. ``on_files(n)`` once the files are
    selected, ``on_file(FileResult)`` after each, ``on_stop(stop)`` at once on the
    first Ctrl-C or SIGTERM (``maintenance.stopping``; ``stop.current`` the file in
    hand)."""

    on_files: Callable[[int], None] | None = None
    on_file: Callable[[FileResult], None] | None = None
    on_stop: Callable[..., None] | None = None


hooks = Hooks()


@dataclass
class FileCheck:
    """Health of one session file: size (bytes), non-empty ``lines``, ``status`` ``OK``
    or ``EXCEEDS`` with ``exceeds`` naming the thresholds crossed (``size``, ``lines``),
    ``active`` (modified within ``active_minutes``), ``modified`` (UTC ISO-8601) and the
    number of ``backups``."""

    path: str
    agent: str
    bytes: int
    lines: int
    status: str
    exceeds: list[str]
    active: bool
    modified: str
    backups: int


#: the per-file figures a compress run records in ``runs.detail["files_detail"]`` (read
#: by the DuckDB ``compression`` view), with ``image_tokens`` (``inline``'s images and
#: documents moved out: not in the text tokens, whose placeholders add some)
_FILE_FIGURES = ("path", "agent", "status", "bytes_before", "bytes_after", "tokens_before", "tokens_after")


@dataclass
class FileResult:
    """What compress did to one file. ``status``: ``compressed``, ``would-compress``
    (dry run), ``skipped`` (nothing to do), ``refused`` (unsafe: ``reason`` says why)
    or ``failed``. Sizes in bytes, tokens estimated (o200k_base) over the texts of the
    file's entries before and after; ``verified``: lines checked against the store."""

    path: str
    agent: str
    status: str = "skipped"
    reason: str = ""
    bytes_before: int = 0
    bytes_after: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    lines_before: int = 0
    lines_after: int = 0
    messages_before: int = 0
    messages_after: int = 0
    removed_messages: int = 0
    conversation_before: int = 0
    conversation_after: int = 0
    #: what each strategy saves (``shrink.STRATEGIES``): ``{"lines", "bytes", "tokens"}``
    #: (tokens of entry texts: they add up to ``tokens_before - tokens_after``);
    #: ``inline`` also has ``image_tokens`` (of the images and documents it moved out:
    #: not in ``tokens``, which count texts) and ``media`` (values moved)
    savings: dict = field(default_factory=dict)
    cut_kind: str | None = None
    relinked: int = 0
    #: 0: a line that does not parse is never dropped (kept as it was, where it was:
    #: ``kept_bad_lines`` counts them; the key stays for scripts)
    dropped_bad_lines: int = 0
    kept_bad_lines: int = 0
    verified: dict = field(default_factory=dict)
    archived: int = 0
    backup: str | None = None
    backups_pruned: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    #: the thresholds (``size``, ``lines``) the file is still over afterwards (a
    #: skipped file: as it stays), and the sentence saying so ("" when none)
    still_exceeds: list = field(default_factory=list)
    still_over: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _iso(ts: float) -> str:
    return format_epoch(ts, whole_seconds=True)


def _count_lines(path: Path) -> int:
    """The non-empty lines of the file (``bytes.strip`` leaves something)."""
    return sum(1 for line in path.read_bytes().split(b"\n") if line.strip())


# ---------------------------------------------------------------- selection and health check


def discovered_files(
    home: Path, ctx: DiscoveryContext | None = None, paths: list[Path] | None = None
) -> tuple[list[SourceFile], list[str]]:
    """Session files compress considers: ``paths`` (files or dirs, each claimed by the
    first source that recognizes it) or else every enabled agent's discovered files.
    Only Claude Code and Codex files are returned (discovery asks only those agents);
    problems are one-line messages (unknown paths, other formats given explicitly)."""
    cfg = cfgmod.load_config(home)
    problems: list[str] = []
    if paths:
        files, problems = files_for_paths([Path(p) for p in paths])
    else:
        ctx = ctx or DiscoveryContext.from_env()
        ds = discover_all(
            ctx,
            sorted(cp.SUPPORTED),
            enabled={a: cfg.agent(a).enabled for a in SOURCES},
            extra_dirs={a: cfg.agent(a).session_dirs for a in SOURCES},
        )
        files = [f for d in ds for f in d.files]
    out = []
    for f in files:
        if is_sidecar(f):  # a transcript's sidecar (a tool output, a sub-agent's meta): not a session file
            continue
        if f.agent in cp.SUPPORTED:
            out.append(f)
        else:
            problems.append(f"{f.path}: {f.agent} files are not compressed (only Claude Code and Codex)")
    return out, problems


def check_file(f: SourceFile, cc: CompressConfig, now: float | None = None) -> FileCheck:
    """The health of one file against ``max_size_kb`` (KiB) and ``max_lines``."""
    now = time.time() if now is None else now
    st = f.path.stat()
    lines = _count_lines(f.path)
    exceeds = []
    if st.st_size > cc.max_size_kb * 1024:
        exceeds.append("size")
    if lines > cc.max_lines:
        exceeds.append("lines")
    return FileCheck(
        str(f.path),
        f.agent,
        st.st_size,
        lines,
        "EXCEEDS" if exceeds else "OK",
        exceeds,
        now - st.st_mtime < cc.active_minutes * 60,
        _iso(st.st_mtime),
        len(rewrite.backup_paths(f.path)),
    )


def check_files(
    home: Path, *, ctx: DiscoveryContext | None = None, paths: list[Path] | None = None, savings: bool = True
) -> dict:
    """The health report (``compress --check``): changes nothing, needs no store.

    Returns ``{"thresholds": {...}, "files": [FileCheck dicts], "exceeding": n,
    "problems": [str]}``; with ``savings``, each exceeding file's dict also has what a
    compress would do (``would``: status, reason, bytes_after, tokens_before/after) and
    save per strategy (``savings``, as ``FileResult.savings``; ``still_exceeds`` and
    ``still_over``: the thresholds it would still cross), planned like
    ``--dry-run`` (store opened read-only when there is one)."""
    cc = cfgmod.load_config(home).compress
    files, problems = discovered_files(home, ctx, paths)
    checks = []
    planned: list[tuple[dict, FileResult]] = []
    conn = None
    if savings and (Path(home) / STORE_DB).exists():
        conn = sqlite_store.connect(home, readonly=True)
    try:
        for f in files:
            try:
                c = asdict(check_file(f, cc))
            except OSError as e:
                problems.append(f"{f.path}: {e.strerror or e}")
                continue
            if savings and c["status"] == "EXCEEDS":
                # the texts to count are counted at the end, all at once
                planned.append(
                    (c, compress_file(conn, home, f, cc, dry_run=True, force=True, defer_tokens=True))
                )
            checks.append(c)
    finally:
        if conn is not None:
            conn.close()
    _resolve_tokens([r for _, r in planned])
    for c, r in planned:
        c["would"] = {
            k: getattr(r, k)
            for k in (
                "status",
                "reason",
                "bytes_after",
                "tokens_before",
                "tokens_after",
                "still_exceeds",
                "still_over",
            )
        }
        c["savings"] = r.savings
    return {
        "thresholds": {
            "max_size_kb": cc.max_size_kb,
            "max_lines": cc.max_lines,
            "active_minutes": cc.active_minutes,
        },
        "files": checks,
        "exceeding": sum(c["status"] == "EXCEEDS" for c in checks),
        "problems": problems,
    }


def files_to_compress(
    home: Path, *, ctx: DiscoveryContext | None = None, paths: list[Path] | None = None
) -> tuple[list[SourceFile], list[str]]:
    """Files a compress run handles: the given ``paths`` (all of them: the user asked),
    else every enabled agent's Claude Code/Codex file over a threshold."""
    files, problems = discovered_files(home, ctx, paths)
    if paths:
        return files, problems
    cc = cfgmod.load_config(home).compress
    out = []
    for f in files:
        try:
            if check_file(f, cc).status == "EXCEEDS":
                out.append(f)
        except OSError:
            continue
    return out, problems


# ---------------------------------------------------------------- one file


class _Pending:
    """A token figure waiting for counts: ``known`` tokens plus, for each text not
    counted yet, how many times the figure holds its count (negative in a difference).
    Adds and subtracts as an int does, so the figures of ``compress_file`` are written
    once for both; ``resolve`` gives the int."""

    __slots__ = ("known", "texts")

    def __init__(self, known: int = 0, texts: dict[str, int] | None = None) -> None:
        self.known, self.texts = known, texts or {}

    def _plus(self, other, sign: int) -> _Pending:
        if isinstance(other, int):
            return _Pending(self.known + sign * other, self.texts)
        texts = dict(self.texts)
        for t, k in other.texts.items():
            texts[t] = texts.get(t, 0) + sign * k
        return _Pending(self.known + sign * other.known, texts)

    def __add__(self, other) -> _Pending:
        return self._plus(other, 1)

    __radd__ = __add__

    def __sub__(self, other) -> _Pending:
        return self._plus(other, -1)

    def __rsub__(self, other: int) -> _Pending:
        return _Pending(other).__sub__(self)

    def resolve(self, counts: dict[str, int]) -> int:
        """The figure with ``counts`` (text → tokens, every text of ``texts``)."""
        return self.known + sum(counts[t] * k for t, k in self.texts.items())


class _DeferredCounts(dict):
    """A ``_counts`` memo that counts nothing: a text it lacks becomes a ``_Pending``
    (``check_files`` counts all such texts of all files at once at the end, so it never
    waits for the BPE encoder mid-way: the side process builds it meanwhile)."""


def _counts(texts: list[str], memo: dict[str, int]) -> list:
    """``estimate_tokens(texts)[0]``, each distinct text counted once per ``memo`` (a
    compress counts a file's texts before the rewrite, after ``shrink`` and after the
    cut: most are the same texts; a count depends only on its text). With a
    ``_DeferredCounts`` memo, the texts it lacks are ``_Pending`` instead."""
    if isinstance(memo, _DeferredCounts):
        return [memo[t] if t in memo else _Pending(0, {t: 1}) for t in texts]
    new = list(dict.fromkeys(t for t in texts if t not in memo))
    if new:
        memo.update(zip(new, estimate_tokens(new)[0], strict=True))
    return [memo[t] for t in texts]


def _resolve_tokens(results: list[FileResult]) -> None:
    """Replace the ``_Pending`` token figures of ``results`` (``compress_file`` with
    ``defer_tokens``) by ints, counting every text they wait for in one
    ``estimate_tokens`` call."""
    figures = []
    for r in results:
        figures += [r.tokens_before, r.tokens_after, *(v["tokens"] for v in r.savings.values())]
    texts = list(dict.fromkeys(t for f in figures if isinstance(f, _Pending) for t in f.texts))
    counts = dict(zip(texts, estimate_tokens(texts)[0], strict=True)) if texts else {}

    def value(f):
        return f.resolve(counts) if isinstance(f, _Pending) else f

    for r in results:
        r.tokens_before, r.tokens_after = value(r.tokens_before), value(r.tokens_after)
        for v in r.savings.values():
            v["tokens"] = value(v["tokens"])


def _tokens(texts: list[str], memo: dict[str, int]) -> int:
    return sum(_counts(texts, memo))


#: the ``token_method`` values of a BPE count (``transforms.tokens.estimate_tokens``); a
#: ``heuristic`` count (the encoder was missing at ingest) is counted again
_BPE_METHODS = ("o200k_base", "o200k_base-sampled")


def _stored_counts(conn, texts: list[str], memo: dict[str, int]) -> None:
    """Put into ``memo`` the store's token estimates of the ``texts`` it holds as they
    are: a text whose SHA-256 (UTF-8) is a ``contents.content_hash`` was counted at
    ingest by ``estimate_tokens`` (the same count it gives here: it depends only on the
    text); a text redaction changed (a secret in it) has another hash and is counted
    again. A compress then runs the BPE only over the texts it rewrites (markers,
    placeholders): the file's texts were counted when it was ingested."""
    if conn is None:
        return
    by_hash = {content_hash(t): t for t in dict.fromkeys(texts) if t and t not in memo}
    found = sqlite_store.token_estimates(conn, list(by_hash), _BPE_METHODS)
    memo.update((by_hash[h], n) for h, n in found.items())


def verify_store(conn, file: SourceFile, lines: list[cp.Line], ids: list[list[str]]) -> dict:
    """Check the store holds every line of ``file``: the entry ids of each parsed line
    are in ``entries``, the bytes of each unparseable line are in ``quarantine`` (by
    the raw line's SHA-256, or else by its redacted bytes being a row's stored bytes:
    a raw hash unknown after a rebuild from the vault's redacted bytes,
    ``sinks.sqlite.requarantine``, or a line ``secrets --scrub`` redacted in place).

    Returns ``{"lines": n, "entries": n, "quarantined": n, "missing_lines": [indices]}``."""
    flat = [x for ls in ids for x in ls]
    present = sqlite_store.existing_entry_ids(conn, flat) if conn is not None and flat else set()
    qh = sqlite_store.quarantined_hashes(conn, str(file.path)) if conn is not None else set()
    stored: set[str] | None = None
    missing, quarantined = [], 0
    for ln, lids in zip(lines, ids, strict=False):
        if ln.rec is None:
            if hashlib.sha256(ln.body).hexdigest() in qh:
                quarantined += 1
                continue
            if stored is None:
                stored = (
                    sqlite_store.quarantined_redacted(conn, str(file.path)) if conn is not None else set()
                )
            if stored and _redacted_sha(ln.body) in stored:
                quarantined += 1
            else:
                missing.append(ln.index)
        elif any(x not in present for x in lids):
            missing.append(ln.index)
    return {
        "lines": len(lines),
        "entries": len(set(flat)),
        "quarantined": quarantined,
        "missing_lines": missing,
    }


def _redacted_sha(body: bytes) -> str:
    """SHA-256 hex of a line as the quarantine stores it (``redact_bytes``)."""
    from ctxkeep.transforms.redact import redact_bytes

    return hashlib.sha256(redact_bytes(body)).hexdigest()


def lines_not_held(conn, file: SourceFile, data: bytes) -> list[int]:
    """The complete lines of ``data`` (bytes of ``file`` or of a copy of it: a compress
    backup) that the store does not hold (``verify_store``, as compress checks a file
    before it cuts it; an entry retention moved to the Parquet archive, listed in the
    ``archived`` table, is held): their indices among the non-empty lines, [] when it
    holds all."""
    file = stored_file(conn, file)
    lines, _ = cp.split_lines(data)
    _, ids, v = _parse_verified(conn, file, lines, {})
    missing = v["missing_lines"]
    parsed = [i for i in missing if lines[i].rec is not None]
    if not parsed:
        return missing
    archived = sqlite_store.archived_entry_ids(conn, [x for i in parsed for x in ids[i]])
    return [i for i in missing if lines[i].rec is None or not ids[i] or not set(ids[i]) <= archived]


def stored_file(conn, file: SourceFile) -> SourceFile:
    """``file`` as the store keyed its entries (``sources.as_stored``, from its
    watermark): its lines' ids below are the ones the store holds. ``file`` itself
    without a store (``conn`` None: a dry run before any ingest)."""
    from ctxkeep.sources import as_stored

    if conn is None:
        return file
    wm = sqlite_store.load_watermarks(conn, [str(file.path)]).get(str(file.path))
    return as_stored(file, None if wm is None else wm.state)


def _parse_verified(
    conn, file: SourceFile, lines: list[cp.Line], hashes: dict[bytes, str]
) -> tuple[list[list[dict]], list[list[str]], dict]:
    """Parse ``lines`` (``cp.line_entries`` with the ``hashes`` memo, which it fills) and
    check the store holds them (``verify_store``). Returns (entries per line, their ids,
    the check).

    With the vault on, an ingest names the entries of a line that held a secret by the
    hash of the redacted line (``pipeline.stable_ids``); a parse of the raw line names
    them otherwise, so the check would call that line missing (a Codex rollout's line
    with a token: "the store holds 1611 of 1612 lines"). So when parsed lines are
    missing and ``hashes`` does not give their redacted hash yet, those lines alone are
    redacted (``redacted_hashes``: ``{}`` with the vault off or no secret) and the file
    is parsed and checked again."""
    per_line = cp.line_entries(file, lines, hashes)
    ids = cp.line_entry_ids(file.agent, per_line)
    v = verify_store(conn, file, lines, ids)
    bodies = [lines[i].body for i in v["missing_lines"] if lines[i].rec is not None]
    bodies = [b for b in bodies if hashes.get(b) == hashlib.sha256(b).hexdigest()]
    if conn is None or not bodies:
        return per_line, ids, v
    from ctxkeep.pipeline.stable_ids import redacted_hashes

    red = redacted_hashes(bodies)
    if not red:
        return per_line, ids, v
    hashes.update(red)
    per_line = cp.line_entries(file, lines, hashes)
    ids = cp.line_entry_ids(file.agent, per_line)
    return per_line, ids, verify_store(conn, file, lines, ids)


def compress_file(
    conn,
    home: Path,
    file: SourceFile,
    cc: CompressConfig,
    *,
    keep_messages: int | None = None,
    dry_run: bool = False,
    force: bool = False,
    tombs: dict | None = None,
    now: float | None = None,
    defer_tokens: bool = False,
) -> FileResult:
    """Compress one session file (steps in the module doc). The caller holds the
    store lock (``sinks.lock``) unless ``dry_run``; ``conn`` may be None in a
    dry run without a store. Never raises for a bad or unsafe file: the result says
    ``refused``/``skipped`` and why. Raises StoreBusy if SQLite stays locked.
    ``defer_tokens`` (a dry run only): the token figures may wait for counts
    (``_Pending``) until ``_resolve_tokens`` of the results. A file compressed (or
    that would be, or skipped) and still over a threshold afterwards says so in
    ``still_exceeds`` and ``still_over`` (``_still_over``)."""
    keep = keep_messages if keep_messages is not None else cc.keep_messages
    r = _compress_file(
        conn,
        home,
        file,
        cc,
        keep_messages=keep,
        dry_run=dry_run,
        force=force,
        tombs=tombs,
        now=now,
        defer_tokens=defer_tokens,
    )
    if r.status in ("compressed", "would-compress", "skipped") and r.lines_after:
        _still_over(r, cc, keep)
    return r


def _still_over(r: FileResult, cc: CompressConfig, keep: int) -> None:
    """Set ``r.still_exceeds`` (``size``, ``lines``: the thresholds the file is still
    over once compressed, or as it stays when skipped) and ``r.still_over`` (one
    sentence: the figures against the thresholds, and what would cut more). The cut
    keeps the newest ``keep`` conversational messages with every tool call and record
    between them, so a file with long turns can stay over a threshold."""
    over = []
    if r.bytes_after > cc.max_size_kb * 1024:
        over.append(f"max_size_kb {cc.max_size_kb:,} ({r.bytes_after / 1024:,.0f} KiB)")
        r.still_exceeds.append("size")
    if r.lines_after > cc.max_lines:
        over.append(f"max_lines {cc.max_lines:,} ({r.lines_after:,} lines)")
        r.still_exceeds.append("lines")
    if not over:
        return
    after = "after compression" if r.status != "skipped" else "as it stays"
    r.still_over = (
        f"still over {' and '.join(over)} {after}: the newest {keep:,} messages "
        f"(--keep-messages, compress.keep_messages) and what lies between them are kept; "
        f"a smaller --keep-messages cuts more"
    )


def _compress_file(
    conn,
    home: Path,
    file: SourceFile,
    cc: CompressConfig,
    *,
    keep_messages: int,
    dry_run: bool,
    force: bool,
    tombs: dict | None,
    now: float | None,
    defer_tokens: bool,
) -> FileResult:
    """``compress_file`` but for the thresholds still crossed."""
    if defer_tokens and not dry_run:
        raise ValueError("defer_tokens is for dry runs")
    now = time.time() if now is None else now
    path = file.path
    r = FileResult(str(path), file.agent)
    keep = keep_messages
    if file.agent not in cp.SUPPORTED:
        r.status, r.reason = "refused", f"{file.agent} files are not compressed (only Claude Code and Codex)"
        return r
    try:
        st = path.stat()
    except OSError as e:
        r.status, r.reason = "refused", f"cannot read the file ({e.strerror or e})"
        return r
    age = now - st.st_mtime
    if age < cc.active_minutes * 60 and not force:
        r.status = "refused"
        r.reason = (
            f"modified {age / 60:.1f} min ago (< active_minutes {cc.active_minutes}): "
            "the agent is probably writing to it; use --force to override"
        )
        return r
    if not dry_run:
        rewrite.cleanup_temps(path)
        wm = sqlite_store.load_watermarks(conn).get(str(path))
        _engine().ingest_file(conn, file, wm, tombs if tombs is not None else sqlite_store.tombstoned(conn))
    file = stored_file(conn, file)
    data, state = rewrite.read_state(path)
    lines, rest = cp.split_lines(data)
    r.bytes_before = r.bytes_after = len(data)
    r.lines_before = r.lines_after = len(lines)
    if rest.strip():
        r.status, r.reason = "refused", "the last line is incomplete (the agent may be writing it)"
        return r
    # line body → SHA-256: the kept lines are parsed again below; in a real run a line
    # that held a secret is hashed redacted, as its ingest did (``pipeline.stable_ids``;
    # a check redacts only the lines the store seems to lack: ``_parse_verified``)
    hashes: dict[bytes, str] = {}
    if not dry_run:
        from ctxkeep.pipeline.stable_ids import redacted_hashes

        hashes = redacted_hashes([ln.body for ln in lines if ln.rec is not None])
    per_line, ids, v = _parse_verified(conn, file, lines, hashes)
    r.verified = {k: v[k] for k in ("lines", "entries", "quarantined")}
    r.verified["missing"] = len(v["missing_lines"])
    if v["missing_lines"]:
        if not dry_run:
            r.status = "refused"
            r.reason = (
                f"the store does not hold {len(v['missing_lines'])} of {len(lines)} lines "
                f"(first: line {v['missing_lines'][0] + 1}); not compressed "
                "(a purged session, or the file changed during the check)"
            )
            return r
        r.notes.append(
            f"the store holds {len(lines) - len(v['missing_lines'])} of {len(lines)} "
            "lines; the real run ingests the file first"
        )
    backup_path = Path(str(path) + rewrite.BACKUP_SUFFIX)
    sid = next((e.get("session_id") for ents in per_line for e in ents if e.get("session_id")), None)
    note = (
        f"The full history stays searchable in the ctxkeep store ({home}"
        + (f"; `ctxkeep search --session {sid} …`" if sid else "")
        + f") and is in the backup {backup_path}."
    )
    show = _show_call(home)
    shr = None
    work = lines
    if file.agent == "claude-code":
        shr = shrink.shrink_claude(
            lines,
            ids,
            cc.inline_max_kb * 1024,
            lambda eid, what: (
                f"[ctxkeep: {what} moved out of this file to the ctxkeep store; `{show} {eid}` returns it]"
            ),
            cc.tool_use_result_max_kb * 1024,
        )
        work = shr.lines
    try:
        plan = cp.plan_compression(
            file.agent,
            work,
            keep,
            cc.keep_system_lines,
            marker_note=note,
            marker_extra={"backup": str(backup_path), "store": str(Path(home) / STORE_DB)},
        )
    except cp.Refused as e:
        r.status, r.reason = "refused", str(e)
        return r
    origin = shr.origin if shr is not None else list(range(len(lines)))
    cut_removed = [origin[i] for i in plan.removed]
    pre_removed = [i for k in ("duplicates", "progress") for i in (shr.removed[k] if shr else [])]
    msg_lines = set(cp.message_lines(file.agent, lines))
    r.messages_before = len(msg_lines)
    r.messages_after = r.messages_before - len(msg_lines.intersection(cut_removed + pre_removed))
    r.conversation_before, r.conversation_after = plan.conversation_before, plan.conversation_after
    if not plan.changes and not (shr and shr.changes):
        r.reason = plan.reason or "nothing to remove"
        return r
    if plan.marker and conn is not None:
        removed_eids = [x for i in cut_removed for x in ids[i]]
        cp.with_marker_text(plan, _removed_summary(conn, sid, removed_eids, plan=plan, note=note, show=show))
    new_data = b"".join(x + b"\n" for x in plan.new_lines)
    if len(new_data) >= len(data):
        r.reason = (
            f"the safe cut removes only {plan.removed_messages} "
            f"{'message' if plan.removed_messages == 1 else 'messages'} and would not shrink the file"
        )
        return r
    # a line the rewrite keeps as it was is parsed already
    kept = {ln.body: ln.rec for ln in lines if ln.rec is not None and ln.problem is None}
    new_lines, _ = cp.split_lines(new_data, kept)
    # what the rewrite's validation (``rewrite.validate_jsonl``) will judge, judged now,
    # so a check or dry run says the refusal the real run would make: every line
    # compress wrote parses; a line that did not parse in the original either stays as
    # it was and is not judged (newuser15 F2)
    kept_bad = {ln.body for ln in lines if ln.rec is None}
    invalid = _invalid_lines(new_lines, kept_bad, len(plan.new_lines))
    if invalid:
        r.status = "refused"
        r.reason = f"the compressed file would not validate: {'; '.join(invalid[:3])}; the original is left unchanged"
        return r
    new_per_line = cp.line_entries(file, new_lines, hashes)
    new_ids = cp.line_entry_ids(file.agent, new_per_line)
    marker_uuid = plan.marker["uuid"] if plan.marker else None
    marker_idx = {
        ln.index for ln in new_lines if marker_uuid and ln.rec and ln.rec.get("uuid") == marker_uuid
    }
    old_ids = {x for ls in ids for x in ls}
    strange = {x for i, ls in enumerate(new_ids) if i not in marker_idx for x in ls} - old_ids
    if strange:
        r.status = "refused"
        r.reason = (
            f"the compressed file would read as {len(strange)} entries that the original "
            "does not have (parser state depends on removed lines); not compressed"
        )
        return r
    memo: dict[str, int] = _DeferredCounts({"": 0}) if defer_tokens else {"": 0}
    _stored_counts(conn, cp.entry_texts(per_line), memo)
    line_tokens = _line_tokens(per_line, memo)
    r.tokens_before = sum(line_tokens)
    r.tokens_after = _tokens(cp.entry_texts(new_per_line), memo)
    r.bytes_after, r.lines_after = len(new_data), len(plan.new_lines)
    r.removed_messages, r.cut_kind = len(msg_lines.intersection(cut_removed)), plan.cut_kind
    r.relinked = len(plan.relinked) + (len(shr.relinked) if shr else 0)
    r.kept_bad_lines = len(plan.kept_bad)
    r.savings = _savings(file, lines, per_line, line_tokens, shr, plan, cut_removed, len(data), r, memo)
    kept_ids = {x for ls in new_ids for x in ls}
    removed_ids = {x for i in cut_removed + pre_removed for x in ids[i]} - kept_ids
    if dry_run:
        r.status = "would-compress"
        r.archived = len(removed_ids)
        return r
    # (the store's write side: a check or dry run never imports it)
    from ctxkeep.sinks.sqlite import intents
    from ctxkeep.sinks.sqlite.intents import kill_point

    # ---- the store keeps what inline moves out (verified) before the file changes
    if shr is not None and shr.media:
        try:
            _store_media(conn, shr.media)
        except Exception as e:
            r.status, r.reason = (
                "refused",
                f"the store did not keep the moved media ({type(e).__name__}: {e})",
            )
            return r
    moves = [
        (x, ln.offset)
        for ln, ls in zip(new_lines, new_ids, strict=False)
        if ln.index not in marker_idx
        for x in ls
    ]
    # ---- the intent, before the file changes: after a crash past the rename the next
    # command archives the removed entries and moves the kept ones (sinks.recovery)
    iid = intents.begin(
        conn,
        "compress-file",
        {
            "path": str(path),
            "original_sha256": hashlib.sha256(data).hexdigest(),
            "original_bytes": len(data),
            "new_sha256": hashlib.sha256(new_data).hexdigest(),
            "new_bytes": len(new_data),
            "removed": sorted(removed_ids),
            "moves": moves,
        },
    )
    # ---- write (the only step that touches the agent's file)
    try:
        new_st = rewrite.replace_file(
            path, new_data, state, expected_lines=len(plan.new_lines), kept_bad=kept_bad, backup_of=data
        )
        backup = Path(str(path) + rewrite.BACKUP_SUFFIX)
    except rewrite.RewriteError as e:
        from ctxkeep.sinks import recovery

        recovery.complete(conn, home, [iid])  # the file is unchanged: the intent goes
        r.status, r.reason = "refused", str(e)
        return r
    kill_point("compress", "renamed")
    r.backup, r.status = str(backup), "compressed"
    # ---- store bookkeeping, most important first: archived status, then the new
    # file's watermark with the marker's entry, then the kept entries' offsets. A crash
    # in between loses nothing: the next ingest re-reads the new file (entry ids are
    # stable, so nothing doubles).
    try:
        r.archived = _set_status(conn, None, list(removed_ids), "archived")
        kill_point("compress", "archived")
        old_wm = sqlite_store.load_watermarks(conn).get(str(path))
        hl = min(4096, len(new_data))
        wm = Watermark(
            path=str(path),
            agent=file.agent,
            dev=new_st.st_dev,
            ino=new_st.st_ino,
            size=new_st.st_size,
            mtime_ns=new_st.st_mtime_ns,
            offset=len(new_data),
            head_len=hl,
            head_hash=hashlib.sha256(new_data[:hl]).hexdigest(),
            parser_version=SOURCES[file.agent].PARSER_VERSION,
            # the bytes before the offset are the new file's (``start_offset``'s check)
            state=with_tail(dict(old_wm.state) if old_wm else {}, new_data),
        )
        marker_entries = [e for i in marker_idx for e in new_per_line[i]]
        from ctxkeep.pipeline.transform import transform_batch

        frames = transform_batch(
            conn, Batch(marker_entries, [], wm), tombs if tombs is not None else sqlite_store.tombstoned(conn)
        )
        # the rewritten file enters the vault as a new generation (the original stays
        # there whole), with what compress did to the store, in the watermark's
        # transaction: a reparse or a rebuild replays it (``maintenance.reparse``)
        vg = vault_capture(
            conn, file, new_data, new_st, sorted(removed_ids), moves, shr.media if shr is not None else None
        )
        sqlite_store.load_batch(
            conn,
            quarantine=[],
            watermarks=[wm],
            before_watermarks=None if vg is None else (lambda c: vault.record_in(c, vg)),
            **frames,
        )
        kill_point("compress", "watermark")
        _relocate(conn, None, str(path), moves)
        intents.advance(conn, iid, "sqlite")  # DuckDB follows at the end of the run
    except Exception as e:  # the file is compressed; the intent completes the store
        r.notes.append(
            f"store bookkeeping incomplete ({type(e).__name__}: {e}); completed from the "
            "intent at the end of the run or by the next command"
        )
    r.backups_pruned = [
        str(p) for p in rewrite.prune_backups(path, max(1, cc.keep_backups), cc.backup_max_age_days, now=now)
    ]
    return r


def _invalid_lines(new_lines: list[cp.Line], kept_bad: set[bytes], planned: int) -> list[str]:
    """The problems ``rewrite.validate_jsonl`` would find in the new file (its lines,
    parsed: ``cp.split_lines``): a line that does not parse to an object and is not one
    of ``kept_bad`` (the original's own unparsable lines, kept byte for byte), a line
    count other than ``planned``. [] when the new file would validate."""
    problems = [
        f"line {ln.index + 1} does not parse: {ln.problem or 'not an object'}"
        for ln in new_lines
        if ln.rec is None and ln.body not in kept_bad
    ][:6]
    if len(new_lines) != planned:
        problems.append(f"{len(new_lines)} lines, planned {planned}")
    return problems


def _show_call(home: Path) -> str:
    """The ``ctxkeep show`` call for the store at ``home`` (``--home`` only when it is
    not the store ``ctxkeep`` finds by itself)."""
    try:
        default = cfgmod.resolve_home(None)
    except Exception:
        default = None
    same = default is not None and Path(default).resolve() == Path(home).resolve()
    return "ctxkeep show" if same else f"ctxkeep show --home {home}"


def _removed_summary(
    conn, session_id: str | None, removed_entry_ids: list[str], *, plan: cp.CompressPlan, note: str, show: str
) -> str:
    """The text of the marker record: what the cut removed from the file and how to get
    it back — counts, the first and last removed user prompts (from the store), the
    exact ``ctxkeep show`` / ``ctxkeep search --session`` calls.

    The one place the marker text is made. With a store it carries the resume snapshot
    of the removed entries (``query.resume.build_snapshot(conn, session_id,
    entry_ids=removed, budget=MARKER_SNAPSHOT_TOKENS)``: the prompts, open tasks, files,
    last failure and stated rules of what left the file, with the calls that fetch it),
    so the agent resuming the file knows what it no longer has; if no snapshot can be
    built, the first and last removed prompts. ``conn`` None (a dry run without a
    store): counts only."""
    m = plan.marker["ctxkeep"]["compressed"] if plan.marker else {}
    head = (
        f"ctxkeep compressed this session file: {plan.removed_messages} earlier messages "
        f"({m.get('removed_lines', 0)} lines, {m.get('removed_bytes', 0):,} bytes) were removed from it."
    )
    parts = [head]
    prompts: list[tuple[str, str, str]] = []
    snapshot = _removed_snapshot(conn, session_id, removed_entry_ids)
    if snapshot:
        parts.append("What the removed part held (ctxkeep resume snapshot):\n" + snapshot + "\n")
    elif conn is not None and removed_entry_ids:
        rows = sqlite_store.user_messages(conn, removed_entry_ids)
        rows.sort(key=lambda x: (x[2] if x[2] is not None else -1, x[1] or ""))
        for eid, ts, _off, h in rows:
            text = sqlite_store.content_text(conn, h) if h else None
            t = " ".join((text or "").split())
            if t and not t.startswith(("<command-", "<local-command", "Caveat:", "[Request interrupted")):
                prompts.append((eid, ts or "", t))
    if prompts:
        parts.append(f"The removed part held {len(prompts)} user prompts.")
        f_eid, f_ts, f_t = prompts[0]
        parts.append(f"First removed prompt ({f_ts}): {_clip(f_t, 300)!r} (`{show} {f_eid}`).")
        if len(prompts) > 1:
            l_eid, l_ts, l_t = prompts[-1]
            parts.append(f"Last removed prompt ({l_ts}): {_clip(l_t, 300)!r} (`{show} {l_eid}`).")
    if session_id:
        search = show.replace("ctxkeep show", "ctxkeep search", 1)
        parts.append(f'Search what was removed: `{search} --session {session_id} "WORDS"`.')
    parts.append(note)
    return " ".join(parts)


#: token budget of the resume snapshot written into the marker record
MARKER_SNAPSHOT_TOKENS = 800


def _removed_snapshot(conn, session_id: str | None, removed_entry_ids: list[str]) -> str | None:
    """The Markdown resume snapshot of the removed entries, or None (no store, nothing
    removed, or the snapshot failed: the marker then falls back to the prompts)."""
    if conn is None or not removed_entry_ids:
        return None
    from ctxkeep.query.resume import build_snapshot

    try:
        snap = build_snapshot(
            conn, session_id, budget=MARKER_SNAPSHOT_TOKENS, entry_ids=list(removed_entry_ids)
        )
        return snap.to_markdown().strip() or None
    except Exception:  # a marker without a snapshot is still a correct marker
        return None


def _clip(t: str, n: int) -> str:
    return t if len(t) <= n else t[: n - 1] + "…"


def _line_tokens(per_line: list[list[dict]], memo: dict[str, int]) -> list[int]:
    """Estimated tokens (o200k_base) of each line's entry texts (``_counts``)."""
    counts = _counts(cp.entry_texts(per_line), memo)
    out, k = [], 0
    for ents in per_line:
        out.append(sum(counts[k : k + len(ents)]))
        k += len(ents)
    return out


def _shrunk_texts(file: SourceFile, per_line: list[list[dict]], shr: shrink.Shrunk) -> list[str]:
    """The entry texts of ``shr.lines`` (``cp.entry_texts(cp.line_entries(file,
    shr.lines))``) without parsing them all again: a line shrink kept as it was, or only
    re-linked (a new ``parentUuid``), holds the texts of its original (``per_line``);
    only the lines ``inline`` rewrote are parsed. Claude Code's entry texts are a
    function of the line's record alone (``sources.claude_code``: the parser state
    gives session ids and the project, never text; a test compares with a full parse)."""
    replaced = set(shr.replaced)
    out: list[str] = []
    for ln, i in zip(shr.lines, shr.origin, strict=True):
        if i in replaced:
            out += cp.entry_texts(cp.line_entries(file, [ln]))
        else:
            out += cp.entry_texts([per_line[i]])
    return out


def _savings(
    file,
    lines,
    per_line,
    line_tokens,
    shr,
    plan,
    cut_removed,
    bytes_before: int,
    r: FileResult,
    memo: dict[str, int],
) -> dict:
    """Bytes, tokens and lines each strategy saves (``FileResult.savings``). Bytes add
    up to ``bytes_before - bytes_after``; tokens (entry texts, o200k_base) to
    ``tokens_before - tokens_after`` (``inline``'s may be negative: its placeholders
    are text). The images and documents ``inline`` moves out are counted apart, in
    ``image_tokens`` (``shrink.image_tokens``): an entry's text holds no image, so
    adding them to ``tokens`` made a plan say "9,310 → 9,349 tokens" beside "saved
    1,613 tok"."""
    out = {k: {"lines": 0, "bytes": 0, "tokens": 0} for k in shrink.STRATEGIES}
    if shr is not None:
        shr_tokens = sum(_counts(_shrunk_texts(file, per_line, shr), memo))
        for k in ("duplicates", "progress"):
            out[k]["lines"] = len(shr.removed[k])
            out[k]["bytes"] = sum(len(lines[i].raw) + 1 for i in shr.removed[k])
            out[k]["tokens"] = sum(line_tokens[i] for i in shr.removed[k])
        # re-linked children of dropped progress records change size too
        by_origin = dict(zip(shr.origin, shr.lines, strict=True))
        replaced = set(shr.replaced)
        for i in shr.relinked:
            if i not in replaced:
                out["progress"]["bytes"] += len(lines[i].raw) - len(by_origin[i].raw)
        after_shrink = sum(len(ln.raw) + 1 for ln in shr.lines)
        out["inline"]["lines"] = len(shr.replaced)
        out["inline"]["bytes"] = (
            bytes_before - after_shrink - out["duplicates"]["bytes"] - out["progress"]["bytes"]
        )
        out["inline"]["tokens"] = (
            r.tokens_before - shr_tokens - out["duplicates"]["tokens"] - out["progress"]["tokens"]
        )
        out["inline"]["image_tokens"] = shr.image_tokens
        out["inline"]["media"] = len(shr.media)
    else:
        shr_tokens, after_shrink = r.tokens_before, bytes_before
    out["cut"]["lines"] = len(cut_removed)
    out["cut"]["bytes"] = after_shrink - r.bytes_after
    out["cut"]["tokens"] = shr_tokens - r.tokens_after
    return out


def _store_media(conn, rows: list[shrink.MediaRow]) -> None:
    """Write what ``inline`` moves out to the ``media`` table and read it back: raises
    RuntimeError when a row is missing or its SHA-256 differs."""
    sqlite_store.put_media(conn, [(m.entry_id, m.seq, m.media_type, m.data) for m in rows])
    stored = sqlite_store.media_for(conn, sorted({m.entry_id for m in rows}))
    have = {(x.entry_id, x.seq): x.sha256 for ls in stored.values() for x in ls}
    for m in rows:
        if have.get((m.entry_id, m.seq)) != hashlib.sha256(m.data).hexdigest():
            raise RuntimeError(f"media {m.entry_id}#{m.seq} did not verify")


# ---------------------------------------------------------------- the run


def run_compress(
    home: Path,
    *,
    paths: list[Path] | None = None,
    ctx: DiscoveryContext | None = None,
    keep_messages: int | None = None,
    dry_run: bool = False,
    force: bool = False,
    wait: bool = True,
    on_file: Callable[[FileResult], None] | None = None,
    runner: Callable[..., FileResult] | None = None,
) -> dict:
    """Compress every selected file (see ``files_to_compress``); the whole run without
    Prefect. A real run takes the maintenance lock and records the run; a dry run
    reads only (store opened read-only, when there is one).

    ``runner(home, file, keep_messages, dry_run, force)`` replaces the per-file call
    (the Prefect flow passes a task). Returns ``{"dry_run", "files": [FileResult
    dicts], "compressed", "refused", "bytes_before", "bytes_after", "tokens_before",
    "tokens_after", "image_tokens", "still_exceeding", "seconds", "problems"}`` (bytes,
    tokens of entry texts and ``image_tokens`` of the images moved out summed over
    compressed or would-compress files; ``still_exceeding``: files still over a
    threshold afterwards; ``interrupted``: ``SIGINT``/``SIGTERM`` when one stopped the
    run after the file in hand, else None; ``not_started``: the files it left
    untouched, ``maintenance.stopping``; ``backup_bytes``: the originals the backups
    keep beside the files (would keep, in a dry run) until ``backups_until``, UTC date:
    today + ``backup_max_age_days``, after which retention prunes them). Raises StoreBusy when ``wait`` is False and the lock is
    held; UsageError for ``keep_messages`` < 1."""
    if keep_messages is not None and keep_messages < 1:
        raise UsageError("--keep-messages must be at least 1", hint="pass a positive number")
    t0 = time.perf_counter()
    home = Path(home)
    if dry_run:
        return _run(home, paths, ctx, keep_messages, True, force, on_file, runner, t0)
    from ctxkeep.sinks.lock import hold  # (filelock: not for a dry run)

    cfgmod.ensure_home(home)
    with hold(home, -1 if wait else 0, what="compress"):
        return _run(home, paths, ctx, keep_messages, False, force, on_file, runner, t0)


def _default_runner(home: Path, file: SourceFile, keep_messages, dry_run: bool, force: bool) -> FileResult:
    cc = cfgmod.load_config(home).compress
    if dry_run:
        conn = sqlite_store.connect(home, readonly=True) if (home / STORE_DB).exists() else None
    else:
        conn = sqlite_store.connect(home)
    try:
        return compress_file(conn, home, file, cc, keep_messages=keep_messages, dry_run=dry_run, force=force)
    finally:
        if conn is not None:
            conn.close()


def _run(home, paths, ctx, keep_messages, dry_run, force, on_file, runner, t0) -> dict:
    files, problems = files_to_compress(home, ctx=ctx, paths=paths)
    runner = runner or _default_runner
    on_file = on_file or hooks.on_file
    if hooks.on_files:
        hooks.on_files(len(files))
    results: list[FileResult] = []
    cc_days = cfgmod.load_config(home).compress.backup_max_age_days
    if not dry_run:
        _recover(home)
    analytics = ""
    try:
        with (
            stop_between_files(hooks.on_stop) as stop,
            sqlite_store.recorded_run(home if not dry_run and files else None, "compress", t0=t0) as run,
        ):
            if run.run_id is not None:
                _begin_run_intent(home, run.run_id)
            try:
                for f in files:
                    if stop.signal is not None:  # Ctrl-C or SIGTERM: the rest stay untouched
                        run.stopped = True
                        break
                    stop.current = str(f.path)
                    try:
                        res = runner(home, f, keep_messages, dry_run, force)
                    except StoreBusy:
                        raise
                    except Exception as e:  # one bad file must not stop the run
                        fs = from_os_error(e, where=str(f.path))
                        if fs is not None and fs.stops:  # a full or read-only disk: every file would fail
                            raise fs from e
                        res = FileResult(
                            str(f.path),
                            f.agent,
                            status="failed",
                            reason=str(fs) if fs is not None else f"{type(e).__name__}: {e}",
                        )
                    results.append(res)
                    if on_file:
                        on_file(res)
            finally:  # the files compressed before an error reach the record and DuckDB too
                done = [x for x in results if x.status in ("compressed", "would-compress")]
                summary = {
                    "dry_run": dry_run,
                    "files": [x.as_dict() for x in results],
                    "compressed": sum(x.status == "compressed" for x in results),
                    "would_compress": sum(x.status == "would-compress" for x in results),
                    "refused": sum(x.status == "refused" for x in results),
                    "failed": sum(x.status == "failed" for x in results),
                    "bytes_before": sum(x.bytes_before for x in done),
                    "bytes_after": sum(x.bytes_after for x in done),
                    "tokens_before": sum(x.tokens_before for x in done),
                    "tokens_after": sum(x.tokens_after for x in done),
                    "image_tokens": sum((x.savings.get("inline") or {}).get("image_tokens", 0) for x in done),
                    "still_exceeding": sum(bool(x.still_exceeds) for x in results),
                    "seconds": 0.0,
                    "problems": problems,
                    "interrupted": stop.name if run.stopped else None,
                    # the backups: each compressed file's original bytes, beside it, until
                    # retention (or a later compress of it) prunes those older than
                    # backup_max_age_days
                    "backup_bytes": sum(x.bytes_before for x in done),
                    "backups_until": format_epoch(time.time() + cc_days * 86400)[:10],
                    "backup_max_age_days": cc_days,
                    "not_started": len(files) - len(results),
                }
                run.summary = {
                    "files": len(results),
                    "bytes": summary["bytes_before"] - summary["bytes_after"],
                    **{k: v for k, v in summary.items() if k != "files"},
                    "paths": [x.path for x in done],
                    "files_detail": [
                        {
                            **{k: getattr(x, k) for k in _FILE_FIGURES},
                            "image_tokens": (x.savings.get("inline") or {}).get("image_tokens", 0),
                        }
                        for x in done
                    ],
                }
    finally:
        # the run record is final: DuckDB now gets the files' changes and the run's
        # ``compression`` rows, and the run's intents are finished
        if not dry_run and results:
            analytics = _complete_run(home)
    summary["analytics"] = analytics
    summary["seconds"] = run.seconds
    return summary


def _recover(home: Path) -> None:
    """Complete what a killed run left (``sinks.recovery.recover``) before this one."""
    if not (home / STORE_DB).exists():
        return
    from ctxkeep.sinks import recovery

    conn = sqlite_store.connect(home)
    try:
        recovery.recover(conn, home, check=True)
    finally:
        conn.close()


def _begin_run_intent(home: Path, run_id: int) -> None:
    from ctxkeep.sinks.sqlite import intents

    conn = sqlite_store.connect(home)
    try:
        intents.begin(conn, "compress", {}, run_id=run_id)
    finally:
        conn.close()


def _complete_run(home: Path) -> str:
    """Complete this process's compress intents once per run (``recovery.complete``):
    the removed entries' statuses and the kept ones' offsets reach DuckDB, with the
    ingested lines, markers and the run's ``compression`` rows (a DuckDB sync after
    the run record is final). Returns a one-line note."""
    from ctxkeep.sinks import recovery
    from ctxkeep.sinks.sqlite import intents
    from ctxkeep.sinks.sqlite.intents import kill_point

    conn = sqlite_store.connect(home)
    try:
        ids = [
            it.intent_id for it in intents.pending(conn) if it.mine and it.op in ("compress", "compress-file")
        ]
        kill_point("compress", "run-end")
        _done, note = recovery.complete(conn, home, ids)
    finally:
        conn.close()
    return note


# ---------------------------------------------------------------- restore


def restore_file(home: Path, path: Path, *, force: bool = False, wait: bool = True) -> dict:
    """Put ``<path>.backup`` back in place of ``path`` (``compress --restore``).

    First makes sure the store holds the current file (ingest + verify): refuses, unless
    ``force``, when a line of it that the backup lacks is not in the store (restoring
    would lose it); refuses when
    the current file holds entries that the backup lacks (written after the
    compression) unless ``force`` (they stay in the store either way). Then restores
    atomically, re-reads the file into the store (ids are stable: nothing doubles),
    marks the backup's entries ``active`` again and the compress marker ``archived``. Returns ``{"path", "backup",
    "reactivated", "newer_entries", "bytes"}``. Raises UsageError (no backup, the file gone, an
    unknown format, without force: lines of the current file that neither the store nor
    the backup holds, newer entries), StoreBusy, RewriteError."""
    home = cfgmod.ensure_home(Path(home))
    path = Path(path).expanduser().resolve()
    backup = Path(str(path) + rewrite.BACKUP_SUFFIX)
    if not backup.exists() and not path.exists():  # a mistyped (or relative) FILE: say so
        raise NotFound(
            "no such file",
            where=str(path),
            hint="give the session file's path (a relative one is read from the current folder)",
        )
    if not backup.exists():
        raise NotFound(
            "no backup to restore",
            where=str(backup),
            hint="`ctxkeep compress --check` lists files and their backups",
        )
    if not path.exists():
        raise NotFound(
            "the session file no longer exists",
            where=str(path),
            hint=f"the agent may have deleted it; copy {backup.name} back by hand if needed",
        )
    files, _ = files_for_paths([path])
    files = [f for f in files if f.agent in cp.SUPPORTED]
    if not files:
        raise UsageError("not a Claude Code or Codex session file", where=str(path))
    file = SourceFile(files[0].agent, path, "append", files[0].meta)
    from ctxkeep.sinks.lock import hold

    with hold(home, -1 if wait else 0, what="restore"):
        conn = sqlite_store.connect(home)
        try:
            return _restore_locked(conn, home, file, backup, force)
        finally:
            conn.close()


def _restore_locked(conn, home: Path, file: SourceFile, backup: Path, force: bool) -> dict:
    path = file.path
    tombs = sqlite_store.tombstoned(conn)
    bdata = backup.read_bytes()
    blines, _ = cp.split_lines(bdata)
    rewrite.cleanup_temps(path)
    wm = sqlite_store.load_watermarks(conn).get(str(path))
    _engine().ingest_file(conn, file, wm, tombs)
    file = stored_file(conn, file)
    data = path.read_bytes()
    cur, tail = cp.split_lines(data)
    # one memo of line hashes: a line that held a secret gets its redacted hash (the id
    # its ingest gave it) in both files, so the backup's entries are found again below
    hashes: dict[bytes, str] = {}
    _, c_ids, v = _parse_verified(conn, file, cur, hashes)
    _, b_ids, _ = _parse_verified(conn, file, blines, hashes)
    # only a line of the current file that neither the store nor the backup holds is
    # lost by restoring (the backup's own lines come back with it)
    in_backup = {ln.body for ln in blines}
    lost = [i for i in v["missing_lines"] if cur[i].body not in in_backup]
    if lost and not force:
        raise NotFound(
            f"the store does not hold {len(lost)} lines of the current file that the backup lacks "
            f"(first: line {lost[0] + 1}); restoring would lose them; not restored",
            where=str(path),
            hint="run `ctxkeep ingest` and retry, or pass --force to restore anyway",
        )
    markers = {ln.index for ln in cur if ln.rec and isinstance(ln.rec.get("ctxkeep"), dict)}
    newer = {x for i, ls in enumerate(c_ids) if i not in markers for x in ls} - {
        x for ls in b_ids for x in ls
    }
    marker_ids = {x for i in markers for x in c_ids[i]} - {x for ls in b_ids for x in ls}
    if newer and not force:
        raise NotFound(
            f"the current file has {len(newer)} entr{'y' if len(newer) == 1 else 'ies'} written after the "
            "compression that the backup lacks",
            where=str(path),
            hint="they stay in the store; pass --force to restore anyway",
        )
    # --force: the current file's bytes (lines the backup lacks, held by the store or
    # not; an unterminated last line) are kept beside it before the backup replaces
    # it; read again here, so a line the agent appended since the check is kept too
    now = path.read_bytes()
    aside = None
    if lost or newer or tail or now != data:
        aside = rewrite.save_aside(path, now, stat.S_IMODE(os.stat(path).st_mode))
    used, _st = rewrite.restore_backup(path, backup)
    _engine().ingest_file(conn, file, None, tombs)  # re-read from offset 0: ids are stable
    moves = [(x, ln.offset) for ln, ls in zip(blines, b_ids, strict=False) for x in ls]
    _relocate(conn, home, str(path), moves)
    reactivated = _set_status(conn, home, [x for ls in b_ids for x in ls], "active", from_status="archived")
    if marker_ids:  # the compress marker is no longer in the file
        _set_status(conn, home, list(marker_ids), "archived")
    _engine().sync_analytics(conn, home)
    return {
        "path": str(path),
        "backup": str(used),
        "reactivated": reactivated,
        "newer_entries": len(newer),
        "bytes": len(bdata),
        "saved_aside": str(aside) if aside else None,
    }


# ---------------------------------------------------------------- entry status
# Every status and offset change compress makes to stored entries, in one place
# (``sinks.sqlite.status``). ``home`` None: SQLite only; the run's intents bring the
# changes to DuckDB once per run, after the run record (``_complete_run``).


def vault_capture(
    conn,
    file: SourceFile,
    data: bytes,
    st,
    archived: list[str],
    moves,
    media: list | None = None,
    extra: dict | None = None,
) -> vault.PreparedGroup | None:
    """The vault's prepared capture of a file compress (or ``secrets --scrub``) just
    wrote (``vault.Capturer``; its pack is durable on return) with the ``media`` rows it
    moved out of the file (``shrink.MediaRow``; ``sinks.vault.media``) and ``extra``
    (more keys of the capture's ``extra``), or None when the vault is off."""
    from ctxkeep.sinks.vault import media as vault_media
    from ctxkeep.sources.contract import RawCapture

    cap = vault.capturer_for(conn)
    if cap is None:
        return None
    raw = RawCapture.of(file, "append", 0, data, st)
    raw.extra = {"archived": archived, "moves": [[i, off] for i, off in moves], **(extra or {})}
    blobs: dict[bytes, bytes] = {}
    if media:
        raw.extra["media"], blobs = vault_media.prepare(media)
    return cap.prepare([raw], blobs)


def _set_status(conn, home: Path | None, ids: list[str], status: str, from_status: str | None = None) -> int:
    """Set ``status`` (``active``/``archived``) of the stored entries ``ids`` (with
    ``from_status``: only those that have it), in SQLite and, with ``home``, DuckDB.
    Returns the SQLite rows changed."""
    from ctxkeep.sinks.sqlite import StatusChange

    return sqlite_store.apply_changes(
        conn, [StatusChange(status, tuple(ids), from_status=from_status)], home=home
    ).sqlite


def _relocate(conn, home: Path | None, source_path: str, moves: list[tuple[str, int]]) -> int:
    """Set ``source_offset`` of entries of ``source_path``: ``moves`` are (entry_id, byte
    offset in the rewritten file); in SQLite and, with ``home``, DuckDB. Returns the
    SQLite rows changed."""
    from ctxkeep.sinks.sqlite import EntryChanges, Relocation

    return sqlite_store.apply_changes(
        conn, EntryChanges(moves=[Relocation(source_path, tuple(moves))]), home=home
    ).sqlite
