"""Agent hooks: the runtime the installed hooks call (``runtime``: ``ctxkeep hook
AGENT EVENT``). It sits in the top layer with ``cli`` and ``mcp``: it runs the ingest
engine and builds resume snapshots, and never imports Prefect."""
