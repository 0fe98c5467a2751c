"""The user's price file, ``<home>/prices.toml``: whether it is sound.

Its format is ``transforms.cost.parse_prices_toml``'s; the DuckDB sync prices usage with
it (``sinks.duckdb.sync_usage``). A file that does not parse priced nothing and left every
report saying "no usage" with exit 0 (newuser17 F1): the readers of DuckDB ask
``prices_error`` first (the reports and ``reindex`` raise it, ``doctor`` shows it,
``analytics_current.bring_current`` says it as its note). Kept apart from
``analytics_current`` and ``sinks.duckdb``, which both use it (no import cycle).
"""

from __future__ import annotations

from pathlib import Path

from ctxkeep.errors import ConfigError
from ctxkeep.sinks.files import PRICES_FILE


def prices_error(home: Path, raw: bytes | None = None) -> ConfigError | None:
    """The error of ``<home>/prices.toml`` (``raw``: its bytes, read here when None), or
    None when it is absent or sound: bad UTF-8, TOML that does not parse, or a model's
    table ``transforms.cost.parse_prices_toml`` refuses (a non-numeric rate, no
    ``input_mtok``...). A broken price file priced nothing and every report said "no
    usage" with exit 0 (newuser17 F1): the reports, ``reindex`` and ``doctor`` raise or
    show this error instead, and a sync leaves DuckDB's last prices as they were."""
    p = Path(home) / PRICES_FILE
    if raw is None:
        try:
            raw = p.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            return ConfigError(
                f"prices.toml cannot be read: {e.strerror}", where=str(p), hint="check its permissions"
            )
    try:
        parse_prices(home, raw)
    except ConfigError as e:
        return e
    return None


def parse_prices(home: Path, raw: bytes) -> dict:
    """The overrides of ``<home>/prices.toml`` whose bytes are ``raw`` (empty: none),
    ``transforms.cost.parse_prices_toml``'s ``{model: Override}``. Raises ConfigError
    naming the file for bad UTF-8, TOML that does not parse or a model's table the
    parser refuses."""
    if not raw:
        return {}
    from ctxkeep.transforms import cost  # (genai-prices is loaded on first use, not here)

    try:
        return cost.parse_prices_toml(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:  # tomllib.TOMLDecodeError is a ValueError
        msg = (str(e).splitlines() or [type(e).__name__])[0]
        msg = msg if msg.startswith("prices.toml") else f"prices.toml does not parse: {msg}"
        raise ConfigError(
            msg,
            where=str(Path(home) / PRICES_FILE),
            hint="fix it or move it away: no cost is computed until then",
        ) from None
