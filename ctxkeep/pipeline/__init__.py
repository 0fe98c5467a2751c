"""The ingest engine without Prefect: plan, read-ahead, reader process, transform, writer,
analytics sync, and the notes path (MCP ``ctx_index``)."""
