"""The one UTC time format (``ctxkeep.timeutil``): exact text, UTC conversion, epoch
times, parsing, and the Polars spellings giving the same text."""

from __future__ import annotations

import datetime as dt
import re

import polars as pl
import pytest

from ctxkeep import timeutil as tu

T = dt.datetime(2025, 6, 1, 12, 34, 56, 789012, tzinfo=dt.UTC)


def test_format_is_iso_utc_with_microseconds_and_z():
    assert tu.format_utc(T) == "2025-06-01T12:34:56.789012Z"
    assert tu.format_utc(T.replace(microsecond=0)) == "2025-06-01T12:34:56.000000Z"  # fixed width
    assert tu.format_utc(T, whole_seconds=True) == "2025-06-01T12:34:56Z"


def test_other_offsets_are_converted_to_utc():
    cest = dt.timezone(dt.timedelta(hours=2))
    assert (
        tu.format_utc(dt.datetime(2025, 6, 1, 14, 34, 56, 789012, tzinfo=cest))
        == "2025-06-01T12:34:56.789012Z"
    )
    # a naive time is local time (datetime.astimezone)
    naive = dt.datetime(2025, 6, 1, 14, 0, 0)
    assert tu.format_utc(naive) == naive.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_epoch_seconds():
    assert tu.format_epoch(0) == "1970-01-01T00:00:00.000000Z"
    assert tu.format_epoch(1748781296.789012) == "2025-06-01T12:34:56.789012Z"
    assert tu.format_epoch(1748781296.9, whole_seconds=True) == "2025-06-01T12:34:56Z"
    with pytest.raises((OverflowError, OSError, ValueError)):
        tu.format_epoch(1e20)


def test_now_and_stamp():
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    s = tu.now_iso()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", s)
    assert tu.parse_utc(s) >= before
    assert tu.utc_now().tzinfo == dt.UTC
    assert tu.stamp(T) == "20250601T123456Z"
    assert re.fullmatch(r"\d{8}T\d{6}Z", tu.stamp())


def test_parse():
    assert tu.parse_utc("2025-06-01T12:34:56.789012Z") == T
    assert tu.parse_utc("2025-06-01T14:34:56.789012+02:00") == T
    assert tu.parse_utc("2025-06-01T12:34:56.789012") == T  # naive is UTC
    assert tu.parse_utc("2025-06-01") == dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    assert tu.parse_utc(tu.format_utc(T)) == T  # round trip
    with pytest.raises(ValueError):
        tu.parse_utc("June 1st")


def test_text_order_is_time_order():
    times = [T + dt.timedelta(microseconds=d) for d in (-1_000_001, -1, 0, 1, 999_999, 10**9)]
    texts = [tu.format_utc(t) for t in times]
    assert sorted(texts) == texts


def test_polars_formats_give_and_read_the_same_text():
    df = pl.DataFrame({"ts": [T, T.replace(microsecond=0)]}, schema={"ts": pl.Datetime("us", "UTC")})
    out = df.select(pl.col("ts").dt.strftime(tu.UTC_FORMAT_POLARS))["ts"].to_list()
    assert out == [tu.format_utc(T), tu.format_utc(T.replace(microsecond=0))]
    back = (
        pl.Series(out + ["2025-06-01T12:34:56.789Z"])
        .str.to_datetime(tu.UTC_PARSE_POLARS, time_zone="UTC", time_unit="us")
        .to_list()
    )
    assert back == [T, T.replace(microsecond=0), T.replace(microsecond=789000)]
