"""The SQLite store (``store.db``): the system of record.

Tables:

- ``entry_rows``: one row per entry (``ddl.ENTRY_ROW_COLUMNS``: ``schema.STORED_COLUMNS``
  and ``ingested_at`` with ``source_path`` as ``file_id`` into ``files(file_id, path)``,
  ``content_hash`` as ``content_id`` into ``contents``, ``project_dir`` as
  ``project_id`` into ``projects`` and ``ingested_at`` as ``ingest_id`` into
  ``ingests`` (v10); ``ts`` as ISO-8601 UTC text, ``is_sidechain`` 0/1); ``rowid``
  orders rows for the DuckDB sync;
- ``entries``: the view of ``entry_rows`` with the ``STORED_COLUMNS`` and
  ``ingested_at`` (schema v9, ``ddl.ENTRIES_VIEW``; writable through INSTEAD OF
  triggers);
- ``contents``: one row per distinct text (``content_hash``, ``bytes``,
  ``token_estimate``, ``token_method``); the text itself lives in ``chunk_rows``
  (≤ 4 KiB each, concatenating back to the exact text; a title found in the text is
  stored as its span, v10), read through the view ``chunks`` (``ddl.CHUNKS_VIEW``);
- ``fts_words``: FTS5 ``porter unicode61`` over ``chunks`` (columns ``title``, the
  chunk's first line or heading, ``text``, and ``facets``, the filter tokens of the
  entries holding the text, ``transforms.facets``; external content: the text is
  stored once); its default rank is ``bm25(TITLE_WEIGHT, 1.0, 0.0)``: facets never
  rank;
- ``fts_grams``: FTS5 over CJK bigrams and identifier parts of chunks
  (``transforms.grams``; rowid = chunk_id) and the same ``facets``; rank
  ``bm25(1.0, 0.0)``;
- ``usage``: one row per counted API response (``usage_key``);
- ``usage_log``: the usage keys updated in place or deleted, logged by triggers
  (``ddl.USAGE_LOG_TRIGGERS``), so the DuckDB sync compares only them and the rows
  above its rowid mark (``sinks.duckdb.sync_usage``);
- ``coverage``: the coverage ledger (v12, ``coverage``): per session file and agent
  version, records seen, parsed, quarantined, types not understood;
- ``watermarks``, ``quarantine``, ``runs`` (``runs.recorded_run``), ``tombstones``,
  ``meta``;
- ``status_log``: every status change of a stored entry, in order (``seq``), so the
  DuckDB sync (rowid high-water mark) can replay changes to rows it already holds;
- ``archived``: ids of the entries retention moved to the Parquet archive;
- ``purge_files``: the sessions and source paths a purge's tombstone covers;
- ``media``: images, documents and tool-result strings compress moved out of a
  session file's kept lines (``media``), returned by ``ctxkeep show``.

WAL, ``synchronous=NORMAL``, a 30 s busy timeout; one writer at a time (writes use
``BEGIN IMMEDIATE``; maintenance runs also take the lock, ``sinks.lock``). The file is
created 0600.

One module per job, all reached through this package (``from ctxkeep.sinks import
sqlite as sqlite_store``): ``ddl`` (the one DDL registry), ``migrations`` (named,
ordered schema steps), ``connection`` (open, version check, transactions), ``fts`` (the
FTS5 tables and chunk facets), ``load`` (``load_batch``), ``lookup`` (reads ingest and
compress need), ``status`` (``apply_changes``: entry status and offsets, SQLite then
DuckDB), ``runs`` (``recorded_run``), ``sync_marks`` (how far DuckDB holds SQLite),
``params`` (long ``IN`` lists in slices).
"""

import importlib

#: where each name of this package lives, imported on first use (PEP 562): a reader
#: (``ctxkeep search``, ``stats``) imports ``connection`` and ``lookup`` only, not the
#: load, status, media, runs and sync modules of the writers (~15 ms CPU of a 0.2 s
#: ``ctxkeep search``); module -> the names it gives this package, space-separated
_EXPORTS: dict[str, str] = {
    "ctxkeep.sinks.sqlite.connection": "CACHE_KIB MIN_READ_VERSION begin check_version connect ensure_schema reading_cache schema_version sibling write",
    "ctxkeep.sinks.sqlite.coverage": "coverage_ledger",
    "ctxkeep.sinks.sqlite.ddl": "DDL SCHEMA_VERSION TITLE_WEIGHT UUID_KEYED_AGENTS",
    "ctxkeep.sinks.sqlite.fts": "automerge_settings bulk_begin bulk_end merge_segments rebuild_fts_tables refresh_facets settle_segments",
    "ctxkeep.sinks.sqlite.load": "load_batch with_index_terms",
    "ctxkeep.sinks.sqlite.lookup": "archived_entry_ids content_text entry_sessions existing_contents existing_entry_ids load_watermarks quarantined_hashes quarantined_redacted watermark_facts token_estimates tombstoned user_messages uuid_keyed_files",
    "ctxkeep.sinks.sqlite.media": "StoredMedia media_for put_media",
    "ctxkeep.sinks.sqlite.runs": "RunRecord recorded_run",
    "ctxkeep.sinks.sqlite.status": "Applied EntryChanges Relocation StatusChange apply_changes",
    "ctxkeep.sinks.sqlite.sync_marks": "analytics_behind analytics_built mark_analytics_synced usage_top",
    "ctxkeep.timeutil": "now_iso",
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names.split()}


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


__all__ = sorted(_MODULE_OF)
