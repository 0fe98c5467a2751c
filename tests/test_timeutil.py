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


# --- the one parser of --since/--until (issue 15) ------------------------------------

NOW = dt.datetime(2026, 1, 10, 12, 0, tzinfo=dt.UTC)


def test_read_when_forms():
    assert tu.read_when("2025-06-01") == dt.date(2025, 6, 1)
    assert tu.read_when("20250601") == dt.date(2025, 6, 1)  # ccusage's form
    assert tu.read_when("2025-06-01T12:30") == dt.datetime(2025, 6, 1, 12, 30, tzinfo=dt.UTC)
    assert tu.read_when("2025-06-01T12:30+02:00") == dt.datetime(2025, 6, 1, 10, 30, tzinfo=dt.UTC)
    assert tu.read_when("7d", now=NOW) == dt.datetime(2026, 1, 3, 12, 0, tzinfo=dt.UTC)
    assert tu.read_when("12h", now=NOW) == dt.datetime(2026, 1, 10, 0, 0, tzinfo=dt.UTC)
    assert tu.read_when("2w", now=NOW) == dt.datetime(2025, 12, 27, 12, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("bad", ["2025-13-45", "yesterday", "7 days", "2025/06/01", "", "d7"])
def test_read_when_refuses_other_text_naming_the_option(bad):
    from ctxkeep.errors import UsageError

    with pytest.raises(UsageError, match=r"\(--until\)"):
        tu.read_when(bad, where="--until")


def test_bounds_are_inclusive_days():
    # a date: since = its first instant, until = the next day's first instant (half-open)
    assert tu.when_bound("2025-06-01") == dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    assert tu.when_bound("2025-06-01", upper=True) == dt.datetime(2025, 6, 2, tzinfo=dt.UTC)
    # in a zone: that zone's day (Berlin is UTC+2 in June)
    assert tu.when_bound("2025-06-01", tz="Europe/Berlin") == dt.datetime(2025, 5, 31, 22, tzinfo=dt.UTC)
    # a datetime as until includes that instant, to the precision written (a minute here)
    t = dt.datetime(2025, 6, 1, 12, 30, tzinfo=dt.UTC)
    assert tu.when_bound("2025-06-01T12:30", upper=True) == t + dt.timedelta(minutes=1)
    assert tu.when_bound(None) is None and tu.when_bound("") is None
    assert tu.when_day("2025-06-01T23:30", tz="Europe/Berlin") == dt.date(2025, 6, 2)


def test_check_window():
    from ctxkeep.errors import UsageError

    lo, hi = tu.check_window("2025-06-01", "2025-06-01")  # one day, not an error
    assert hi - lo == dt.timedelta(days=1)
    with pytest.raises(UsageError, match="--since 2025-06-02 is after --until 2025-06-01"):
        tu.check_window("2025-06-02", "2025-06-01")


@pytest.mark.parametrize(
    "text,lo,hi",
    [
        ("2025-11-01T11:26", "2025-11-01T11:26:00", "2025-11-01T11:27:00"),  # the whole minute
        ("2025-11-01 11:26Z", "2025-11-01T11:26:00", "2025-11-01T11:27:00"),
        ("2025-11-01T11:26+02:00", "2025-11-01T09:26:00", "2025-11-01T09:27:00"),
        ("2025-11-01T11", "2025-11-01T11:00:00", "2025-11-01T12:00:00"),  # the whole hour
        ("2025-11-01T23:59", "2025-11-01T23:59:00", "2025-11-02T00:00:00"),
        ("2025-11-01T11:26:09", "2025-11-01T11:26:09", "2025-11-01T11:26:10"),  # the whole second
        ("2025-11-01T11:26:09.5", "2025-11-01T11:26:09.5", "2025-11-01T11:26:09.6"),
        ("2025-11-01T11:26:09.123456", "2025-11-01T11:26:09.123456", "2025-11-01T11:26:09.123457"),
    ],
)
def test_a_datetime_is_whole_to_the_precision_it_is_written_in(text, lo, hi):
    """``--until 2025-11-01T11:26`` takes in a record at 11:26:09 (hits show it as
    ``11:26``), as ``--until 2025-11-01`` takes in the whole day."""
    utc = lambda s: dt.datetime.fromisoformat(s).replace(tzinfo=dt.UTC)  # noqa: E731
    assert tu.when_bound(text) == utc(lo)
    assert tu.when_bound(text, upper=True) == utc(hi)
    # an age and a datetime object stay instants: one microsecond, the stored resolution
    t = utc(lo)
    assert tu.when_bound(t, upper=True) == t + dt.timedelta(microseconds=1)
    now = utc("2025-11-01T12:00:00")
    assert tu.when_bound("30m", upper=True, now=now) == utc("2025-11-01T11:30:00.000001")


def test_search_until_a_minute_takes_in_that_whole_minute(corpus_store):
    """The corpus codex rollout c61729d4 mentions setSectionResizeMode at 11:26:09,
    11:26:18 and 11:26:31 on 2025-11-01 (read from the file here); ``--until
    2025-11-01T11:26`` returns them and nothing later."""
    import json

    from tests.conftest import CORPUS_HOME

    home, _ = corpus_store
    rollout = next((CORPUS_HOME / ".codex/sessions").glob("**/rollout-*-c61729d4-*.jsonl"))
    in_minute = {
        json.loads(line)["timestamp"][:19]
        for line in rollout.read_text().splitlines()
        if "setSectionResizeMode" in line and json.loads(line)["timestamp"].startswith("2025-11-01T11:26")
    }
    assert in_minute, "the corpus file changed"
    from ctxkeep.query.search import Filters, search
    from ctxkeep.sinks import sqlite as sqlite_store

    conn = sqlite_store.connect(home, readonly=True)
    try:
        res = search(conn, "setSectionResizeMode", filters=Filters(until="2025-11-01T11:26"), limit=200)
    finally:
        conn.close()
    got = {h.as_dict()["ts"][:19] for h in res.hits}
    assert in_minute <= got, sorted(in_minute - got)
    assert max(got) < "2025-11-01T11:27"
