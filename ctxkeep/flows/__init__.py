"""Orchestration. ``pipeline`` holds the plain functions (no Prefect: the CLI, the MCP
server and tests call them directly); the other modules wrap them in Prefect flows."""
