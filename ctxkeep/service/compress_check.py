"""The health report of oversized session files (``ctxkeep compress --check``):
``compress_check(home, CheckRequest) -> CheckOutcome``. It changes nothing and needs no
store; what each file is and what a compress would save: ``maintenance.compress.
check_files``.

The request and outcome are dataclasses, not pydantic models as in the other questions
(as ``service.ingest``'s): ``compress --check`` is an interactive path (docs/design.md,
"Latency budget": ≤ 0.5 s) and pydantic's import was ~0.05-0.08 s of CPU of its
~0.3-0.45 s (issue 26). ``service.compress.CompressCheck`` documents the ``--json``
keys (docs/cli.md); tests validate the output with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctxkeep.errors import UsageError


@dataclass(frozen=True)
class CheckRequest:
    """The session files to check (``files``; empty: every enabled agent's).
    Raises UsageError for a path holding a NUL character (no file has one), as every
    other request does. Relative paths are made absolute (``paths.absolute_file``)."""

    files: tuple[Path, ...] = ()

    def __post_init__(self) -> None:
        for f in self.files:
            if "\x00" in str(f):
                raise UsageError(
                    "a NUL character (\\x00) is not allowed",
                    where="files",
                    hint="remove it: no query, path or label contains one",
                )
        from ctxkeep.paths import absolute_file

        # a relative FILE is taken from the caller's directory (newuser24 F1)
        object.__setattr__(self, "files", tuple(Path(absolute_file(f)) for f in self.files))


@dataclass
class CheckOutcome:
    """The report (the keys of ``service.compress.CompressCheck`` without
    ``"schema"``): thresholds, files, exceeding, problems."""

    report: dict

    def as_json(self) -> dict:
        """The ``--json`` object: ``"schema"`` first (``service.model.JSON_SCHEMA``,
        1), then the report."""
        return {"schema": 1, **self.report}


def compress_check(home: Path, req: CheckRequest) -> CheckOutcome:
    """Size, lines, OK or EXCEEDS, active, backups per file: no strategies planned
    (``--dry-run`` says what a compress would cut). Planning them was ~26 of the check's
    ~29 s on a 400 MB home (newuser16 F7; 0.28-0.42 against 0.013-0.016 CPU s here on a
    15 MB home of 34 files, 12 over a threshold): each file over a threshold was parsed
    and planned as a dry run does."""
    from ctxkeep.maintenance import compress as ops

    return CheckOutcome(ops.check_files(Path(home), paths=list(req.files) or None, savings=False))
