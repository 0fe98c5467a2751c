"""Index a text or a file as a note: ``index(home, IndexRequest) -> IndexResult``
(MCP ``ctx_index``). Which files may be read (``check_index_path``: the project, the
home directory and ``[mcp] index_roots``; never credentials or pseudo-files) and how
big a note may be (``MAX_INDEX_BYTES``) are decided here; the indexing itself:
``pipeline.notes.index_note``."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from ctxkeep.errors import UsageError
from ctxkeep.service.model import Request, Result

#: the largest note ``ctx_index`` takes by default, as text or as a file, in bytes
#: (``[mcp] max_index_mb`` in config.toml sets another): a note is a decision, a
#: summary, a document; a bigger one takes the server's memory (a 48 MB text took it to
#: 1.26 GB RSS, issue 24) and buries search under one entry
MAX_INDEX_BYTES = 8 * 1000 * 1000


class IndexRequest(Request):
    """What to index, under which label."""

    label: str = Field(description="source label (the note's session id); the same label again replaces it")
    text: str | None = Field(
        None, description=f"the text to index, up to {MAX_INDEX_BYTES:,} bytes (or give path)"
    )
    path: str | None = Field(None, description="a file to index (or give text)")
    project: str | None = Field(None, alias="projectDir", description="project the note belongs to")


class IndexResult(Result):
    """The note's entry."""

    label: str
    entry_id: str
    bytes: int = Field(description="UTF-8 bytes of the note")
    token_estimate: int
    chunks: int
    replaced: int = Field(description="entries the label held before (0: a new note)")
    source_path: str | None = Field(None, description="the file read (null: a text)")

    def line(self) -> str:
        verb = "replaced" if self.replaced else "indexed"
        return (
            f"{verb} note '{self.label}': entry {self.entry_id}, {self.bytes} bytes, "
            f"~{self.token_estimate} tokens, {self.chunks} chunk(s)"
        )


def max_index_bytes(home: Path) -> int:
    """The note size cap of the store at ``home``: ``[mcp] max_index_mb`` (MB), else
    ``MAX_INDEX_BYTES``."""
    from ctxkeep import config as cfgmod
    from ctxkeep.errors import ConfigError

    try:
        mb = cfgmod.load_config(Path(home)).mcp.max_index_mb
    except (OSError, ConfigError):
        return MAX_INDEX_BYTES
    return int(mb) * 10**6 if isinstance(mb, int) and mb > 0 else MAX_INDEX_BYTES


def _check_size(n: int, cap: int, what: str, where: str) -> None:
    if n > cap:
        raise UsageError(
            f"{what} is {n:,} bytes, over the {cap // 10**6} MB limit of a note",
            where=where,
            hint="index a summary or the document in parts (one label each); "
            "[mcp] max_index_mb in config.toml raises the limit",
        )


def index(home: Path, req: IndexRequest, *, cwd: Path) -> IndexResult:
    """Index ``req.text`` or the file ``req.path`` (relative to ``cwd``, the caller's
    project). Raises UsageError for both or neither, a text or file over
    ``MAX_INDEX_BYTES``, a path ``check_index_path`` refuses; StoreError, StoreBusy."""
    from ctxkeep.pipeline.notes import index_note
    from ctxkeep.sinks import sqlite as sqlite_store

    text, path = req.text, req.path
    if text is not None and path is not None:
        raise UsageError("give text or path, not both", where="text")
    cap = max_index_bytes(home)
    if text is not None:
        _check_size(len(text.encode("utf-8", "surrogatepass")), cap, "the text", "text")
    if path is not None:
        real = check_index_path(path, Path(cwd), index_roots(home))
        _check_size(real.stat().st_size, cap, path, "path")
        path = str(real)
    conn = sqlite_store.connect(Path(home))
    try:
        r = index_note(conn, req.label, text=text, path=path, project_dir=req.project)
    finally:
        conn.close()
    return IndexResult(**r)


#: file names ``ctx_index`` never reads: credentials and keys (fnmatch patterns,
#: matched on the lower-cased file name)
CREDENTIAL_NAMES = (
    ".env",
    ".env.*",
    "*.env",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "id_*",
    ".netrc",
    "_netrc",
    "shadow",
    "gshadow",
    "shadow-",
    "passwd-",
    "credentials",
    "credentials.*",
    "credentials*",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    "kubeconfig",
    "*.kubeconfig",
    "secrets.*",
    ".htpasswd",
)
#: directories whose files are never read (kernel and device pseudo-files)
SPECIAL_ROOTS = ("/proc", "/sys", "/dev", "/run")


def index_roots(home: Path) -> list[Path]:
    """Extra directories ``ctx_index`` may read, from ``[mcp] index_roots`` in
    ``<home>/config.toml`` (a list of paths; ``~`` expanded). Missing or unreadable
    config: none."""
    from ctxkeep import config as cfgmod
    from ctxkeep.errors import ConfigError

    try:
        roots = cfgmod.load_config(Path(home)).mcp.index_roots or []
    except (OSError, ConfigError):
        return []
    if isinstance(roots, str):
        roots = [roots]
    return [Path(os.path.expanduser(str(r))).resolve() for r in roots if isinstance(r, str) and r.strip()]


def check_index_path(path: str, cwd: Path, extra_roots: list[Path]) -> Path:
    """The file ``ctx_index`` may read for ``path`` (relative to ``cwd``), resolved
    through symlinks. Raises UsageError for: special files (``/proc``, ``/sys``,
    ``/dev``, ``/run``, sockets, FIFOs, devices), a hard link (``st_nlink > 1``: its
    other names cannot be found, as discovery's rule, ``sources.confine``), a file outside the project dir
    (``cwd``), the home dir and the configured ``[mcp] index_roots``, and credential
    files by name (``CREDENTIAL_NAMES``), each with what to do."""
    import fnmatch
    import stat

    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = cwd / p
    real = Path(os.path.realpath(p))
    for root in SPECIAL_ROOTS:
        if real == Path(root) or str(real).startswith(root + "/"):
            raise UsageError(
                f"{path} is a system pseudo-file, not a document", where="path", hint="give a text file"
            )
    try:
        st = real.stat()
    except OSError as e:
        raise UsageError(
            f"cannot read {path}: {e.strerror}",
            where="path",
            hint=f"give an existing file (a relative path is read from {cwd})",
        ) from None
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else "a socket, FIFO or device"
        raise UsageError(f"{path} is {what}, not a regular file", where="path", hint="give a text file")
    if st.st_nlink > 1:  # a hard link: its other names (maybe outside) cannot be found cheaply
        raise UsageError(
            f"{path} is a hard link ({st.st_nlink} names): its other names may be outside the project",
            where="path",
            hint="index a copy of the file",
        )
    for name in {p.name.lower(), real.name.lower()}:
        if any(fnmatch.fnmatchcase(name, pat) for pat in CREDENTIAL_NAMES):
            raise UsageError(
                f"{path} looks like a credential file ({name}): not indexed",
                where="path",
                hint="index a summary as text instead; secrets do not belong in the store",
            )
    roots = [Path(os.path.realpath(cwd)), Path(os.path.realpath(Path.home()))] + extra_roots
    if not any(real == r or r in real.parents for r in roots):
        raise UsageError(
            f"{path} is outside the project and home directories",
            where="path",
            hint="add its directory to [mcp] index_roots in config.toml to allow it",
        )
    return real
