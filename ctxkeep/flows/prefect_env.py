"""Prefect settings ctxkeep applies before Prefect is imported (no Prefect import here).

- ``PREFECT_HOME`` defaults to ``<ctxkeep home>/prefect``: the temporary server's
  database then lives beside the store, works when ``$HOME`` is read-only, and never
  touches the user's own Prefect profile. An explicit ``PREFECT_HOME`` wins.
- Telemetry off (``PREFECT_SERVER_ANALYTICS_ENABLED=false``, ``DO_NOT_TRACK=1``): no
  network, no telemetry errors offline.
- ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=120``: on a 2-core machine the
  temporary server needs 15–30 s to start (the default timeout is 20 s).
"""

from __future__ import annotations

import os
from pathlib import Path

from ctxkeep.sinks.files import PREFECT_DIR


def configure_prefect(home: Path) -> None:
    """Set the environment defaults above for this process (existing values win)."""
    os.environ.setdefault("PREFECT_HOME", str(Path(home) / PREFECT_DIR))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
