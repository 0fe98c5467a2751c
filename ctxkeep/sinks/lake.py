"""The team's Parquet lake: where it is, and writing its partitions (pyarrow datasets).

Layout (Hive partitions, read by DuckDB ``read_parquet(..., hive_partitioning =
true)``, Spark, Trino's Hive connector, Polars and PyArrow)::

    DEST/<table>/machine=<name>/agent=<agent>/month=<YYYY-MM>/part-<machine id>-<UTC stamp>-<token>-<n>.parquet

``DEST`` is a local directory or an fsspec URL (``s3://``, ``gs://``, ``abfs://``,
``memory://`` …) whose filesystem package is installed (``ctxkeep[lake]``). The
partition columns are not stored in the files (Hive style); readers get them from the
path. A part file is named after the store's machine id (``sinks.machine``), so a
store touches only its own files.

Writes never leave a half-written part file where readers look: ``write_partitions``
writes the whole batch through ``pyarrow.dataset.write_dataset`` into a staging
directory ``DEST/<table>/_staging-<machine id>-<token>/`` (a leading ``_`` is hidden
from pyarrow, Spark and Trino, and outside the ``machine=*/agent=*/month=*`` glob
DuckDB is given), then renames each file into its partition. A failure removes the
staging directory; one left by a killed run is removed by the next
(``remove_staging``). Local files are 0600, directories 0700.
"""

from __future__ import annotations

import os
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from ctxkeep import timeutil
from ctxkeep.errors import StoreError, UsageError

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

#: the Hive partition columns, outermost first
PARTITIONS = ("machine", "agent", "month")
#: the month of a row without a time
NO_MONTH = "unknown"
#: the optional extra that brings the object-store filesystems
EXTRA = "ctxkeep[lake]"
#: fsspec protocols → the package that implements them (for the missing-package line)
_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
}


@dataclass
class Lake:
    """An opened lake: ``url`` (as given, normalized: an absolute path for a local
    dir), ``root`` (the lake's path on its filesystem, no trailing ``/``), ``local`` (a
    local directory: files get mode 0600) and, for a URL, ``fsspec`` (the fsspec
    filesystem, also given to DuckDB's ``register_filesystem``) and ``protocol``.
    ``fs`` is the pyarrow filesystem the writes go through (made on first use:
    importing pyarrow's dataset and filesystem modules costs ~1.5 s, which a report
    over the lake never needs)."""

    url: str
    root: str
    local: bool
    fsspec: AbstractFileSystem | None = None
    protocol: str | None = None

    @cached_property
    def fs(self):

        if self.local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fsspec))

    def path(self, *parts: str) -> str:
        """``root/part/part…`` on ``fs``."""
        return "/".join([self.root, *parts])

    def uri(self, *parts: str) -> str:
        """The same path as DuckDB reads it: a local path, or ``protocol://path``."""
        p = self.path(*parts)
        return p if self.local else f"{self.protocol}://{p}"


def _scheme(dest: str) -> str | None:
    if "://" not in dest:
        return None
    scheme = dest.split("://", 1)[0].lower()
    return None if scheme == "file" else scheme


def open_lake(dest: str) -> Lake:
    """Resolve ``dest`` (a directory, ``file://…`` or an fsspec URL) to a ``Lake``;
    nothing is created or written. Raises UsageError for an empty or unknown scheme,
    StoreError naming the package and ``EXTRA`` when the scheme's fsspec filesystem is
    not installed."""
    dest = (dest or "").strip()
    if not dest:
        raise UsageError("no lake given", where="DEST", hint="give a directory or an s3:// gs:// abfs:// URL")
    scheme = _scheme(dest)
    if scheme is None:
        local = dest.split("://", 1)[1] if dest.lower().startswith("file://") else dest
        root = str(Path(local).expanduser().resolve())
        return Lake(root, root.rstrip("/") or "/", True)
    try:
        import fsspec
        from fsspec.registry import known_implementations
    except ImportError as e:  # pragma: no cover - fsspec comes with the core install
        raise StoreError(f"{scheme}:// needs fsspec", where=dest, hint=f"install {EXTRA}") from e
    if scheme not in known_implementations and scheme not in fsspec.available_protocols():
        raise UsageError(
            f"unknown lake scheme {scheme}://",
            where=dest,
            hint="give a directory or an fsspec URL (s3://, gs://, abfs://)",
        )
    try:
        fs, path = fsspec.core.url_to_fs(dest)
    except ImportError as e:
        pkg = _PACKAGES.get(scheme) or known_implementations.get(scheme, {}).get("err", "its fsspec package")
        raise StoreError(
            f"the {scheme}:// lake needs {pkg}, which is not installed",
            where=dest,
            hint=f"install {EXTRA} (pip install '{EXTRA}' or uv sync --extra lake)",
        ) from e
    except Exception as e:  # bad credentials or options in the URL
        raise StoreError(f"cannot open the lake: {_first_line(e)}", where=dest, hint="check the URL") from e
    return Lake(dest.rstrip("/"), str(path).rstrip("/"), False, fs, scheme)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def check_writable(lake: Lake) -> None:
    """Create the lake's root if missing and prove it can be written (a probe file,
    written and removed). Raises StoreError: a local directory (or its nearest
    existing parent) without the owner-write bit - checked as bits, so root too is
    refused a read-only tree -, or any failure to create or write (unreachable,
    permission denied, not a directory)."""
    if lake.local:
        probe = Path(lake.root)
        while not probe.exists() and probe.parent != probe:
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise StoreError(
                f"cannot write the lake: {probe} is a file", where=lake.url, hint="give a directory"
            )
        if not (probe.stat().st_mode & stat.S_IWUSR):
            raise StoreError(
                f"cannot write the lake: {probe} is read-only",
                where=lake.url,
                hint="give a writable directory or URL",
            )
    name = lake.path(f"_ctxkeep-probe-{uuid.uuid4().hex}")
    try:
        _makedirs(lake, lake.root)
        with lake.fs.open_output_stream(name) as f:
            f.write(b"ctxkeep")
        lake.fs.delete_file(name)
    except Exception as e:
        raise StoreError(
            f"cannot write the lake: {_first_line(e)}",
            where=lake.url,
            hint="check that it exists, is reachable and writable",
        ) from e


def check_readable(lake: Lake) -> None:
    """Raise StoreError when a local lake's root is not a directory (an object store
    has no directories: its emptiness shows when the tables are listed)."""
    if lake.local and not Path(lake.root).is_dir():
        raise StoreError(
            "no lake here", where=lake.url, hint="run `ctxkeep export parquet DEST` on each machine first"
        )


def has_parts(lake: Lake, table: str) -> bool:
    """Whether ``<table>/machine=*/agent=*/month=*/`` holds a Parquet file (staging
    directories are not looked at). Raises StoreError when the lake cannot be listed
    (unreachable, credentials)."""
    pattern = f"{table}/machine=*/agent=*/month=*/*.parquet"
    try:
        if lake.local:
            return next(Path(lake.root).glob(pattern), None) is not None
        fs = lake.fsspec
        assert fs is not None  # a lake that is not local is an fsspec URL
        return bool(fs.glob(lake.path(pattern)))
    except OSError as e:
        raise StoreError(
            f"cannot read the lake: {_first_line(e)}", where=lake.url, hint="check the URL"
        ) from e


def _makedirs(lake: Lake, path: str) -> None:
    if lake.local:
        old = os.umask(0o077)
        try:
            Path(path).mkdir(parents=True, exist_ok=True, mode=0o700)
        finally:
            os.umask(old)
    else:
        lake.fs.create_dir(path, recursive=True)


def list_machine_files(lake: Lake, table: str, machine: str) -> dict[tuple[str, str], list[str]]:
    """The Parquet files under ``<table>/machine=<machine>/``, by ``(agent, month)``
    (``{}`` when there are none). One recursive listing."""

    base = lake.path(table, f"machine={machine}")
    try:
        infos = lake.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True, recursive=True))
    except FileNotFoundError:
        return {}
    out: dict[tuple[str, str], list[str]] = {}
    for info in infos:
        if info.type != pafs.FileType.File or not info.path.endswith(".parquet"):
            continue
        rel = info.path[len(base) :].strip("/").split("/")
        if len(rel) != 3 or not rel[0].startswith("agent=") or not rel[1].startswith("month="):
            continue
        out.setdefault((rel[0][6:], rel[1][6:]), []).append(info.path)
    return out


def remove_staging(lake: Lake, table: str, owner: str | None) -> int:
    """Delete staging directories ``<table>/_staging-<owner>-*`` (left by a killed
    export of this store; ``owner`` None: a store without a machine id). Returns how many."""

    base = lake.path(table)
    try:
        infos = lake.fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
    except FileNotFoundError:
        return 0
    n = 0
    for info in infos:
        if info.type == pafs.FileType.Directory and info.base_name.startswith(f"_staging-{owner}-"):
            lake.fs.delete_dir(info.path)
            n += 1
    return n


def write_partitions(
    lake: Lake,
    table: str,
    data,
    owner: str | None,
    *,
    on_file: Callable[[str], None] | None = None,
) -> dict[tuple[str, str], list[tuple[str, int]]]:
    """Write ``data`` (a ``pyarrow.Table`` holding the ``PARTITIONS`` columns, one machine)
    under ``<table>/`` as Hive partitions, ZSTD-compressed, through
    ``pyarrow.dataset.write_dataset``: into a staging directory first, then each file
    renamed into its partition, named ``part-<owner>-<UTC stamp>-<token>-<n>.parquet``
    (``owner`` None, a store without a machine id: ``part-None-…``).
    ``on_file(final_path)`` is called after each rename (a test kills the run there).
    Returns ``{(agent, month): [(final path, bytes)]}``. On failure the staging
    directory is removed and the exception re-raised; files already renamed stay
    (the caller's state still names the old ones, so the next export rewrites the
    partition)."""

    token = uuid.uuid4().hex[:8]
    stamp = f"{timeutil.stamp()}-{token}"
    staging = lake.path(table, f"_staging-{owner}-{token}")
    written: list[tuple[str, int]] = []

    def visit(f) -> None:
        written.append((f.path, f.size or 0))

    old = os.umask(0o077)
    try:
        _makedirs(lake, staging)
        fmt = ds.ParquetFileFormat()
        ds.write_dataset(
            data,
            staging,
            format=fmt,
            file_options=fmt.make_write_options(compression="zstd"),
            partitioning=ds.partitioning(pa.schema([(c, pa.string()) for c in PARTITIONS]), flavor="hive"),
            filesystem=lake.fs,
            basename_template=f"part-{owner}-{stamp}-{{i}}.parquet",
            existing_data_behavior="error",
            file_visitor=visit,
            max_rows_per_file=1_000_000,
            max_rows_per_group=128 * 1024,
        )
        out: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for path, size in written:
            rel = path[len(staging) :].strip("/")
            m, a, mo, name = rel.split("/")
            target_dir = lake.path(table, m, a, mo)
            _makedirs(lake, target_dir)
            target = f"{target_dir}/{name}"
            if lake.local:
                os.chmod(path, 0o600)
            lake.fs.move(path, target)
            if on_file:
                on_file(target)
            out.setdefault((a[len("agent=") :], mo[len("month=") :]), []).append((target, size))
        return out
    finally:
        os.umask(old)
        try:
            lake.fs.delete_dir(staging)
        except (FileNotFoundError, OSError):
            pass


def delete_files(lake: Lake, paths: list[str]) -> None:
    """Delete ``paths`` (missing ones are skipped), then their partition directories
    when left empty (local lakes; object stores have no directories)."""
    for p in paths:
        try:
            lake.fs.delete_file(p)
        except FileNotFoundError:
            continue
    if lake.local:
        for d in sorted({str(Path(p).parent) for p in paths}, key=len, reverse=True):
            for parent in (Path(d), Path(d).parent, Path(d).parent.parent):
                try:
                    parent.rmdir()
                except OSError:
                    break


__all__ = [
    "EXTRA",
    "NO_MONTH",
    "PARTITIONS",
    "Lake",
    "check_readable",
    "has_parts",
    "check_writable",
    "delete_files",
    "list_machine_files",
    "open_lake",
    "remove_staging",
    "write_partitions",
]
