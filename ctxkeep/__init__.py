"""ctxkeep: keep the context of AI coding agents (extract, transform, load; analytics; maintenance)."""
