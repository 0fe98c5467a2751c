"""The store: what is kept, deduplicated, compressed and quarantined (a marimo notebook).

Open it with `marimo edit store.py` (or `marimo export ipynb store.py` for Jupyter);
`ctxkeep report html DIR` runs it as a script. Parameters as in usage.py; the period
filters entries by their own time.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium", app_title="ctxkeep · store")


@app.cell
def _():
    import altair as alt
    import marimo as mo
    import polars as pl

    from ctxkeep.render.nbkit import open_page, page_params, show, table

    return alt, mo, open_page, page_params, pl, show, table


@app.cell
def _(page_params):
    store, timezone, since, until = page_params()
    return since, store, timezone, until


@app.cell
def _(open_page, since, store, timezone, until):
    st = open_page(store, timezone, since, until)
    st.header(
        "The store: what is kept, deduplicated, compressed and quarantined",
        "Entries of the SQLite store and of the Parquet archive (via `analytics.duckdb`), the content dedup and "
        "the quarantine from `store.db` (read-only), compress runs from the `compression` view.",
    )
    return (st,)


@app.cell
def _(alt, mo, pl, show, st, table):
    stored = st.q(f"""
        SELECT agent, kind, coalesce(status, 'active') AS status, archived, count(*) AS entries
        FROM all_entries WHERE {st.in_period("ts")} GROUP BY ALL""")
    per_agent = st.q(f"""
        SELECT agent, count(*) AS entries, count(DISTINCT session_id) AS sessions, sum(text_bytes) AS text_bytes,
               sum(token_estimate) AS tokens,
               count(*) FILTER (WHERE status = 'archived') AS "archived by compress",
               count(*) FILTER (WHERE archived) AS "in Parquet archive"
        FROM all_entries WHERE {st.in_period("ts")} GROUP BY agent""").sort("entries", descending=True)
    _lines = [
        f"- **{r['agent']}**: {r['entries']:,} entries in {r['sessions']:,} session{'s' * (r['sessions'] != 1)}, "
        f"{r['text_bytes'] or 0:,} text bytes"
        for r in per_agent.iter_rows(named=True)
    ]
    _kinds = (
        alt.Chart(stored, title="Entries per agent and kind")
        .mark_bar()
        .encode(
            alt.X("sum(entries):Q", title="entries"),
            alt.Y("agent:N", sort="-x", title=None),
            alt.Color("kind:N", title="kind", scale=alt.Scale(scheme="tableau10")),
            tooltip=["agent", "kind", "sum(entries):Q"],
        )
        .properties(width=640, height=alt.Step(22))
    )
    by_status = stored.group_by("status").agg(pl.col("entries").sum()).sort("entries", descending=True)
    _status = (
        f"Every entry is **{by_status['status'][0]}**."
        if by_status.height == 1
        else "Entries by status: " + ", ".join(f"{s} {n:,}" for s, n in by_status.iter_rows()) + "."
    )
    show(
        mo.md(
            "## What is stored\nEntries per agent and kind (active store and archive).\n\n"
            + "\n".join(_lines)
            + (
                f"\n\n**All agents: {per_agent['entries'].sum():,} entries.** {_status}"
                if per_agent.height
                else ""
            )
        ),
        _kinds if stored.height else None,
        table(per_agent, empty="No entries in this period."),
    )
    return by_status, per_agent, stored


@app.cell
def _(alt, mo, pl, show, st):
    from ctxkeep.sinks.files import store_files

    _sizes = pl.DataFrame(
        {"file": list(store_files(st.home)), "bytes": list(store_files(st.home).values())},
        schema={"file": pl.String, "bytes": pl.Int64},
    ).with_columns(MB=pl.col("bytes") / 1e6)
    _chart = (
        alt.Chart(_sizes, title="Files of the store")
        .mark_bar(color="#6e7781")
        .encode(alt.X("MB:Q"), alt.Y("file:N", sort="-x", title=None), tooltip=["file", "bytes"])
        .properties(width=560, height=alt.Step(20))
    )
    show(
        mo.md(
            "## The store's files\nBytes on disk per file (the archive as one).\n\n"
            + "\n".join(f"- `{f}`: {n:,} bytes" for f, n in _sizes.select("file", "bytes").iter_rows())
        ),
        _chart,
    )
    return


@app.cell
def _(mo, pl, show, st, table):
    _logical = pl.read_database(
        """
        SELECT e.agent, count(*) AS entries, coalesce(sum(e.text_bytes), 0) AS referenced_bytes,
               count(DISTINCT e.content_hash) AS contents
        FROM entries e GROUP BY e.agent""",
        st.lite,
    )
    _distinct = pl.read_database(
        """
        SELECT x.agent, coalesce(sum(c.bytes), 0) AS distinct_bytes
        FROM (SELECT DISTINCT agent, content_hash FROM entries) x JOIN contents c USING (content_hash)
        GROUP BY x.agent""",
        st.lite,
    )
    dedup = (
        _logical.join(_distinct, on="agent", how="left")
        .fill_null(0)
        .with_columns(ratio=pl.col("referenced_bytes") / pl.col("distinct_bytes"))
        .sort("referenced_bytes", descending=True)
    )
    ref_all = st.lite.execute("SELECT coalesce(sum(text_bytes), 0) FROM entries").fetchall()[0][0]
    kept_all = st.lite.execute("SELECT coalesce(sum(bytes), 0) FROM contents").fetchall()[0][0]
    show(
        mo.md(
            "## Dedup\nText bytes the entries reference against the bytes of the distinct contents `store.db` keeps "
            "(each text once, by content hash), over the whole store.\n\n"
            f"Referenced **{ref_all:,} bytes**, kept **{kept_all:,} bytes**: dedup ratio "
            f"**{ref_all / kept_all if kept_all else 1:.3f}**."
        ),
        table(dedup, empty="The store holds no entries.", formats={"ratio": "{:.3f}"}),
    )
    return dedup, kept_all, ref_all


@app.cell
def _(mo, show, st, table):
    comp = st.q(f"""
        SELECT run_id, {st.local("started_at")} AS started, status, regexp_extract(path, '[^/]*$') AS file,
               agent, bytes_before, bytes_saved, tokens_before, tokens_saved
        FROM compression WHERE bytes_before IS NOT NULL AND {st.in_period("started_at")}
        ORDER BY started_at, run_id, path""")
    # the file's name, not its path, and no "after" columns (before - saved): the table
    # fits the page (newuser23 F12: 11 columns ran past the right edge at 1280 px)
    _line = (
        f"Compression saved **{comp['bytes_saved'].sum():,} bytes** and ~{comp['tokens_saved'].sum():,} tokens "
        f"in {comp['run_id'].n_unique()} run{'s' * (comp['run_id'].n_unique() != 1)}."
        if comp.height
        else ""
    )
    show(
        mo.md(
            "## Compression savings\nPer compress run and session file (`compress --check --json` has the paths): "
            "bytes and estimated tokens before, and what the run saved (tokens: the texts' and those of the images and "
            "documents it moved out to the store, which no text counts).\n\n" + _line
        ),
        table(comp, empty="No compress runs in this period (`ctxkeep compress` shrinks idle session files)."),
    )
    return (comp,)


@app.cell
def _(mo, pl, show, st, table):
    quarantine = pl.read_database(
        """SELECT agent, action, reason, path, "offset", length, first_seen FROM quarantine ORDER BY first_seen, id""",
        st.lite,
        schema_overrides={"offset": pl.Int64, "length": pl.Int64},
    )
    quarantine_counts = (
        quarantine.group_by("agent", "action").agg(pl.len().alias("lines")).sort("agent", "action")
    )
    show(
        mo.md(
            "## Quarantine\nLines or rows the sources could not read (`skipped`) or read after a repair "
            "(`repaired`); their raw bytes are kept in `store.db` for a later parser, never shown here.\n\n"
            + "\n".join(f"- quarantine **{a} {act}**: {n:,}" for a, act, n in quarantine_counts.iter_rows())
        ),
        table(quarantine_counts, empty="The quarantine is empty: every line and row was read."),
        table(quarantine.tail(20), empty="") if quarantine.height else None,
    )
    return quarantine, quarantine_counts


if __name__ == "__main__":
    from ctxkeep.render.nbkit import run_script

    raise SystemExit(run_script("store", app))
