"""The cost of API responses in USD: list prices from ``genai-prices`` (pydantic's
offline price data, shipped in its wheel; prices by request time, with cache read and
cache write rates), overridden or extended by a user ``prices.toml``.

Pure: no file or network access here (``genai-prices`` is used from its bundled
snapshot; its auto-update is never started). The DuckDB sink reads ``prices.toml`` and
hands its text to ``parse_prices_toml``.

genai-prices is loaded on first use (``genai``), not when this module is imported, and
without its package ``__init__``: that imports its auto-updater (``update_prices``:
the ``httpx2`` HTTP client and ``asyncio``) and reads its own version from the installed
metadata, none of which pricing from the bundled data uses (genai-prices 0.2.3:
``__init__.py`` imports ``update_prices``, which imports ``httpx2`` at its top). Its
``types``, ``data`` and ``data_snapshot`` modules are loaded as they are, under their
own names, so a later ``import genai_prices`` (a test) runs its ``__init__`` over the
same modules and classes.

Token conventions (``schema``): ``input_tokens`` is the *non-cached* input,
``cache_read_tokens`` / ``cache_creation_tokens`` the cached input read / written,
``output_tokens`` the output. ``genai-prices`` wants the total input with the cached
parts inside it, so a response is priced as ``Usage(input_tokens = input + cache_read +
cache_creation, cache_read_tokens, cache_write_tokens = cache_creation,
cache_write_1h_tokens = cache_creation_1h, output_tokens)``: ``cache_creation_1h_tokens``
(Claude Code's ``ephemeral_1h_input_tokens``) is the part of the cache creation written
for one hour, billed at genai-prices' ``cache_write_1h_mtok`` (Anthropic: 2x the input
price; the 5-minute write is 1.25x), the rest at ``cache_write_mtok``.
``reasoning_tokens`` are billed as output; they are added to the output only for the
agents whose logged output leaves them out (``schema.REASONING_OUTSIDE_OUTPUT``: Gemini CLI and
Qwen Code log ``thoughtsTokenCount`` beside ``candidatesTokenCount``; OpenCode's
``tokens.reasoning`` beside ``tokens.output``); OpenAI's ``output_tokens`` (Codex,
Copilot CLI) already include them.

Every response is priced at its own timestamp (a price with a start date applies to
the responses made from then on), and per response (Gemini's prices are tiered by the
input of one request).

Long-context tiers: a request whose input (non-cached + cache read + cache write)
exceeds a threshold is billed whole at the tier's rates. genai-prices 0.2.3 carries
them for Claude Sonnet 4.5, Sonnet 4.6 and Opus 4.6 (until 2026-03-13), Gemini
1.5/2.5/3 Pro, GPT-5.4/5.5 and later; it lacks Claude Sonnet 4's
(``LONG_CONTEXT``). ``prices.toml`` expresses a tier table too (``parse_prices_toml``).

The formula of a flat price (the rates of ``Pricer.rates``: input, output, cache read,
cache write, one-hour cache write, USD per MTok, times the billed counts above) is
written once, in SQL, where the DuckDB sink prices its ``usage`` rows
(``sinks.duckdb._upsert_slice``); a tiered price is genai-prices' own calculation
(``genai_tiered``) over the same billed counts. This module finds the rates; it does
not multiply them.
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import sys
import threading
import tomllib
import types
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache

#: Models an agent used when its file names none, by (agent, CLI version major.minor).
#: Codex 0.34 rollouts have no ``turn_context`` (so no model): its default was
#: ``gpt-5`` — openai/codex PR #2199 (2025-08-11, "gpt-5 has replaced
#: codex-mini-latest as the default"); ``gpt-5-codex`` became the default only with
#: PR #4076 (2025-09-23), after 0.34.
ASSUMED_MODELS: dict[tuple[str, str], str] = {("codex", "0.34"): "gpt-5"}


def assumed_model(agent: str, cli_version: str | None) -> str | None:
    """The documented default model of ``agent`` at ``cli_version`` (e.g. ``0.34.0``),
    or None when that version is not in ``ASSUMED_MODELS``."""
    if not cli_version:
        return None
    parts = cli_version.split(".")
    return ASSUMED_MODELS.get((agent, ".".join(parts[:2])))


Rates = tuple[float, float, float, float, float]

#: a price band: requests whose input tokens (non-cached + cache read + cache write)
#: are above ``lo`` and at most ``hi`` (None: no bound) pay ``Rates``; a flat price is
#: one band ``(-1, None, rates)``
Band = tuple[int, int | None, Rates]


@dataclass(frozen=True)
class Override:
    """A user price (USD per million tokens) from ``prices.toml``; a rate left out
    falls back to ``input_mtok`` (cache rates; the one-hour write: the cache write) or
    0 (output). ``input_mtok`` None: the base rates are genai-prices' (only ``tiers``
    given). ``tiers``: ``(above_input_tokens, Override)``, ascending."""

    input_mtok: float | None
    output_mtok: float = 0.0
    cache_read_mtok: float | None = None
    cache_write_mtok: float | None = None
    cache_write_1h_mtok: float | None = None
    tiers: tuple[tuple[int, Override], ...] = ()

    def rates(self) -> Rates:
        """(input, output, cache read, cache write, one-hour cache write) with the
        fallbacks above; needs ``input_mtok``."""
        assert self.input_mtok is not None
        inp = self.input_mtok
        cw = inp if self.cache_write_mtok is None else self.cache_write_mtok
        return (
            inp,
            self.output_mtok,
            inp if self.cache_read_mtok is None else self.cache_read_mtok,
            cw,
            cw if self.cache_write_1h_mtok is None else self.cache_write_1h_mtok,
        )


#: Long-context tiers genai-prices 0.2.3 lacks, by its model id (every alias it maps
#: there, e.g. ``claude-sonnet-4-20250514`` → ``claude-sonnet-4-0``). Claude Sonnet 4
#: with the 1M context window: a request above 200k input tokens pays $6 input,
#: $22.50 output per MTok, the cache rates scaled alike (5-minute write 1.25x = $7.50,
#: one-hour write 2x = $12, read 0.1x = $0.60) — Anthropic's pricing page, "Long
#: context pricing" (https://platform.claude.com/docs/en/about-claude/pricing; the
#: same tier genai-prices gives Sonnet 4.5).
LONG_CONTEXT: dict[str, tuple[tuple[int, Rates], ...]] = {
    "claude-sonnet-4-0": ((200_000, (6.0, 22.5, 0.6, 7.5, 12.0)),),
}


def _rate(t: dict, key: str, name: str) -> float | None:
    v = t.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ValueError(f"prices.toml: model {name!r} has a non-numeric rate")
    return float(v)


def _override(name: str, t: dict, *, need_input: bool) -> Override:
    if need_input and "input_mtok" not in t:
        raise ValueError(f"prices.toml: model {name!r} needs input_mtok")
    inp = _rate(t, "input_mtok", name)
    return Override(
        inp,
        _rate(t, "output_mtok", name) or 0.0,
        _rate(t, "cache_read_mtok", name),
        _rate(t, "cache_write_mtok", name),
        _rate(t, "cache_write_1h_mtok", name),
    )


def parse_prices_toml(text: str) -> dict[str, Override]:
    """The overrides of a ``prices.toml``: one table per model id (matched exactly,
    case-insensitively, before ``genai-prices``)::

        [models."my-local-model"]
        input_mtok = 0.5          # USD per million input tokens
        output_mtok = 1.5
        cache_read_mtok = 0.05    # optional
        cache_write_mtok = 0.6    # optional
        cache_write_1h_mtok = 1.0 # optional (a one-hour cache write; default: cache_write_mtok)

        # long-context tiers: a request whose input (non-cached + cache read + cache
        # write) is above the threshold pays the tier's rates for all its tokens
        [[models."my-local-model".tiers]]
        above_input_tokens = 200000
        input_mtok = 1.0
        output_mtok = 2.25        # other rates: optional, the same fallbacks

    A model with ``tiers`` may leave out ``input_mtok``: its base rates are then
    genai-prices' flat ones (a model genai-prices already tiers keeps genai-prices'
    tiers). Tiers replace ``LONG_CONTEXT``'s for that model. Raises ValueError (with
    the model named) for a table without ``input_mtok`` or ``tiers``, a non-numeric
    rate, a tier without ``input_mtok`` or a positive integer ``above_input_tokens``,
    or two tiers with one threshold; tomllib.TOMLDecodeError for bad TOML."""
    doc = tomllib.loads(text)
    out: dict[str, Override] = {}
    for name, t in (doc.get("models") or {}).items():
        if not isinstance(t, dict):
            raise ValueError(f"prices.toml: model {name!r} needs input_mtok")
        raw_tiers = t.get("tiers") or []
        base = _override(name, t, need_input=not raw_tiers)
        tiers = []
        for tier in raw_tiers if isinstance(raw_tiers, list) else [None]:
            above = tier.get("above_input_tokens") if isinstance(tier, dict) else None
            if (
                not isinstance(tier, dict)
                or isinstance(above, bool)
                or not isinstance(above, int)
                or above <= 0
            ):
                raise ValueError(
                    f"prices.toml: a tier of model {name!r} needs above_input_tokens (a whole number > 0)"
                )
            tiers.append((above, _override(name, tier, need_input=True)))
        if len({a for a, _ in tiers}) != len(tiers):
            raise ValueError(f"prices.toml: model {name!r} has two tiers with one above_input_tokens")
        out[name.lower()] = Override(
            base.input_mtok,
            base.output_mtok,
            base.cache_read_mtok,
            base.cache_write_mtok,
            base.cache_write_1h_mtok,
            tuple(sorted(tiers, key=lambda x: x[0])),
        )
    return out


def bands(base: Rates, tiers: tuple[tuple[int, Rates], ...]) -> list[Band]:
    """The bands of a base price and its tiers (ascending thresholds): the base up to
    the first threshold, each tier up to the next."""
    out: list[Band] = []
    lo, rates = -1, base
    for above, r in tiers:
        out.append((lo, above, rates))
        lo, rates = above, r
    out.append((lo, None, rates))
    return out


#: genai-prices' submodules its ``types`` imports inside functions (``from
#: genai_prices.decompose import …`` while pricing): loaded with the others, so such an
#: import finds them in ``sys.modules`` and never loads the package's ``__init__``
_CALL_TIME_MODULES = ("units", "decompose", "validation")
_genai_lock = threading.Lock()


def genai() -> types.SimpleNamespace:
    """genai-prices' ``data_snapshot`` module, its bundled snapshot loaded, and its
    ``Usage`` class, as ``.data_snapshot`` and ``.Usage``: loaded once per process
    without the package's ``__init__`` (the module doc; ~0.04 s of CPU and the HTTP
    client's modules saved, of ~0.15 s for genai-prices and pydantic). Raises
    ImportError when genai-prices is missing."""
    with _genai_lock:  # the analytics thread may load it while the main thread prices
        return _load_genai()


@lru_cache(maxsize=1)
def _load_genai() -> types.SimpleNamespace:
    name = "genai_prices"
    if name in sys.modules:  # imported whole already (its __init__ ran)
        import genai_prices

        return types.SimpleNamespace(data_snapshot=genai_prices.data_snapshot, Usage=genai_prices.Usage)
    else:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ImportError(name)
        # the package, its ``__init__`` not run, as the parent of its submodules while they
        # load; removed after, so a later ``import genai_prices`` runs the real one over them
        shell = importlib.util.module_from_spec(spec)
        sys.modules[name] = shell
        try:
            snapshot = importlib.import_module(f"{name}.data_snapshot")
            usage = importlib.import_module(f"{name}.types").Usage
            snapshot.get_snapshot()  # imports genai_prices.data: under the shell too
            for sub in _CALL_TIME_MODULES:  # found in sys.modules when a price is computed
                importlib.import_module(f"{name}.{sub}")
        finally:
            if sys.modules.get(name) is shell:
                del sys.modules[name]
    return types.SimpleNamespace(data_snapshot=snapshot, Usage=usage)


@lru_cache(maxsize=1024)
def _model(model: str):

    try:
        return genai().data_snapshot.get_snapshot().find_provider_model(model, None, None, None)[1]
    except LookupError:
        return None


@lru_cache(maxsize=8192)
def _model_price(model: str, day: dt.date):
    m = _model(model)
    if m is None:
        return None
    # the price in force at the end of that UTC day: start dates in the data are days
    return m.get_prices(dt.datetime.combine(day, dt.time(23, 59, 59), dt.UTC))


_TOKEN_RATES = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


@lru_cache(maxsize=8192)
def _flat_rates(model: str, day: dt.date) -> Rates | None:
    """(input, output, cache read, cache write, one-hour cache write) USD per MTok when
    the price is flat (no tiers) — then a response's price is linear in its tokens and
    is computed without genai-prices' per-call decomposition (~1 ms a response); a
    cache rate the data leaves out is the input rate, as genai-prices prices it. The
    one-hour rate is what genai-prices charges for one million one-hour write tokens
    (``cache_write_1h_mtok``, or its fallback when the data has none). None: tiered."""

    mp = _model_price(model, day)
    vals = [getattr(mp, k, None) for k in (*_TOKEN_RATES, "cache_write_1h_mtok")]
    if vals[0] is None or any(v is not None and not isinstance(v, Decimal) for v in vals):
        return None
    inp = float(vals[0])
    one_hour = mp.calc_price(
        genai().Usage(input_tokens=1_000_000, cache_write_tokens=1_000_000, cache_write_1h_tokens=1_000_000)
    )["total_price"]
    return (
        inp,
        float(vals[1] or 0),
        inp if vals[2] is None else float(vals[2]),
        inp if vals[3] is None else float(vals[3]),
        float(one_hour),
    )


@dataclass
class Pricer:
    """Finds the rates of responses' models; remembers the models it could not price
    (``unknown``)."""

    overrides: dict[str, Override] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)

    def rates(self, model: str | None, day: dt.date) -> list[Band] | None | str:
        """The price bands (``Band``: input-token range, then input, output, cache
        read, cache write, one-hour cache write rates, USD per MTok) of ``model`` on
        UTC ``day``: from ``prices.toml``, else genai-prices with ``LONG_CONTEXT``'s
        tiers; one band for a flat price. ``"tiered"`` when genai-prices tiers the price
        itself (price each response with ``genai_tiered``); None (and remembered in
        ``unknown``) when the model is empty or unknown."""
        if not model:
            return None
        o = self.overrides.get(model.lower())
        if o is not None and o.input_mtok is not None:
            return bands(o.rates(), tuple((a, t.rates()) for a, t in o.tiers))
        r = genai_rates(model, day)
        if r is None:
            self.unknown.add(model)
            return None
        if isinstance(r, str):
            return "tiered"
        if o is not None:  # tiers only: on genai-prices' base
            return bands(r, tuple((a, t.rates()) for a, t in o.tiers))
        m = _model(model)
        return bands(r, LONG_CONTEXT.get(m.id, ()) if m is not None else ())


def genai_rates(model: str, day: dt.date) -> Rates | None | str:
    """genai-prices' rates of ``model`` on UTC ``day`` (``prices.toml`` aside): the flat
    rates (``_flat_rates``), ``"tiered"``, or None for a model it does not know."""
    if _model_price(model, day) is None:
        return None
    flat = _flat_rates(model, day)
    return "tiered" if flat is None else flat


def response_cost(
    pricer: Pricer, model: str | None, day: dt.date, inp: int, cr: int, cw: int, h: int, out: int
) -> float | None:
    """The calculated price in USD of one response not stored yet (the status line's
    unread transcript tail): the SQL formula of ``sinks.duckdb._upsert_slice`` over the
    band of the request's input, or ``genai_tiered``; None for an unknown model. Counts
    as in ``genai_tiered``. Tests hold it equal to the sink's price of the same rows."""
    r = pricer.rates(model, day)
    if r is None or model is None:
        return None
    if isinstance(r, str):
        return genai_tiered(model, day, inp, cr, cw, h, out)
    n = inp + cr + cw
    for lo, hi, (ri, ro, rcr, rcw, rcw1h) in r:
        if n > lo and (hi is None or n <= hi):
            return (inp * ri + cr * rcr + (cw - h) * rcw + h * rcw1h + out * ro) / 1e6
    return None


def genai_tiered(model: str, day: dt.date, inp: int, cr: int, cw: int, h: int, out: int) -> float:
    """genai-prices' price in USD of one response of a tiered ``model`` on UTC ``day``:
    ``inp`` non-cached input, ``cr`` cache read, ``cw`` cache write of which ``h``
    one-hour, ``out`` output tokens (the module doc's conventions)."""

    usage = genai().Usage(
        input_tokens=inp + cr + cw,
        cache_read_tokens=cr,
        cache_write_tokens=cw,
        cache_write_1h_tokens=h,
        output_tokens=out,
    )
    return float(_model_price(model, day).calc_price(usage)["total_price"])
