"""Cost: list prices from genai-prices at each response's time, user overrides, modes,
model attribution. Expected values are worked by hand from the providers' list prices."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from ctxkeep.errors import ConfigError
from ctxkeep.sinks import duckdb as duckdb_store
from ctxkeep.transforms import cost
from dbhelpers import priced

UTC = dt.UTC


def test_claude_price_with_cache_read_and_write(tmp_path):
    # claude-sonnet-4: $3 input, $15 output, $0.30 cache read, $3.75 cache write per MTok
    [got] = priced(
        tmp_path,
        [
            (
                "claude-code",
                "claude-sonnet-4-20250514",
                dt.datetime(2025, 7, 1, tzinfo=UTC),
                1000,
                2000,
                30000,
                4000,
                0,
            )
        ],
    )
    assert got == pytest.approx((1000 * 3 + 2000 * 15 + 30000 * 0.3 + 4000 * 3.75) / 1e6, abs=1e-12)


def test_each_response_is_priced_at_its_own_time(tmp_path):
    # claude-sonnet-4-6: until 2026-03-13 a request above 200k input tokens paid $6/$22.50,
    # from then on $3/$15 flat (genai-prices' dated prices)
    before, after = priced(
        tmp_path,
        [
            (
                "claude-code",
                "claude-sonnet-4-6",
                dt.datetime(2026, 3, 1, 12, tzinfo=UTC),
                300_000,
                1000,
                0,
                0,
            ),
            (
                "claude-code",
                "claude-sonnet-4-6",
                dt.datetime(2026, 4, 1, 12, tzinfo=UTC),
                300_000,
                1000,
                0,
                0,
            ),
        ],
    )
    assert before == pytest.approx((300_000 * 6 + 1000 * 22.5) / 1e6, abs=1e-12)
    assert after == pytest.approx((300_000 * 3 + 1000 * 15) / 1e6, abs=1e-12)


def test_reasoning_is_billed_as_output_where_the_output_leaves_it_out(tmp_path):
    # gemini-2.5-flash: $0.30 input, $2.50 output, $0.03 cache read per MTok
    ts = dt.datetime(2025, 12, 3, tzinfo=UTC)
    gemini, codex = priced(
        tmp_path,
        [
            ("gemini-cli", "gemini-2.5-flash", ts, 1000, 2000, 30000, 0, 500),
            ("codex", "gemini-2.5-flash", ts, 1000, 2000, 30000, 0, 500),
        ],
    )
    assert gemini == pytest.approx((1000 * 0.3 + 2500 * 2.5 + 30000 * 0.03) / 1e6, abs=1e-12)
    # Codex (OpenAI): output_tokens already include the reasoning tokens
    assert codex == pytest.approx((1000 * 0.3 + 2000 * 2.5 + 30000 * 0.03) / 1e6, abs=1e-12)


def test_unknown_model_is_none_never_zero_and_remembered(tmp_path):
    assert priced(
        tmp_path, [("aider", "no-such-model-zz", None, 10, 10, 0, 0), ("aider", None, None, 10, 10, 0, 0)]
    ) == [
        None,
        None,
    ]
    p = cost.Pricer()
    assert p.rates("no-such-model-zz", dt.date(2025, 1, 1)) is None
    assert p.rates(None, dt.date(2025, 1, 1)) is None
    assert p.unknown == {"no-such-model-zz"}


def test_prices_toml_overrides_and_adds(tmp_path):
    toml = (
        '[models."Claude-Sonnet-4-20250514"]\ninput_mtok = 1\noutput_mtok = 2\n'
        "cache_read_mtok = 0.5\n[models.mine]\ninput_mtok = 4\n"
    )
    sonnet, mine = priced(
        tmp_path,
        [
            ("claude-code", "claude-sonnet-4-20250514", None, 1000, 1000, 1000, 1000),
            ("aider", "mine", None, 1000, 1000, 0, 0),
        ],
        toml,
    )
    assert sonnet == pytest.approx((1000 * 1 + 1000 * 2 + 1000 * 0.5 + 1000 * 1) / 1e6)  # cache write: input
    assert mine == pytest.approx(1000 * 4 / 1e6)
    with pytest.raises(ValueError, match="'bad' needs input_mtok"):
        cost.parse_prices_toml("[models.bad]\noutput_mtok = 1\n")
    with pytest.raises(ValueError, match="non-numeric"):
        cost.parse_prices_toml('[models.bad]\ninput_mtok = "x"\n')


def test_modes_as_ccusage(tmp_path):
    # the one mode rule: the model's cost_in_mode macro (sinks/duckdb/model.sql)
    con = duckdb_store.connect(tmp_path)
    try:

        def choose(mode, logged, calculated):
            return con.execute(
                "SELECT cost_in_mode(?, ?::DOUBLE, ?::DOUBLE)", [mode, logged, calculated]
            ).fetchone()[0]

        assert choose("auto", 0.5, 0.4) == 0.5
        assert choose("auto", None, 0.4) == 0.4
        assert choose("auto", None, None) is None
        assert choose("calculate", 0.5, 0.4) == 0.4
        assert choose("display", None, 0.4) is None
        assert choose("display", 0.5, 0.4) == 0.5
    finally:
        con.close()


def test_assumed_model_is_the_versions_documented_default():
    assert cost.assumed_model("codex", "0.34.0") == "gpt-5"
    assert cost.assumed_model("codex", "0.99.1") is None
    assert cost.assumed_model("codex", None) is None


def test_corpus_costs(corpus_store):
    """The corpus store: Claude Code's 2025-06-08 (tokens as ccusage reports them) costs
    the list price; the Codex 0.34 rollout is priced as gpt-5 (assumed); Crush and Go
    opencode carry their sessions' models; no priced model is missing a price."""
    home, _ = corpus_store
    con = duckdb.connect(str(home / duckdb_store.DB_NAME), read_only=True)
    try:
        day = con.execute(
            "SELECT input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens, cost_usd "
            "FROM daily_usage WHERE day = DATE '2025-06-08' AND agent = 'claude-code' "
            "AND model = 'claude-sonnet-4-20250514'"
        ).fetchone()
        codex = con.execute(
            "SELECT model, model_source, count(*), count(cost_usd), sum(input_tokens), "
            "sum(cache_read_tokens), sum(output_tokens), sum(cost_usd) FROM usage "
            "WHERE agent = 'codex' AND model_source = 'assumed' GROUP BY ALL"
        ).fetchall()
        charm = con.execute(
            "SELECT agent, model, model_source FROM usage WHERE agent IN ('crush', 'opencode-go') "
            "ORDER BY ALL"
        ).fetchall()
        unpriced = con.execute("SELECT count(*) FROM usage WHERE cost_usd IS NULL").fetchone()[0]
    finally:
        con.close()
    assert day[:4] == (114, 16769, 3754072, 174552)
    assert day[4] == pytest.approx((114 * 3 + 16769 * 15 + 3754072 * 0.3 + 174552 * 3.75) / 1e6, abs=1e-9)
    [(model, src, n, priced, inp, cread, out, usd)] = codex
    assert (model, src, n, priced) == ("gpt-5", "assumed", 456, 456)
    # gpt-5: $1.25 input, $0.125 cache read, $10 output per MTok
    assert usd == pytest.approx((inp * 1.25 + cread * 0.125 + out * 10) / 1e6, rel=1e-9)
    assert charm == [
        ("crush", "gpt-5", "logged"),
        ("crush", "gpt-5", "logged"),
        ("opencode-go", "claude-4-sonnet", "logged"),
    ]
    assert unpriced == 0


@pytest.mark.parametrize(
    "model",
    [
        "claude-sonnet-4-20250514",
        "claude-opus-4-1-20250805",
        "gpt-5",
        "gpt-5-codex",
        "gemini-2.5-flash",
        "claude-3-5-haiku-20241022",
    ],
)
def test_the_flat_price_shortcut_equals_genai_prices(model, tmp_path):
    from genai_prices import Usage, calc_price

    ts = dt.datetime(2025, 9, 1, 12, tzinfo=UTC)
    counts = ((1000, 2000, 30000, 4000), (7, 0, 0, 0), (0, 0, 5_000_000, 0), (0, 10, 0, 900))
    got = priced(tmp_path, [("claude-code", model, ts, *c) for c in counts])
    for (inp, out, cr, cw), g in zip(counts, got, strict=True):
        want = calc_price(
            Usage(input_tokens=inp + cr + cw, cache_read_tokens=cr, cache_write_tokens=cw, output_tokens=out),
            model,
            genai_request_timestamp=ts,
        ).total_price
        if model == "claude-sonnet-4-20250514" and inp + cr + cw > 200_000:
            # the long-context tier genai-prices lacks (cost.LONG_CONTEXT): 2x its rates
            # but output 1.5x (here 5M cache read at $0.60, not $0.30)
            want = (inp * 6 + out * 22.5 + cr * 0.6 + cw * 7.5) / 1e6
            assert want == pytest.approx(
                2
                * float(
                    calc_price(
                        Usage(input_tokens=inp + cr + cw, cache_read_tokens=cr, cache_write_tokens=cw),
                        model,
                        genai_request_timestamp=ts,
                    ).total_price
                )
            )
        assert g == pytest.approx(float(want), rel=1e-12)


def test_a_bad_prices_toml_is_one_error_naming_the_file(tmp_path):
    import sqlite3

    (tmp_path / "prices.toml").write_text("[models.x\n")
    con = duckdb_store.connect(tmp_path)
    try:
        with pytest.raises(ConfigError, match=r"prices\.toml does not parse"):
            duckdb_store.sync_usage(sqlite3.connect(":memory:"), con, tmp_path)
    finally:
        con.close()


def test_sonnet_4_above_200k_input_pays_the_long_context_tier(tmp_path):
    # Anthropic's long-context pricing of Claude Sonnet 4 (absent from genai-prices
    # 0.2.3): input + cache read + cache write above 200k -> the whole request at $6
    # input, $22.50 output, $0.60 cache read, $7.50 cache write per MTok
    ts = dt.datetime(2025, 9, 1, tzinfo=UTC)
    long, edge = priced(
        tmp_path,
        [
            ("claude-code", "claude-sonnet-4-20250514", ts, 1000, 2000, 180_000, 30_000),
            ("claude-code", "claude-sonnet-4-20250514", ts, 1000, 2000, 169_000, 30_000),
        ],
    )
    assert long == pytest.approx((1000 * 6 + 2000 * 22.5 + 180_000 * 0.6 + 30_000 * 7.5) / 1e6, abs=1e-12)
    # exactly 200k input: still the base rates
    assert edge == pytest.approx((1000 * 3 + 2000 * 15 + 169_000 * 0.3 + 30_000 * 3.75) / 1e6, abs=1e-12)


def test_prices_toml_tier_tables(tmp_path):
    toml = (
        "[models.mine]\ninput_mtok = 1\noutput_mtok = 2\n"
        "[[models.mine.tiers]]\nabove_input_tokens = 1000\ninput_mtok = 10\noutput_mtok = 20\n"
        "[[models.mine.tiers]]\nabove_input_tokens = 100\ninput_mtok = 5\noutput_mtok = 7\ncache_read_mtok = 0.5\n"
        # tiers only: on genai-prices' flat base (gpt-4.1: $2 input, $8 output per MTok)
        '[models."gpt-4.1"]\n[[models."gpt-4.1".tiers]]\nabove_input_tokens = 500\ninput_mtok = 4\noutput_mtok = 16\n'
        # a user tier table replaces the built-in one: Sonnet 4 at 300k stays at $3 here
        '[models."claude-sonnet-4-20250514"]\ninput_mtok = 3\noutput_mtok = 15\n'
    )
    ts = dt.datetime(2025, 9, 1, tzinfo=UTC)
    low, mid, high, gpt_low, gpt_high, sonnet = priced(
        tmp_path,
        [
            ("aider", "mine", ts, 100, 10, 0, 0),
            ("aider", "mine", ts, 50, 10, 60, 0),
            ("aider", "mine", ts, 1001, 10, 0, 0),
            ("codex", "gpt-4.1", ts, 500, 10, 0, 0),
            ("codex", "gpt-4.1", ts, 501, 10, 0, 0),
            ("claude-code", "claude-sonnet-4-20250514", ts, 300_000, 10, 0, 0),
        ],
        toml,
    )
    assert low == pytest.approx((100 * 1 + 10 * 2) / 1e6)
    assert mid == pytest.approx((50 * 5 + 10 * 7 + 60 * 0.5) / 1e6)
    assert high == pytest.approx((1001 * 10 + 10 * 20) / 1e6)
    assert gpt_low == pytest.approx((500 * 2 + 10 * 8) / 1e6)
    assert gpt_high == pytest.approx((501 * 4 + 10 * 16) / 1e6)
    assert sonnet == pytest.approx((300_000 * 3 + 10 * 15) / 1e6)
    with pytest.raises(ValueError, match="above_input_tokens"):
        cost.parse_prices_toml("[models.bad]\ninput_mtok = 1\n[[models.bad.tiers]]\ninput_mtok = 2\n")
    with pytest.raises(ValueError, match="two tiers"):
        cost.parse_prices_toml(
            "[models.bad]\ninput_mtok = 1\n[[models.bad.tiers]]\nabove_input_tokens = 5\ninput_mtok = 2\n"
            "[[models.bad.tiers]]\nabove_input_tokens = 5\ninput_mtok = 3\n"
        )


def test_every_long_context_tier_is_one_genai_prices_lacks():
    # a built-in tier is only for a model genai-prices prices flat (else it would be ignored)
    for model_id in cost.LONG_CONTEXT:
        assert cost.genai_rates(model_id, dt.date(2025, 9, 1)) not in (None, "tiered")
