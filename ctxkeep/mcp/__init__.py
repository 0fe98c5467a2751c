"""The MCP interface: the stdio server agents call (``ctx_search``, ``ctx_fetch`` …)."""
