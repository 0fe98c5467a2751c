"""genai-prices is loaded when a price is first needed, without its package ``__init__``
(its auto-updater's HTTP client), and the prices are genai-prices' own: a later
``import genai_prices`` gives the same modules and classes (issue 26: the first
ingest's imports)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import ROOT

#: a fresh interpreter: import cost, price a flat and a tiered model, then import
#: genai_prices whole and price the same with its public API
_CHECK = """
import datetime as dt, json, sys
from ctxkeep.transforms import cost
out = {"after_import": sorted(m for m in sys.modules if m.split(".")[0] in ("genai_prices", "httpx2", "pydantic"))}
day = dt.date(2025, 10, 1)
out["flat"] = cost.Pricer().rates("claude-opus-4-1", day)
out["tiered"] = cost.genai_tiered("gemini-2.5-pro", day, 300000, 0, 0, 0, 1000)
out["httpx2_after_pricing"] = "httpx2" in sys.modules
out["package_left"] = "genai_prices" in sys.modules
import genai_prices
from genai_prices import Usage, calc_price
out["same_usage"] = Usage is cost.genai().Usage
out["same_snapshot"] = genai_prices.data_snapshot is cost.genai().data_snapshot
when = dt.datetime(2025, 10, 1, 23, 59, 59, tzinfo=dt.UTC)
u = Usage(input_tokens=300000, output_tokens=1000)
out["public_tiered"] = float(calc_price(u, "gemini-2.5-pro", genai_request_timestamp=when).total_price)
print(json.dumps(out))
"""


def test_prices_load_without_the_http_client_and_equal_the_public_api():
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    r = subprocess.run(
        [sys.executable, "-c", _CHECK], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["after_import"] == []  # importing cost loads nothing of genai-prices
    # claude-opus-4-1: $15 input, $75 output, $1.50 cache read, $18.75 write, $30 one-hour write
    assert got["flat"] == [[-1, None, [15.0, 75.0, 1.5, 18.75, 30.0]]]
    # gemini-2.5-pro above 200k input: $2.50 input, $15 output per MTok
    assert abs(got["tiered"] - (300000 * 2.5 + 1000 * 15) / 1e6) < 1e-9
    assert got["httpx2_after_pricing"] is False
    assert got["package_left"] is False  # no half-made package left for a later import
    assert got["same_usage"] and got["same_snapshot"]
    assert abs(got["public_tiered"] - got["tiered"]) < 1e-12
