"""Every store write goes through ``ctxkeep/sinks/`` (issue 22, "Every store write
through sinks/"): no SQL that changes a database outside it, and statements run outside
it only where the allow-list below says why."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "ctxkeep"

#: a string of SQL that changes a database
WRITE_SQL = re.compile(
    r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|REPLACE\s+INTO|"
    r"CREATE\s+(TEMP\s+|VIRTUAL\s+|UNIQUE\s+)?(TABLE|INDEX|VIEW|TRIGGER)|DROP\s+(TABLE|INDEX|VIEW)|"
    r"ALTER\s+TABLE|VACUUM|PRAGMA\s+\w+\s*=)",
    re.IGNORECASE,
)
#: a call that runs a statement or opens a database
RUNS_SQL = re.compile(r"\.(execute|executemany|executescript)\(|\b(sqlite3|duckdb)\.connect\(")
#: files outside sinks/ whose write SQL touches no store, and why
ALLOWED_WRITES = {
    "query/lake.py": "views in its own in-memory DuckDB over a Parquet lake",
    "sources/readers/sqlite.py": "PRAGMA query_only=1 on an agent's database (makes the connection read-only)",
    # landed after the move of maintenance's SQL into sinks/: to move there too
    "maintenance/reparse.py": "rebuilds a store copy from the vault (to move into sinks/)",
}

#: files outside sinks/ that run statements, and why that is their own job (reads only:
#: ``test_no_write_sql_outside_sinks`` holds for them too)
ALLOWED_READS = {
    # extract: the agents' own SQLite databases (Cursor, OpenCode, Goose, Crush), never
    # the store
    "sources/charm_db.py": "reads an agent's database",
    "sources/cursor.py": "reads an agent's database",
    "sources/goose.py": "reads an agent's database",
    "sources/opencode.py": "reads an agent's database",
    "sources/opencode_go.py": "reads an agent's database",
    "sources/zed.py": "reads an agent's database",
    "sources/antigravity.py": "reads an agent's database",
    "sources/devin.py": "reads an agent's database",
    "sources/forge.py": "reads an agent's database",
    "sources/hermes.py": "reads an agent's database",
    "sources/kiro.py": "reads an agent's database",
    "sources/trae.py": "reads an agent's database",
    "sources/warp.py": "reads an agent's database",
    "sources/windsurf.py": "reads an agent's database",
    "sources/readers/sqlite.py": "opens an agent's database read-only",
    "sources/readers/rows.py": "rebuilds an agent's database from the vault's rows (a scratch file)",
    # the query layer: its SELECTs over the store are its job
    "query/fetch.py": "the query layer's reads",
    "query/quarantine.py": "the query layer's reads",
    "query/resume.py": "the query layer's reads",
    "query/secrets.py": "the query layer's reads (redaction markers, their entries)",
    "query/search/retrieve.py": "the query layer's reads (FTS5 MATCH)",
    "query/search/split.py": "the query layer's reads (an FTS5 MATCH split by rowid range)",
    "query/sessions.py": "the query layer's reads",
    "query/stats.py": "the query layer's reads",
    "query/statusline.py": "the query layer's reads (the session's watermark, its usage)",
    "query/reports.py": "the report SQL over a connection sinks.analytics_read opened",
    "query/lake.py": "an in-memory DuckDB of views over a Parquet lake (no store)",
    # the export's DuckDB reads (the digests and rows it exports) on the analytics
    # connection sinks.duckdb opened and synced; its SQLite marks are sinks.sqlite.lake_marks
    "maintenance/export.py": "DuckDB reads of what it exports",
    # landed after the move of maintenance's SQL into sinks/: to move there too
    "maintenance/reparse.py": "reparse from the vault (to move into sinks/)",
    "maintenance/vault.py": "the vault's generations and files (to move into sinks/)",
    "service/sources.py": "the watermarks' notes per agent (to move into sinks/)",
    "notebooks/store.py": "a notebook's reads over the read-only connection it is given",
    "render/app_views.py": "the app's Store tab: quarantine counts over the read-only connection (to move into service/)",
    "hooks/worker.py": "the hook worker's read-only watermark lookup (latency budget)",
    # reads on a connection the pipeline holds
    "pipeline/plan.py": "reads the vault's file list on the plan's connection",
    "pipeline/notes.py": "counts a note's chunks after the load",
    "pipeline/summary.py": "reads the watermarks of an ingest summary",
    "pipeline/writer.py": "reads the rowids a load just wrote",
    # the hook path: one small read, without importing the store package (latency)
    "hooks/runtime.py": "the hooks' read-only lookups (latency budget)",
}


def _files():
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG).as_posix()
        if not rel.startswith("sinks/"):
            yield rel, p.read_text()


def _sql_strings(src: str):
    """The string constants of ``src`` that are not docstrings."""
    tree = ast.parse(src)
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            yield n.lineno, n.value


def test_no_write_sql_outside_sinks():
    found = [
        f"{rel}:{line}: {s[:60]!r}"
        for rel, src in _files()
        for line, s in _sql_strings(src)
        if WRITE_SQL.search(s) and not rel.startswith("sources/") and rel not in ALLOWED_WRITES
    ]
    assert found == []


def test_statements_outside_sinks_only_where_allowed():
    found = sorted({rel for rel, src in _files() if RUNS_SQL.search(src)})
    assert [rel for rel in found if rel not in ALLOWED_READS] == []
    # the allow-list stays short: an entry whose file runs no statement any more goes
    assert [rel for rel in ALLOWED_READS if rel not in found] == []


def test_maintenance_and_reports_open_no_store():
    for rel, src in _files():
        if rel.startswith(("maintenance/", "flows/")) and rel not in ALLOWED_READS:
            assert not RUNS_SQL.search(src), rel
    reports = (PKG / "query/reports.py").read_text()
    assert not re.search(r"\.connect\(", reports)


def test_the_guard_sees_a_write():
    """The patterns catch what they are for (a guard that matches nothing guards nothing)."""
    src = 'def f(c):\n    """DELETE FROM x in a docstring is fine."""\n    c.execute("DELETE FROM tombstones WHERE scope=?")\n'
    assert [WRITE_SQL.search(s) is not None for _, s in _sql_strings(src)] == [True]
    assert RUNS_SQL.search(src)
    assert WRITE_SQL.search("INSERT OR IGNORE INTO purge_files VALUES(?)")
    assert WRITE_SQL.search("PRAGMA secure_delete=ON")
    assert not WRITE_SQL.search("SELECT count(*) FROM entries")
