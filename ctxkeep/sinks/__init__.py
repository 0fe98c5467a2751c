"""Load: the stores and nothing else: SQLite (system of record, FTS5), DuckDB (analytics),
Parquet (retention archive), the store lock and the registry of store file names."""
