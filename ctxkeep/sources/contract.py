"""The source contract: what a source is (``Source``, a ``typing.Protocol``), the
optional capabilities it may have, and the values it exchanges with the ingest plan
and reader (``DiscoveryContext``, ``SourceFile``, ``Discovery``, ``Watermark``,
``Batch``).

A source is a module (one per agent) or an object made by a factory
(``vscode_family.ExtensionSource``) that provides::

    AGENT: str                      # e.g. "claude-code"
    PARSER_VERSION: int             # bump to re-read every file of the agent
    MODE: Mode                      # "append" | "rewrite" | "sqlite": how its files change
    def discover(ctx: DiscoveryContext) -> Discovery
    def read(file: SourceFile, wm: Watermark | None, batch_bytes: int) -> Iterator[Batch]

and, as capabilities (each a protocol below, tested with ``isinstance``)::

    def matches(path: Path) -> bool                  # ClaimsPaths: an explicit --path file
    IMPORT_ONLY = True                               # ImportOnly: read only from --path
                                                     # files (a data export), not discovered
    def mode_for(path: Path) -> FileMode             # ModeByPath: files of several modes
    def unchanged(file: SourceFile, wm) -> bool      # ChangeTest: replaces the default
        # test in the ingest plan (``sources.file_unchanged``): JSON-tree sources compare
        # a fingerprint of the session's files; files of mode "sqlite" need none (the
        # database and its -wal are compared)
    def init_state(file) -> dict; def parse_record(rec, offset, line_hash, state, src)
                                                     # RecordParser: a JSONL line parser
                                                     # compress can replay

``MODE`` is spelled like the modules' other constants (``AGENT``, ``PARSER_VERSION``)
so that a module and a factory-made object satisfy the same protocol.

``read`` yields bounded batches. Each batch carries the entry dicts it parsed (keys of
``ctxkeep.schema.SOURCE_SCHEMA``), the lines it quarantined, and the watermark that is
true once the batch is stored, so a crash between batches loses nothing and repeats
nothing. The readers that do this for each way of writing live in ``sources.readers``
(``jsonl``, ``document``, ``sqlite``).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args, runtime_checkable

from ctxkeep.schema import Watermark

__all__ = [
    "Batch",
    "ChangeTest",
    "ClaimsPaths",
    "DEFAULT_BATCH_BYTES",
    "Discovery",
    "DiscoveryContext",
    "FileMode",
    "ImportOnly",
    "Mode",
    "ModeByPath",
    "MAX_LINE_ENV",
    "OversizeLine",
    "QUARANTINE_RAW_MAX",
    "RawCapture",
    "RecordParser",
    "SharedIndex",
    "Source",
    "SourceFile",
    "Watermark",
    "check_source",
    "max_line_bytes",
    "quarantine_row",
]

#: how a source's files change: ``append`` (JSONL, read from the byte offset),
#: ``rewrite`` (a whole document rewritten in place: re-read on change) or ``sqlite``
#: (an agent database, read by row high-water mark)
Mode = Literal["append", "rewrite", "sqlite"]
#: a discovered file's mode: a ``Mode``, or ``tree`` (one session of sst/opencode's JSON
#: tree of many small files, with its own change test; read like ``append`` by the plan)
FileMode = Literal["append", "rewrite", "sqlite", "tree"]

DEFAULT_BATCH_BYTES = 16 * 1024 * 1024  # raw bytes per batch (one line may exceed it)
QUARANTINE_RAW_MAX = 16 * 1024 * 1024  # keep up to 16 MiB of a bad line's bytes
SKIPPED_EXAMPLES = 20  # refused paths named per agent (``Discovery.skipped_examples``)

#: why discovery refused a file (``Discovery.skipped``; the rules: ``sources.confine``)
REASON_OUTSIDE = "symlink out of the agent's folder"
REASON_LOOP = "symlink loop"
REASON_BROKEN = "broken symlink"
REASON_SPECIAL = "not a regular file (FIFO, socket or device)"
REASON_HARDLINK = "hard link with a name outside the agent's folder"


@dataclass
class DiscoveryContext:
    """Where to look: ``home`` (the user's home dir), ``env`` (environment), extra dirs
    from config (``extra_dirs``) and explicit paths from ``--path``."""

    home: Path
    env: dict[str, str]
    extra_dirs: list[Path] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    def env_dir(self, var: str, default: Path) -> Path:
        """The directory ``$var`` names (``~`` expanded) when it is set and not empty,
        else ``default``."""
        v = self.env.get(var)
        return Path(v).expanduser() if v else default

    @classmethod
    def from_env(cls, extra_dirs=(), paths=()) -> DiscoveryContext:
        env = dict(os.environ)
        home = Path(env.get("HOME") or Path.home())
        return cls(home=home, env=env, extra_dirs=list(extra_dirs), paths=list(paths))


@dataclass
class SourceFile:
    """A discovered session file. ``mode``: a ``FileMode`` (``append``, ``rewrite``,
    ``sqlite`` or ``tree``). ``meta`` carries source-specific facts found at discovery
    (e.g. the parent session of a sub-agent)."""

    agent: str
    path: Path
    mode: str = "append"
    meta: dict[str, Any] = field(default_factory=dict)


def _order_key(p: Path) -> tuple[str, ...]:
    """The key of pathlib's own order (``PurePath.__lt__``: the parts, lower-cased on
    Windows)."""
    return tuple(x.lower() for x in p.parts) if os.name == "nt" else p.parts


def _joined_key(p: Path) -> str:
    """``_order_key(p)`` as one string: the parts joined by NUL, which sorts below
    every character a part can hold, so two keys compare as their tuples do (a part
    that is a prefix of another sorts first in both)."""
    return str(p).replace("/", "\0")


def sorted_paths(paths: Iterable[Path]) -> list[Path]:
    """``sorted(paths)`` in the same order, compared in C: pathlib's ``__lt__`` is a
    Python call per comparison, ~half of discovering 5,000 files. On POSIX one string
    per path (``_joined_key``: its ``str``, which ``Discovery.add`` takes next, with
    NUL for ``/``) and not a tuple of parts (the tuple built per path and compared
    part by part, ~0.05 CPU s of discovering 25,728 files)."""
    if os.name == "nt":
        return sorted(paths, key=_order_key)
    out = sorted(paths, key=_joined_key)
    # the parts of an absolute path start with "/", which sorts after some characters a
    # relative path's first name can start with (its key: NUL first, below all): for a
    # list of both (the absolute ones then come first) the tuples' order
    if out and str(out[0])[:1] == "/" and str(out[-1])[:1] != "/":
        return sorted(out, key=_order_key)
    return out


def import_only_discovery(
    ctx: DiscoveryContext, agent: str, mode: FileMode, matches: Callable[[Path], bool], export: str
) -> Discovery:
    """Discovery of an import-only source (``ImportOnly``): nothing is looked for in the
    home; the dirs configured for ``agent`` are searched for ``conversations*.json``
    files that ``matches`` claims. Without one, ``reason`` tells how to import
    ``export`` (the export's name, e.g. "ChatGPT export")."""
    d = Discovery(agent)
    for base in ctx.extra_dirs:
        d.searched.append(base)
        if base.is_dir():
            for p in sorted_paths(base.glob("conversations*.json")):
                if matches(p):
                    d.add(p, mode)
    if not d.files:
        d.reason = f"import-only: name your {export} with `ctxkeep ingest --path conversations.json`"
    return d


def walk_links(top: Path | str) -> Iterator[tuple[str, str, bool]]:
    """The symlinks under ``top`` as ``(folder, name, whether os.walk lists it among
    the folder's dirs)``, in ``os.walk``'s order (top-down; per folder its dirs, then
    its other entries, each in ``scandir`` order), following no link. ``os.walk``
    then ``os.path.islink`` of every entry took an ``lstat`` per file (25,727 in a
    10 GB tree's Codex folder); a ``DirEntry`` knows a link from the directory read.
    A folder that cannot be read is passed over (as ``os.walk`` does)."""
    stack = [os.fspath(top)]
    while stack:
        folder = stack.pop()
        dirs: list[os.DirEntry] = []
        other: list[os.DirEntry] = []
        try:
            with os.scandir(folder) as it:
                for e in it:
                    try:
                        is_dir = e.is_dir()  # follows a link, as os.walk sorts them
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else other).append(e)
        except OSError:
            continue
        for entries, is_dir in ((dirs, True), (other, False)):
            for e in entries:
                if e.is_symlink():
                    yield folder, e.name, is_dir
        # top-down as os.walk: the first dir's tree first (the stack pops the last)
        stack.extend(os.path.join(folder, e.name) for e in reversed(dirs) if not e.is_symlink())


@dataclass
class Discovery:
    """What a source found: files, the places it looked, and why nothing was found."""

    agent: str
    files: list[SourceFile] = field(default_factory=list)
    searched: list[Path] = field(default_factory=list)
    reason: str | None = None
    #: files refused by discovery or confinement (``sources.confine``), per reason
    skipped: dict[str, int] = field(default_factory=dict)
    #: the first ``SKIPPED_EXAMPLES`` refused paths with their reasons
    skipped_examples: list[tuple[str, str]] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    #: every refused path (``skip``), absolute, for ``sources.confine.count_dir_links``
    _refused: set[str] = field(default_factory=set, init=False, repr=False, compare=False)
    #: resolved path of each parent directory met, a separator after it (``add``: one
    #: ``realpath`` per directory)
    _dirs: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: path → (real path, ``stat`` of the file it names) of each file ``add`` kept
    _facts: dict[str, tuple[str, os.stat_result]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def skip(self, path: Path | str, reason: str) -> None:
        """Count ``path`` as refused for ``reason`` (``skipped``, ``skipped_examples``)."""
        self.skipped[reason] = self.skipped.get(reason, 0) + 1
        self._refused.add(os.path.abspath(path))
        if len(self.skipped_examples) < SKIPPED_EXAMPLES:
            self.skipped_examples.append((str(path), reason))

    def refused(self) -> set[str]:
        """The absolute paths ``skip`` counted so far (all of them, not only the examples)."""
        return self._refused

    def facts(self, path: Path | str) -> tuple[str, os.stat_result] | None:
        """``(real path, stat)`` that ``add`` found for ``path`` (None: not added by ``add``)."""
        return self._facts.get(str(path))

    def found(self) -> dict[str, tuple[str, os.stat_result]]:
        """``facts`` of every path ``add`` kept, by its ``str`` (the dict itself: not to
        be changed; it may hold paths ``confine`` dropped from ``files`` since)."""
        return self._facts

    def add(self, path: Path, mode: FileMode, meta: dict | None = None) -> bool:
        """Add ``path`` as a file of this agent unless it is not a regular file or the
        same file (by resolved path) was added before. Returns True when it was added.
        A symlink loop and a FIFO, socket or device are counted in ``skipped``
        (``sources.confine``'s reasons); a directory or a path that vanished is
        passed over silently. Confinement to the agent's folders is checked after
        discovery, for every source at once (``sources.confine``).

        One ``lstat`` per file: a path that is not a symlink resolves to its parent's
        resolved path (computed once per directory) plus its name, and it is a file
        when the ``lstat`` says so; a symlink is resolved whole (2,584 files: ~0.1 s
        of a no-op ingest's CPU instead of ~0.2 s for ``resolve`` + ``is_file``)."""
        key = str(path)
        try:
            st = os.lstat(key)
        except (OSError, ValueError):
            return False
        if stat.S_ISLNK(st.st_mode):
            try:
                st = os.stat(key)
            except OSError as e:
                self.skip(path, REASON_LOOP if e.errno == errno.ELOOP else REASON_BROKEN)
                return False
            rp = os.path.realpath(key)
        else:
            folder, name = os.path.split(key)
            parent = self._dirs.get(folder)
            if parent is None:  # (kept with a separator after: ``os.path.join``'s result)
                real = os.path.realpath(folder or ".")
                parent = self._dirs[folder] = real if real.endswith(os.sep) else real + os.sep
            rp = parent + name
        if not stat.S_ISREG(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                self.skip(path, REASON_SPECIAL)
            return False
        if rp in self._seen:
            return False
        self._seen.add(rp)
        self._facts[key] = (rp, st)
        self.files.append(SourceFile(self.agent, path, mode, {} if meta is None else meta))
        return True

    def add_glob(
        self,
        base: Path,
        patterns: Iterable[str],
        mode: FileMode | Callable[[Path], FileMode],
        meta: Callable[[Path], dict] = lambda p: {},
        exclude: Iterable[str] = (),
    ) -> None:
        """Search ``base``: record it in ``searched`` and, when it is a directory, add the
        files each glob pattern finds (sorted per pattern, in pattern order) except those
        named in ``exclude``. ``mode`` is a mode or a function of the path; ``meta(path)``
        gives each file's ``meta``."""
        self.searched.append(base)
        if not base.is_dir():
            return
        skip = set(exclude)
        for pat in patterns:
            for p in sorted_paths(base.glob(pat)):
                if p.name not in skip:
                    self.add(p, mode(p) if callable(mode) else mode, meta(p))
        if any("**" in pat for pat in patterns):
            self._count_dir_links(base, [pat.rsplit("/", 1)[-1] for pat in patterns])

    def _count_dir_links(self, base: Path, names: list[str]) -> None:
        """Count in ``skipped`` the directory symlinks a ``**`` search of ``base`` does
        not follow (Python 3.11's ``Path.glob`` never descends into one): a loop (its
        target is ``base``, a folder above the link, or no folder: ``ELOOP``) as
        ``REASON_LOOP``, a link to a folder outside ``base`` as ``REASON_OUTSIDE`` (the
        files there are not read). A link to a folder inside ``base`` is not counted:
        its files are found at their own path. A looping link whose name a pattern
        matches is counted by ``add`` already. One walk (``walk_links``: no link
        followed, no ``lstat`` per entry)."""
        import fnmatch

        root = os.path.realpath(base)
        for folder, name, is_dir in walk_links(base):
            link = os.path.join(folder, name)
            try:
                os.stat(link)
            except OSError as e:
                if e.errno == errno.ELOOP and not any(fnmatch.fnmatch(name, n) for n in names):
                    self.skip(link, REASON_LOOP)
                continue
            if not is_dir:  # a link to a file: ``add`` judges it when a pattern names it
                continue
            real = os.path.realpath(link)
            here = os.path.realpath(folder)
            if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
                self.skip(link, REASON_LOOP)
            elif real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
                self.skip(link, REASON_OUTSIDE)

    def explain_empty(self, root: Path, what: str) -> None:
        """When nothing was found, set ``reason``: ``"<root> does not exist"``, else
        ``what`` (a sentence naming what is missing)."""
        if not self.files:
            self.reason = f"{root} does not exist" if not root.exists() else what


@dataclass
class RawCapture:
    """The bytes a reader took from an agent's file, for the vault (``sinks.vault``):
    ``mode`` ``append`` (a segment of an append-only file from byte ``offset``: the
    complete lines read) or ``document`` (a whole version of a rewritten document,
    ``offset`` 0), with the file's stat facts when it was read (``dev``, ``ino``,
    ``size`` bytes, ``mtime_ns``) and the discovery ``meta`` of its ``SourceFile``.
    ``data`` is the raw, unredacted bytes: the vault redacts them before writing."""

    path: str
    agent: str
    mode: Literal["append", "document"]
    offset: int
    data: bytes
    dev: int
    ino: int
    size: int
    mtime_ns: int
    meta: dict[str, Any] = field(default_factory=dict)
    #: what the writer of these bytes knows beside them, kept in the vault's record: for a
    #: file ``compress`` rewrote, ``{"archived": [entry ids it removed], "moves": [[entry
    #: id, new byte offset], …]}`` (``maintenance.reparse`` applies them again)
    extra: dict[str, Any] = field(default_factory=dict)
    #: the vault's work done where the bytes were read (``sinks.vault.capture.seal``, in
    #: a reader process: redacted, hashed, compressed); ``data`` is then empty
    sealed: Any = None
    #: ``(redacted bytes, values redacted per kind)`` when the pipeline redacted ``data``
    #: already (``pipeline.stable_ids.rekey``): the vault's capture takes it as it is
    redacted: tuple[bytes, dict[str, int]] | None = None

    @classmethod
    def of(
        cls, file: SourceFile, mode: Literal["append", "document"], offset: int, data: bytes, st
    ) -> RawCapture:
        """The capture of ``data`` read from ``file`` at ``offset`` (``st``: its ``fstat``)."""
        return cls(
            str(file.path),
            file.agent,
            mode,
            offset,
            bytes(data),
            st.st_dev,
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
            dict(file.meta),
        )


@dataclass
class Batch:
    """One bounded unit of work: entries (dicts), quarantined lines (dicts with path,
    offset, length, reason, action, raw: ``quarantine_row``), the watermark to store with
    them (None: an intermediate batch of a document, the watermark comes with the last
    one), the raw bytes consumed (``bytes_read``) and status changes of stored entries."""

    entries: list[dict]
    quarantine: list[dict]
    watermark: Watermark | None
    bytes_read: int = 0
    lines: int = 0
    #: requests to change the ``status`` of entries stored earlier (or in this
    #: batch), applied in order after the batch's entries are inserted: dicts
    #: ``{"agent", "session_id", "message_ids": [str], "status": str}`` (e.g. a
    #: Gemini ``$rewindTo`` marks the dropped messages ``rewound``)
    status_changes: list[dict] = field(default_factory=list)
    #: the bytes read, for the vault (None: nothing new was read, or a database's rows)
    raw: RawCapture | None = None
    #: what the batch adds to the coverage ledger (``sources.coverage.Tally``): set by
    #: the JSONL readers per record; None: ``pipeline.readahead`` tallies the entries
    coverage: Any = None


def quarantine_row(
    path: Path,
    offset: int,
    raw: bytes,
    reason: str,
    action: str = "skipped",
    *,
    length: int | None = None,
    sha256: str | None = None,
) -> dict:
    """A quarantine record (an item of ``Batch.quarantine``): path, byte offset (or the
    rowid of a database row) and length of the line (bytes), the reason, the action
    (``skipped``: not ingested; ``repaired``: ingested with replacements, or split into
    the records it held), ``raw_sha256`` (SHA-256 hex of the complete raw bytes: how
    compress verifies that the store holds the line) and ``raw``: up to 16 MiB of the
    line with its secrets redacted (``transforms.redact.redact_bytes``; the raw bytes
    never reach the store). The reason is redacted too (parser errors may quote the
    line). A line over the line cap (``max_line_bytes``) is never held whole: its
    reader passes only its head as ``raw`` with the whole line's ``length`` and
    ``sha256``."""
    from ctxkeep.transforms.redact import redact, redact_bytes

    raw = bytes(raw)
    return {
        "path": str(path),
        "offset": offset,
        "length": len(raw) if length is None else length,
        "reason": redact(reason),
        "action": action,
        "raw_sha256": hashlib.sha256(raw).hexdigest() if sha256 is None else sha256,
        "raw": redact_bytes(raw[:QUARANTINE_RAW_MAX]),
    }


#: the line cap: a JSONL line (or a whole document) longer than this many MiB is
#: quarantined as its SHA-256, size and head, never held in memory whole (an ingest's
#: peak RSS stays bounded whatever one file holds). 16 MiB: real tool results and
#: pasted images reach several MB (a 3 MB line is ingested), and what one line costs
#: the ingest (parse, redaction, chunks, token counts, in two processes) is ~10x its
#: size: measured whole-process peak RSS (tests/bench/bench_rss.py) 220 MB for a 1 MB
#: or 8 MB text line, 327 MB for 16 MB, 537 MB for 30 MB (over the 400 MB budget)
DEFAULT_MAX_LINE_MB = 16
#: the cap of a document its agent rewrites whole (mode ``rewrite``: Gemini CLI,
#: Cline family, Continue), in line caps: the document is parsed whole, like a line
DOCUMENT_CAP_FACTOR = 1
#: bytes of an over-cap line's head kept in the quarantine (redacted)
OVERSIZE_HEAD_BYTES = 4096
#: the environment variable that sets the line cap (MiB) for this process and the
#: reader processes it starts; ``config.toml``'s ``[ingest] max_line_mb`` sets it
MAX_LINE_ENV = "CTXKEEP_MAX_LINE_MB"


def max_line_bytes() -> int:
    """The line cap in bytes: ``$CTXKEEP_MAX_LINE_MB`` (MiB, a positive number) when set
    and valid, else ``DEFAULT_MAX_LINE_MB`` (read at each call)."""
    v = os.environ.get(MAX_LINE_ENV)
    try:
        mb = float(v) if v else DEFAULT_MAX_LINE_MB
    except ValueError:
        mb = DEFAULT_MAX_LINE_MB
    return int((mb if mb > 0 else DEFAULT_MAX_LINE_MB) * 1024 * 1024)


#: a document (or an unended last line of an append file) whose mtime is older than this is complete (the agent is not writing it);
#: ``$CTXKEEP_IDLE_SECONDS`` overrides it (read at each call;
#: ``readers.document`` and ``readers.jsonl`` use it)
IDLE_SECONDS = 120


def idle_seconds() -> float:
    """Seconds since its last write after which a file counts as idle (complete):
    ``$CTXKEEP_IDLE_SECONDS`` if set, else ``IDLE_SECONDS``."""
    v = os.environ.get("CTXKEEP_IDLE_SECONDS")
    try:
        return float(v) if v is not None else IDLE_SECONDS
    except ValueError:
        return IDLE_SECONDS


class OversizeLine:
    """A line longer than the cap, taken in piece by piece: its start offset, size,
    SHA-256 and head, never the whole line (``feed`` each piece; ``row`` makes its
    quarantine record)."""

    def __init__(self, start: int, cap: int) -> None:
        self.start = start
        self.cap = cap
        self.size = 0
        self.head = b""
        self._hash = hashlib.sha256()

    def feed(self, piece) -> None:
        """Take the next bytes of the line (bytes, bytearray or memoryview)."""
        if len(self.head) < OVERSIZE_HEAD_BYTES:
            self.head += bytes(piece[: OVERSIZE_HEAD_BYTES - len(self.head)])
        self._hash.update(piece)
        self.size += len(piece)

    @property
    def sha256(self) -> str:
        """SHA-256 hex of the bytes fed so far."""
        return self._hash.hexdigest()

    def row(self, path: Path, what: str = "line") -> dict:
        """The quarantine record: offset, the whole line's size and SHA-256, its head."""
        return quarantine_row(
            path,
            self.start,
            self.head,
            f"{what} of {self.size:,} bytes is over the cap of {self.cap:,} bytes "
            f"([ingest] max_line_mb): kept as its SHA-256, size and first "
            f"{len(self.head):,} bytes",
            length=self.size,
            sha256=self.sha256,
        )


# ---------------------------------------------------------------- the protocols


@runtime_checkable
class Source(Protocol):
    """What every source provides (see the module doc)."""

    AGENT: str
    PARSER_VERSION: int
    MODE: Mode

    def discover(self, ctx: DiscoveryContext) -> Discovery: ...

    def read(
        self, file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]: ...


@runtime_checkable
class ClaimsPaths(Protocol):
    """A source that recognizes its own files given with ``--path``."""

    def matches(self, path: Path) -> bool: ...


@runtime_checkable
class ImportOnly(Protocol):
    """A source of files the user names, never found in the home: a data export (the
    ChatGPT and Claude.ai ``conversations.json``) read with ``ingest --path FILE``. Its
    ``discover`` looks only in the dirs configured for it and says so in ``reason``."""

    IMPORT_ONLY: bool


@runtime_checkable
class ModeByPath(Protocol):
    """A source whose files are of several modes (e.g. Gemini CLI's ``.json`` documents
    and ``.jsonl`` logs): the mode of a ``--path`` file."""

    def mode_for(self, path: Path) -> FileMode: ...


@runtime_checkable
class ChangeTest(Protocol):
    """A source with its own test that a (non-``sqlite``) file holds nothing new."""

    def unchanged(self, file: SourceFile, wm: Watermark | None) -> bool: ...


@runtime_checkable
class SharedIndex(Protocol):
    """A source with a sidecar its sessions share (``readers.sidecar.SHARED``: Kiro
    IDE's ``sessions.json``) that names sessions one by one: ``shared_without(data,
    sessions)`` is that file's bytes without what it holds of ``sessions`` (session
    ids), ``data`` itself when it holds nothing of them or does not read. A purge
    rewrites the vault's copy so (``sinks.vault.shared``), and an ingest captures a
    new version so while the sessions are tombstoned."""

    def shared_without(self, data: bytes, sessions: Collection[str]) -> bytes: ...


@runtime_checkable
class RecordParser(Protocol):
    """A JSONL source whose line parser can be replayed outside ``read`` (compress asks
    it which entries each line makes)."""

    def init_state(self, file: SourceFile) -> dict: ...

    def parse_record(self, rec: dict, offset: int, line_hash: str, state: dict, src: str) -> list[dict]: ...


def check_source(src: Any) -> Source:
    """``src`` (a module or object) when it fulfils ``Source``; raises TypeError naming
    what is missing or wrong (a ``MODE`` outside ``Mode``, a non-positive
    ``PARSER_VERSION``, a member that is not callable)."""
    name = getattr(src, "__name__", type(src).__name__)
    if not isinstance(src, Source):
        missing = [m for m in ("AGENT", "PARSER_VERSION", "MODE", "discover", "read") if not hasattr(src, m)]
        raise TypeError(f"source {name} lacks {', '.join(missing)}")
    if not isinstance(src.AGENT, str) or not src.AGENT:
        raise TypeError(f"source {name}: AGENT must be a non-empty str")
    if not isinstance(src.PARSER_VERSION, int) or src.PARSER_VERSION < 1:
        raise TypeError(f"source {name}: PARSER_VERSION must be an int >= 1")
    if src.MODE not in get_args(Mode):
        raise TypeError(f"source {name}: MODE {src.MODE!r} is not one of {get_args(Mode)}")
    for m in ("discover", "read", "matches", "mode_for", "unchanged", "init_state", "parse_record"):
        if hasattr(src, m) and not callable(getattr(src, m)):
            raise TypeError(f"source {name}: {m} is not callable")
    return src
