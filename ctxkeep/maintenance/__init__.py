"""Maintenance of the store and of the agents' files: compress, purge, retention, reindex, backfill
(plain functions, no Prefect; ``flows`` wraps them)."""
