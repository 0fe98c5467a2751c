"""Transform: pure functions over Polars frames and Python values; no I/O."""
