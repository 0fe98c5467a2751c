"""The export flow (Prefect) over ``maintenance.export.export_parquet``: this store's
usage, sessions and entries into a team's Parquet lake, only the partitions that
changed. Scheduled by ``ctxkeep serve --lake DEST`` (``export-<machine>`` with
``--work-pool``, flows/team.py); the report is published as a table artifact (key
``export-summary``)."""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

from ctxkeep.flows.serve_lines import announced
from ctxkeep.maintenance import export as export_mod

#: key of the table artifact each export run publishes
SUMMARY_ARTIFACT = "export-summary"


@flow(name="export", log_prints=False, persist_result=False)
@announced("export")
def export_flow(home: str, dest: str, tables: list[str] | None = None, with_text: bool = False) -> dict:
    """Export ``tables`` (default usage, sessions, entries) of the store at ``home``
    into the lake ``dest`` (a directory or an fsspec URL). Returns
    ``export_parquet``'s report (bytes, rows, partitions written and removed per
    table); raises what it raises (StoreError for a lake that cannot be written,
    ConfigError for a machine name another store holds in that lake, …)."""
    log = get_run_logger()
    rep = export_mod.export_parquet(
        Path(home), dest, tables=tuple(tables or export_mod.TABLES), with_text=with_text
    )
    create_table_artifact(
        key=SUMMARY_ARTIFACT,
        table=[
            {
                "table": name,
                "partitions": t["partitions"],
                "written": len(t["written"]),
                "removed": len(t["removed"]),
                "rows_written": t["rows_written"],
                "bytes_written": t["bytes_written"],
            }
            for name, t in rep["tables"].items()
        ],
        description=f"ctxkeep export of {home} (machine {rep['machine']}) to {rep['dest']}",
    )
    log.info(
        "export to %s: %d partitions written, %d removed",
        rep["dest"],
        sum(len(t["written"]) for t in rep["tables"].values()),
        sum(len(t["removed"]) for t in rep["tables"].values()),
    )
    return rep
