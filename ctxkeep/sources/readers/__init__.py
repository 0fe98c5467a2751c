"""The three readers sources share: append-only JSONL, rewritten documents, SQLite databases."""
