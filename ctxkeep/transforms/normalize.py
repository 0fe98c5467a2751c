"""Normalize source entry dicts into the entry frame (``schema.ENTRY_SCHEMA``).

Pure functions: dicts in, Polars frames out. Hashes are SHA-256 (hashlib), stable
across Polars versions (``pl.Series.hash`` is not).
"""

from __future__ import annotations

import hashlib

import polars as pl

from ctxkeep.schema import ENTRY_SCHEMA, SOURCE_SCHEMA, USAGE_ROW_COLUMNS
from ctxkeep.transforms.redact import TEXT_REDACTED, redact_expr, redact_series

_IN_SCHEMA = SOURCE_SCHEMA


def _sha256(values: pl.Series, length: int | None = None) -> pl.Series:
    """SHA-256 hex of each string's UTF-8 bytes (the first ``length`` digits; None
    for null). The bytes are taken from the Arrow buffer (``cast(pl.Binary)``, a valid
    UTF-8 copy), not decoded to ``str`` and encoded again: 0.140 -> 0.096 CPU s for
    the 200 MB tree's 98,823 texts."""
    sha = hashlib.sha256
    out = [None if v is None else sha(v).hexdigest()[:length] for v in values.cast(pl.Binary).to_list()]
    return pl.Series(values.name, out, dtype=pl.String)


def source_frame(entries: list[dict]) -> pl.DataFrame:
    """Entry dicts (keys of ``SOURCE_SCHEMA``; missing keys are
    null; unknown keys ignored) as a frame with exactly those columns and dtypes."""
    if not entries:
        return pl.DataFrame(schema=_IN_SCHEMA)
    return pl.from_dicts(entries, schema=_IN_SCHEMA, strict=False)


#: the formats ``parse_ts`` tries, in order (after ``Z`` became ``+00:00``)
_TS_FORMATS = (
    "%Y-%m-%dT%H:%M:%S%.f%:z",
    "%Y-%m-%dT%H:%M:%S%:z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f",
)


def parse_ts(col: pl.Expr) -> pl.Expr:
    """ISO-8601 strings (``Z`` or offsets, optional fraction) → UTC datetime[us];
    unparsable → null: the first of ``_TS_FORMATS`` that parses."""
    s = col.str.replace(r"Z$", "+00:00")
    return pl.coalesce(
        *(s.str.to_datetime(f, time_zone="UTC", strict=False) for f in _TS_FORMATS)
    ).dt.cast_time_unit("us")


def parse_ts_series(values: pl.Series) -> pl.Series:
    """``parse_ts`` of a Series, the later formats tried only on the values the first
    did not parse (nearly all agents' timestamps take the first: 0.109 -> ~0.04 CPU s
    for the 200 MB tree's 98,823 entries, where ``parse_ts`` parses every value four
    times). The same values as ``parse_ts`` (tests/transforms/test_reader_cpu_exact.py)."""
    s = values.str.replace(r"Z$", "+00:00")
    out = s.str.to_datetime(_TS_FORMATS[0], time_zone="UTC", strict=False).dt.cast_time_unit("us")
    miss = (out.is_null() & s.is_not_null()).arg_true()
    if len(miss):
        rest = s.gather(miss).to_frame("ts").select(parse_ts(pl.col("ts")))["ts"]
        out = out.scatter(miss, rest)
    return out.rename(values.name)


def entries_frame(entries: list[dict]) -> pl.DataFrame:
    """The normalized entry frame of a batch.

    - ``text``: redacted (``transforms.redact``; a text redacted ahead, ``redact.
      TEXT_REDACTED``, taken as it is), '' when missing;
    - ``content_hash``: SHA-256 hex of the redacted text, null for '';
    - ``entry_id``: first 32 hex chars of SHA-256(agent, record_id, part), so the same
      record read twice, or repeated in a resumed session's file, has one id;
    - ``ts``: UTC datetime; ``status``: ``active``.
    Rows with a duplicate entry_id within the batch are dropped (first kept).
    Returns a frame with the columns and dtypes of ``ENTRY_SCHEMA``.
    """
    return unique_entries(normalized_rows(entries))


def unique_entries(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without rows whose entry_id an earlier row has (first kept, order
    kept): ``entries_frame`` = ``unique_entries(normalized_rows(...))``, also over the
    concatenated ``normalized_rows`` of consecutive batches."""
    return frame.unique(subset="entry_id", keep="first", maintain_order=True)


def normalized_rows(entries: list[dict]) -> pl.DataFrame:
    """``entries_frame`` without the dedup: one row per entry dict, in order (so the
    rows of consecutive batches can be cut apart by their entry counts). Columns and
    dtypes of ``ENTRY_SCHEMA``."""
    if not entries:
        return pl.DataFrame(schema=ENTRY_SCHEMA)
    df = source_frame(entries)
    df = df.with_columns(
        _redacted_text(entries, df["text"]).fill_null("").alias("text"),
        pl.col("part").fill_null(0),
        pl.col("is_sidechain").fill_null(False),
        pl.concat_str(
            [pl.col("agent"), pl.col("record_id").fill_null(""), pl.col("part").fill_null(0).cast(pl.String)],
            separator="\x1f",
        ).alias("_key"),
    )
    df = df.with_columns(
        pl.col("_key").map_batches(lambda s: _sha256(s, 32), return_dtype=pl.String).alias("entry_id"),
        pl.when(pl.col("text") != "")
        .then(pl.col("text"))
        .otherwise(None)
        .map_batches(_sha256, return_dtype=pl.String)
        .alias("content_hash"),
        pl.col("text").str.len_bytes().cast(pl.Int64).alias("text_bytes"),
        pl.col("ts").map_batches(parse_ts_series, return_dtype=pl.Datetime("us", "UTC")).alias("ts"),
        pl.lit("active").alias("status"),
        pl.lit(None, dtype=pl.Int64).alias("token_estimate"),
    )
    return df.select([pl.col(c).cast(t) for c, t in ENTRY_SCHEMA.items()])


def _redacted_text(entries: list[dict], text: pl.Series) -> pl.Expr:
    """The entries' texts (``text``, the frame's column) redacted: a text redacted
    ahead (``redact.TEXT_REDACTED`` of that very text: ``pipeline.stable_ids.rekey``)
    taken as it is, the others redacted here (``redact_expr``)."""
    done = [
        got[1] if (got := e.get(TEXT_REDACTED)) is not None and got[0] is e.get("text") else None
        for e in entries
    ]
    if not any(d is not None for d in done):
        return redact_expr("text")
    todo = [i for i, d in enumerate(done) if d is None]
    out = text.clone()
    if todo:
        idx = pl.Series(todo, dtype=pl.UInt32)
        out = out.scatter(idx, redact_series(text.gather(idx)))
    changed = [
        i for i, (d, e) in enumerate(zip(done, entries, strict=True)) if d is not None and d is not e["text"]
    ]
    if changed:
        out = out.scatter(
            pl.Series(changed, dtype=pl.UInt32), pl.Series([done[i] for i in changed], dtype=pl.String)
        )
    return pl.lit(out)


def contents_frame(entries: pl.DataFrame) -> pl.DataFrame:
    """Distinct contents of an entry frame: ``content_hash`` (str), ``text`` (str),
    ``bytes`` (int64, UTF-8 bytes). Empty texts have no content."""
    return (
        entries.filter(pl.col("content_hash").is_not_null())
        .unique(subset="content_hash", keep="first", maintain_order=True)
        .select("content_hash", "text", pl.col("text_bytes").alias("bytes"))
    )


def usage_frame(entries: pl.DataFrame) -> pl.DataFrame:
    """Usage rows of an entry frame: entries with a ``usage_key``; within the batch the
    copy with the largest usage per key is kept (one Claude response is often logged
    as several lines with growing ``output_tokens``); rows whose usage is all zero
    (e.g. Claude Code's ``<synthetic>`` error messages) count nothing and are dropped,
    unless they carry a cost. A row whose token columns are all null and that
    carries a cost keeps them null: tokens the agent did not record (Crush and the Go
    opencode log a session's cost but only its last response's tokens: ``charm_db``;
    Codebuff bills in credits and logs no tokens: ``creditsUsed``).
    Columns: usage_key, agent,
    session_id, project_dir, ts, model, input/output/cache_read/cache_creation/
    reasoning tokens (int64, tokens), cache_creation_5m/1h tokens (int64, the parts of
    the cache creation written for 5 minutes / 1 hour; null when not split), cost_usd
    (float64, the cost the agent logged, USD; null when none), entry_id."""
    u = entries.filter(pl.col("usage_key").is_not_null())
    cols = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens", "reasoning_tokens"]
    unknown = pl.all_horizontal([pl.col(c).is_null() for c in cols]) & pl.col("cost_usd").is_not_null()
    u = (
        u.with_columns([pl.when(unknown).then(None).otherwise(pl.col(c).fill_null(0)).alias(c) for c in cols])
        .with_columns(pl.sum_horizontal(cols).alias("_total"))
        .filter((pl.col("_total") > 0) | (pl.col("cost_usd").fill_null(0) > 0))
    )
    return (
        u.sort("_total", descending=True, maintain_order=True)
        .unique(subset="usage_key", keep="first", maintain_order=True)
        .sort("source_offset")
        .select(*USAGE_ROW_COLUMNS)
    )
