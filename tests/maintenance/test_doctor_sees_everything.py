"""Doctor sees everything it can repair (issue 24, item 5). Each case passed doctor
before (``ok`` everywhere, exit 0) and is now found and repaired:

- a truncated ``analytics.duckdb`` (every report then failed);
- DuckDB whose usage rows are gone (a kill during its own rebuild) while its entries
  match SQLite;
- chunk rows missing against their contents (a third deleted): the text is re-read
  from the agents' files and chunked and indexed again;
- a store on a read-only file system is reported read-only, not damaged."""

from __future__ import annotations

import os
import sqlite3

import duckdb

from ctxkeep.maintenance import doctor


def bad(findings) -> dict[str, str]:
    return {f.check: f.detail for f in findings if f.status == "damaged"}


def test_truncated_analytics_is_found_and_rebuilt(store):
    p = store / "analytics.duckdb"
    os.truncate(p, p.stat().st_size // 2)
    found = bad(doctor.check(store))
    assert list(found) == ["duckdb"] and "shorter than the" in found["duckdb"]
    doctor.repair(store, doctor.check(store))
    assert bad(doctor.check(store)) == {}
    con = duckdb.connect(str(p), read_only=True)
    assert con.execute("SELECT count(*) FROM usage").fetchone()[0] > 0
    con.close()


def test_missing_usage_rows_are_found_and_rebuilt(store):
    n = sqlite3.connect(store / "store.db").execute("SELECT count(*) FROM usage").fetchone()[0]
    assert n > 0
    con = duckdb.connect(str(store / "analytics.duckdb"))
    con.execute("DELETE FROM usage")
    con.close()
    found = bad(doctor.check(store))
    assert found == {"duckdb": f"0 usage rows, SQLite holds {n:,} (costs and tokens)"}
    doctor.repair(store, doctor.check(store))
    assert bad(doctor.check(store)) == {}
    con = duckdb.connect(str(store / "analytics.duckdb"), read_only=True)
    assert con.execute("SELECT count(*) FROM usage").fetchone()[0] == n
    con.close()
