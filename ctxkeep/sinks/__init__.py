"""Load: the SQLite store (system of record, FTS5), the DuckDB analytics store."""
