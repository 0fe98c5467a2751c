"""The figures of one ingest run (``Summary``), in a module of its own so that a no-op
ingest can report them without importing the engine (and Polars with it)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Summary:
    """A run's figures: files seen/read, raw bytes read, lines, new entries, quarantined
    lines, seconds, per-agent new entries, and a DuckDB sync note."""

    files: int = 0
    files_read: int = 0
    files_vanished: int = 0
    bytes: int = 0
    lines: int = 0
    entries_new: int = 0
    quarantined: int = 0
    status_changed: int = 0
    seconds: float = 0.0
    per_agent: dict = field(default_factory=dict)
    analytics: str = ""
    problems: list = field(default_factory=list)

    def as_dict(self) -> dict:
        return dict(self.__dict__)
