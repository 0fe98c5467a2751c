"""The service layer: one request/result pair (pydantic) and one function per question
the front ends ask (the CLI, the MCP server, the marimo app and the exports only
render what these return). Each module answers one question."""
