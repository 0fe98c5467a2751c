"""The read side: search (tier 1), fetch (tier 2), stats; read-only over the stores."""
