"""The coverage ledger's tally of one read: per agent version, the records a reader
saw, how many it parsed into entries, how many it quarantined, and the record types it
did not understand (each with its count and one redacted sample line).

A ``Tally`` rides on each ``Batch`` (``Batch.coverage``) from the reader to the
store, where ``sinks.sqlite.coverage`` keeps one row per (file, agent version) in the
table ``coverage`` and sums them per agent, agent version and parser version
(``ctxkeep sources --coverage``). ``reset`` says the batch starts a read of the file
from its first byte (a new file, a changed parser, a rewritten document): the file's
earlier rows are replaced rather than added to.

How a parser reports (the JSONL readers, ``readers.jsonl.read_jsonl``): it sets
``state["_v"]`` to the agent version its records name (Claude Code ``version``, Codex
``session_meta.payload.cli_version``, …; kept in the watermark's state, so an append
read later knows it) and appends each record type it did not understand to
``state["_unknown"]`` (``unknown(state, type)``), which the reader takes after each
record. Sources that report nothing are tallied from their entries
(``from_entries``): one record per distinct ``record_id``, agent version unknown
(``""``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: characters of a record kept as the sample of a type not understood (redacted)
SAMPLE_CHARS = 600
#: record types not understood kept per (file, version) at most
UNKNOWN_TYPES_MAX = 50


def unknown(state: dict, rtype: object) -> None:
    """Note in a parser's ``state`` that the record just parsed has a type (or a part
    of a type: ``"block:<type>"``) the parser does not understand."""
    state.setdefault("_unknown", []).append(str(rtype)[:100])


#: what an agent version looks like (``2.1.114``, ``0.70.0-alpha.4``, ``v1.2``): a
#: placeholder such as ``[trimmed for fixture]`` is not one
_VERSION_RE = re.compile(r"^v?\d[0-9A-Za-z.+_-]{0,63}$")


def set_version(state: dict, version: object) -> None:
    """Note the agent version the records name from now on (ignored unless it looks
    like a version: a digit first, at most 64 characters of ``[0-9A-Za-z.+_-]``)."""
    if isinstance(version, str) and _VERSION_RE.match(version):
        state["_v"] = version


@dataclass
class VersionTally:
    """The figures of one agent version in one read (see the module doc)."""

    records: int = 0
    #: records understood (into entries, or skipped by design)
    parsed: int = 0
    entries: int = 0
    #: records quarantined, and bad lines (``bad``)
    quarantined: int = 0
    #: of ``quarantined``, the bad lines: no record, not in ``records`` (``Tally.bad_line``;
    #: this run's only, the ledger keeps ``quarantined``)
    bad: int = 0
    #: type → [count, redacted sample line (≤ ``SAMPLE_CHARS``)]
    unknown: dict[str, list] = field(default_factory=dict)


@dataclass
class Tally:
    """What one batch adds to the ledger for its file: ``versions`` maps an agent
    version (``""``: unknown) to its ``VersionTally``; ``reset`` (the read started at
    the file's first byte) replaces the file's rows."""

    reset: bool = False
    versions: dict[str, VersionTally] = field(default_factory=dict)

    def version(self, v: str | None) -> VersionTally:
        return self.versions.setdefault(v or "", VersionTally())

    def record(self, version: str | None, n_entries: int, unknown_types: list[str], raw: bytes) -> None:
        """Count one record of ``version`` that gave ``n_entries`` entries and named
        ``unknown_types``: a record of a type not understood is not ``parsed``; one
        understood is, even when it gives no entry by design (a Codex event that
        repeats a response item)."""
        t = self.version(version)
        t.records += 1
        t.entries += n_entries
        if unknown_types:
            for u in dict.fromkeys(unknown_types):
                self.add_unknown(t, u, raw)
        else:
            t.parsed += 1

    @staticmethod
    def add_unknown(t: VersionTally, rtype: str, raw: bytes | str) -> None:
        got = t.unknown.get(rtype)
        if got is not None:
            got[0] += 1
        elif len(t.unknown) < UNKNOWN_TYPES_MAX:
            t.unknown[rtype] = [1, sample(raw)]

    def bad_line(self, version: str | None, n: int = 1) -> None:
        """Count ``n`` bad lines met among ``version``'s records: not JSON (torn), not a
        JSON object, or over the line cap. Quarantined, but no record the parser saw: not
        in ``records``, so they do not lower the version's parse rate (format drift is
        about records the parser did not understand; newuser23 F4: a torn and an over-cap
        line made "75.0% of 8 records parsed")."""
        t = self.version(version)
        t.quarantined += n
        t.bad += n

    def quarantined(self, version: str | None, n: int = 1) -> None:
        """Count ``n`` records of ``version`` that went to the quarantine (a line that
        does not parse is a record seen)."""
        t = self.version(version)
        t.records += n
        t.quarantined += n


def sample(raw: bytes | str) -> str:
    """A sample of a record for the ledger: its first ``SAMPLE_CHARS`` characters,
    secrets redacted (``transforms.redact.redact``)."""
    from ctxkeep.transforms.redact import redact

    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes | bytearray) else str(raw)
    return redact(text[: SAMPLE_CHARS * 2])[:SAMPLE_CHARS]


#: the key under which a document parser may name one entry's agent version (a
#: document holding sessions of several versions: an Aider history); popped by
#: ``from_entries``, never stored
ENTRY_VERSION_KEY = "_agent_version"


def from_entries(entries: list[dict], n_quarantined: int, reset: bool, version: str | None = None) -> Tally:
    """The tally of a batch whose source reports no records itself: one record per
    distinct ``record_id`` of its entries (all parsed), its quarantined rows. The agent
    version is ``version`` (a document's, ``state["_v"]``: ``readers.document``), or
    the one an entry names under ``ENTRY_VERSION_KEY`` (popped from the entry), else
    unknown (``""``)."""
    t = Tally(reset=reset)
    ids: dict[str, set] = {}
    counts: dict[str, int] = {}
    for e in entries:
        v = e.pop(ENTRY_VERSION_KEY, None) or version or ""
        ids.setdefault(v, set()).add(e.get("record_id"))
        counts[v] = counts.get(v, 0) + 1
    if n_quarantined:
        ids.setdefault(version or "", set())
    for v, rids in ids.items():
        vt = t.version(v)
        vt.records = len(rids)
        vt.parsed = len(rids)
        vt.entries = counts.get(v, 0)
    if n_quarantined:
        vt = t.version(version or "")
        vt.records += n_quarantined
        vt.quarantined = n_quarantined
    return t
