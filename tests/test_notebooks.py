"""The analytics notebooks run against a store built from the corpus, and show the
figures the store holds."""

from __future__ import annotations

from pathlib import Path

import duckdb
import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _outputs(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if "text" in o:
                out.append(o["text"])
            for v in (o.get("data") or {}).values():
                out.append(v if isinstance(v, str) else "")
    return "\n".join(out)


@pytest.mark.slow
def test_usage_notebook_runs_and_shows_store_figures(corpus_store, monkeypatch):
    home, _summary = corpus_store
    monkeypatch.setenv("CTXKEEP_HOME", str(home))
    nb = nbformat.read(NOTEBOOKS / "usage.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    text = _outputs(nb)
    con = duckdb.connect(str(home / "analytics.duckdb"), read_only=True)
    try:
        top_session = con.execute(
            "SELECT session_id FROM sessions ORDER BY token_estimate DESC LIMIT 1"
        ).fetchone()[0]
        out_claude = con.execute("SELECT sum(output_tokens) FROM usage WHERE agent='claude-code'").fetchone()[
            0
        ]
        top_tool = con.execute("SELECT tool_name FROM tool_calls ORDER BY calls DESC LIMIT 1").fetchone()[0]
    finally:
        con.close()
    assert str(home) in text
    assert top_session in text  # the largest-sessions table
    assert f"{out_claude}" in text or f"{out_claude:,}" in text  # totals per agent
    assert top_tool in text  # the tool-calls table
    assert "final context ~" in text
