"""Sidecar files: what an agent keeps beside a session's transcript that the transcript
does not hold and a restore needs to give the session back whole (``sinks.vault``,
docs/design.md "The vault", sidecars). A source's discovery adds them as files of mode
``rewrite`` with ``SIDECAR`` (their kind) and ``SIDECAR_OF`` (the transcript they
belong to) in their meta; ``read_sidecar`` reads one whole, each version a vault
document (redacted like every capture), and derives no entry from it.

Which files (sources: the corpus, ``shared/corpus/SOURCES.md``, and the agents' public
issue threads named below):

- Claude Code v2.1 ``<project>/<session>/subagents/agent-<id>.meta.json``
  (``{agentType, worktreePath, description}``: the corpus' ef958aa1 session) and a
  workflow run's ``subagents/workflows/<run>/agent-<id>.meta.json`` (label, phase,
  model) and ``journal.jsonl`` (the run's ``started``/``result`` lines per agent);
- Claude Code v2.x ``<project>/<session>/tool-results/<tool use id>.txt``: a tool
  output too large to inline, which the transcript names (``<persisted-output>`` …
  ``Full output saved to: …/tool-results/<id>.txt``, with a 2 KB preview only) and the
  agent reads back with its Read tool (anthropics/claude-code issues #23948, #18095,
  #31914);
- Mistral Vibe ``session_<…>/meta.json`` (session id, parent, project, title, the
  session's cumulative token ``stats``: what ctxkeep's usage row is made of,
  ``sources.mistral_vibe``);
- the companion files other parsers read beside a transcript (``_util.json_object``):
  Grok's ``summary.json`` and ``signals.json``, Kiro CLI's ``<session>.json``, Qoder's
  ``<session>-session.json``, Codebuff's ``run-state.json`` and ``chat-meta.json``;
- Claude Code's todo lists ``<config dir>/todos/<session>-agent-<agent>.json`` (outside
  the session's folder: ``sources.claude_code.TODOS``), the Cline family's
  ``task_metadata.json`` (``sources.vscode_family.METADATA``), and Kiro IDE's
  per-workspace ``sessions.json`` index, the one sidecar several transcripts share
  (``SHARED``: ``sources.kiro_ide.INDEX``).

A reparse reads each sidecar's newest version where its parser looks for it
(``readers.jsonl.VIEW``, which ``_util.json_object`` honours).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path

from ctxkeep.sources.contract import (
    DEFAULT_BATCH_BYTES,
    Batch,
    Discovery,
    FileMode,
    RawCapture,
    SourceFile,
    Watermark,
)
from ctxkeep.sources.coverage import Tally

#: the meta key naming a sidecar's kind (``subagent-meta``, ``workflow-meta``,
#: ``workflow-journal``, ``tool-result``, ``session-meta``)
SIDECAR = "sidecar"
#: the meta key naming the transcript (its path as text) a sidecar belongs to
SIDECAR_OF = "sidecar_of"
#: the meta key marking a sidecar the transcripts of one folder share (Kiro IDE's
#: ``sessions.json``): its ``SIDECAR_OF`` names that folder, not one transcript
SHARED = "shared"
#: a sidecar's mode: a whole document, re-read when it changes
MODE: FileMode = "rewrite"
#: a sidecar watermark's ``state["ids"]``: it holds no record, keyed no way
IDS = "none"


def is_sidecar(file: SourceFile) -> bool:
    """True when ``file`` is a sidecar (its discovery meta says so)."""
    return bool(file.meta.get(SIDECAR))


def belongs(meta: Mapping, paths: Collection[str]) -> bool:
    """Whether a sidecar with discovery ``meta`` goes with one of the transcripts
    ``paths`` (a set, as text): its transcript is among them, or (``SHARED``) one of
    them lies in its folder."""
    of = meta.get(SIDECAR_OF)
    if of is None:
        return False
    if of in paths:
        return True
    return bool(meta.get(SHARED)) and any(os.path.dirname(p) == of for p in paths)


def without_sessions(agent: str, data: bytes, sessions: Collection[str]) -> bytes:
    """A shared sidecar's bytes ``data`` (``SHARED``, of ``agent``) without what it
    holds of ``sessions`` (session ids): its source's ``shared_without``
    (``contract.SharedIndex``); ``data`` itself when the source has none or
    ``sessions`` is empty."""
    if not sessions:
        return data
    from ctxkeep.sources import SOURCES

    fn = getattr(SOURCES.get(agent), "shared_without", None)
    return data if fn is None else fn(data, sessions)


def captured_without(raw: RawCapture, sessions: Collection[str]) -> RawCapture:
    """``raw`` (a capture for the vault) without what a shared sidecar holds of the
    tombstoned ``sessions`` (``without_sessions``: a purged Kiro IDE session's title
    stays out of a new version of its folder's index); ``raw`` itself for any other
    file or when nothing changes. Redacted again by the vault (``redacted`` dropped)."""
    if not isinstance(raw, RawCapture) or not raw.meta.get(SHARED) or not sessions or raw.sealed is not None:
        return raw  # (a reader process's stand-in, ``LateRaw``, is never a shared sidecar's)
    data = without_sessions(raw.agent, raw.data, sessions)
    if data == raw.data:
        return raw
    import dataclasses

    return dataclasses.replace(raw, data=data, redacted=None)


def meta(kind: str, of: object, **more: object) -> dict:
    """A sidecar's discovery meta: its ``kind``, the transcript ``of`` (a path) it
    belongs to and ``more`` facts (e.g. ``subagent``)."""
    return {SIDECAR: kind, SIDECAR_OF: str(of), **more}


def beside(agent: str, path: Path, names: Mapping[str, str]) -> list[SourceFile]:
    """The sidecars on disk of ``agent``'s transcript at ``path`` that ``names`` names
    (a file name in its folder → its kind), in ``names``' order."""
    out = []
    for name, kind in names.items():
        p = path.with_name(name)
        if p.is_file():
            out.append(SourceFile(agent, p, MODE, meta(kind, path)))
    return out


def add_all(d: Discovery, sidecars_of: Callable[[Path], list[SourceFile]]) -> None:
    """Add to ``d`` the sidecars (``sidecars_of(path)``, a source's) of each transcript
    it found."""
    for f in list(d.files):
        if not is_sidecar(f):
            for side in sidecars_of(f.path):
                d.add(side.path, MODE, side.meta)


ReadFn = Callable[..., Iterator[Batch]]


def reading(read: ReadFn, parser_version: int) -> ReadFn:
    """``read`` (a source's ``read(file, wm, batch_bytes)``) that reads a sidecar with
    ``read_sidecar`` instead."""

    def read_any(
        file: SourceFile, wm: Watermark | None, batch_bytes: int = DEFAULT_BATCH_BYTES
    ) -> Iterator[Batch]:
        if is_sidecar(file):
            return read_sidecar(file, wm, parser_version, batch_bytes)
        return read(file, wm, batch_bytes)

    read_any.__doc__ = read.__doc__
    return read_any


def _nothing(raw: bytes, doc: object, state: dict, idle: bool) -> list[dict]:
    return []


def read_sidecar(
    file: SourceFile, wm: Watermark | None, parser_version: int, batch_bytes: int = DEFAULT_BATCH_BYTES
) -> Iterator[Batch]:
    """Read sidecar ``file`` whole (``readers.document.read_document`` with no parse: any
    bytes, JSON or not, never quarantined): a changed file yields one batch with no
    entries, its bytes as the vault's next version (``Batch.raw``) and the watermark
    (``state["sha256"]``); an unchanged one only the watermark. Its bytes count in
    ``bytes_read``, no line in ``lines`` (no record), and the coverage ledger is left
    as it is (``Tally()``). A file over the document
    cap is quarantined as any document is (its SHA-256, size and head)."""
    from ctxkeep.sources.readers.document import read_document  # (discovery alone needs it not)

    for b in read_document(file, wm, parser_version, _nothing, batch_bytes, json_doc=False):
        b.coverage = Tally()
        b.lines = 0  # bytes read, but no record (the ingest's "records" count)
        if b.watermark is not None:
            # no records, so no ids: a state without ``ids`` reads as a Claude Code file
            # keyed by uuid alone (``claude_code.legacy_ids``, ``ddl.UUID_KEYED_WHERE``)
            # and the ingest advised ``reparse --rekey`` for every sidecar
            b.watermark.state["ids"] = IDS
        yield b


__all__ = [
    "IDS",
    "MODE",
    "SIDECAR",
    "SHARED",
    "SIDECAR_OF",
    "add_all",
    "belongs",
    "beside",
    "captured_without",
    "is_sidecar",
    "meta",
    "read_sidecar",
    "reading",
    "without_sessions",
]
