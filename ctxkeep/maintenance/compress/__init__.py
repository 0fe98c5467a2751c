"""Compress: shrink oversized Claude Code and Codex session files once the store holds
every line they drop. One vertical package:

- ``plan``: pure: which lines to cut, which records to re-link, the marker record;
- ``rewrite``: writing the agent's file: temp file, fsync, validate, atomic rename,
  verified backups, restore, backup pruning;
- ``run``: the operation: health check, file selection, ingest and verify against the
  store, rewrite, mark removed entries ``archived``, the run record, restore.

``flows.compress`` wraps ``run_compress`` in a Prefect flow; the CLI calls the entry
points below (``--check``, ``--dry-run``, ``--no-prefect``, ``--restore``).
"""

from ctxkeep.maintenance.compress.run import (
    FileCheck,
    FileResult,
    check_files,
    compress_file,
    files_to_compress,
    hooks,
    restore_file,
    run_compress,
)

__all__ = [
    "FileCheck",
    "FileResult",
    "check_files",
    "compress_file",
    "files_to_compress",
    "hooks",
    "restore_file",
    "run_compress",
]
