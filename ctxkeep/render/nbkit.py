"""What the marimo notebooks (``ctxkeep/notebooks/*.py``) share: tables that read as
tables, one colour per agent across every chart, time axes, and the parts of a page.

Run inside marimo (``marimo edit``/``marimo run``, ``ctxkeep ui``) a table is
``mo.ui.table`` (sortable, searchable) and ``show(...)`` stacks its parts with
``mo.vstack``. Run as a script (``python usage.py``, ``app.run()``, ``ctxkeep
report html``) a table is a plain HTML table (numbers right-aligned with thousands
separators; no dtype row, no shape line) and ``show`` returns the parts as a
``Parts`` list, which ``render.report`` turns into a static page (charts as SVG).
An empty table says what it would have held (``empty``), never a ``null`` row.

Needs the ``notebooks`` extra (marimo, altair); imported only by the notebooks and
``render.report``.
"""

from __future__ import annotations

import datetime as dt
import html
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import altair as alt
import marimo as mo

if TYPE_CHECKING:
    import polars as pl

#: the colours of the agents, in order of the sorted agent names of the store
#: (Tableau 10 then 10 more; a store with more agents cycles)
PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a",
    "#d62728", "#ff9896", "#9467bd", "#c5b0d5",
)  # fmt: skip


def interactive() -> bool:
    """True inside a running marimo notebook or app, False as a script."""
    try:
        return bool(mo.running_in_notebook())
    except Exception:
        return False


class Parts(list):
    """The parts of a cell's output when run as a script (``show``): markdown and
    HTML (``mo.Html``), Altair charts, in order."""


def show(*items):
    """The parts of one cell's output: ``mo.vstack`` inside marimo, ``Parts`` as a
    script. ``None`` items are left out."""
    items = [i for i in items if i is not None]
    return mo.vstack(items) if interactive() else Parts(items)


def agent_scale(agents: Sequence[str], shown: Iterable[str] | None = None) -> alt.Scale:
    """The colour scale of the agents: each of ``agents`` (every agent of the store,
    sorted, so that a colour means one agent on every chart of every page) onto
    ``PALETTE``; with ``shown`` (the agents a chart draws), only those in its domain, so
    its legend lists no agent the chart has no mark of (newuser23 F12: usage.html listed
    aider, copilot-cli, specstory), each in its store-wide colour. An agent of ``shown``
    not in ``agents`` takes the next colours."""
    domain = sorted(set(agents))
    keep = domain if shown is None else sorted({str(a) for a in shown if a is not None})
    order = {a: i for i, a in enumerate(domain)}
    extra = {a: len(domain) + i for i, a in enumerate(a for a in keep if a not in order)}
    at = {**order, **extra}
    return alt.Scale(domain=keep, range=[PALETTE[at[a] % len(PALETTE)] for a in keep])


def _cell(v, fmt: str | None) -> tuple[str, bool]:
    """(text, is a number) of one value."""
    if v is None:
        return "", False
    if isinstance(v, bool):
        return ("yes" if v else "no"), False
    if isinstance(v, int):
        return (fmt.format(v) if fmt else f"{v:,}"), True
    if isinstance(v, float):
        if v != v:  # NaN
            return "", True
        return (fmt.format(v) if fmt else f"{v:,.2f}"), True
    if isinstance(v, dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M"), False
    if isinstance(v, dt.date):
        return v.isoformat(), False
    return str(v), False


def table(
    df, *, empty: str, formats: dict[str, str] | None = None, label: str | None = None, page_size: int = 25
):
    """A Polars DataFrame as a table: ``mo.ui.table`` inside marimo, else an HTML
    table. ``empty``: the sentence shown instead when ``df`` has no rows;
    ``formats``: column → ``str.format`` pattern (``"${:,.2f}"``, ``"{:.1%}"``)."""
    formats = formats or {}
    if df.height == 0:
        return mo.md(f"*{empty}*")
    #: a number column's null is a figure not recorded (an agent's cache write, a
    #: cost-only agent's tokens): "-", as the CLI tables show it (newuser21 N4)
    numeric = {c for c, t in df.schema.items() if t.is_numeric()}
    if interactive():
        fmt: dict[str, str | Callable[..., Any]] = {
            c: (lambda v: "-" if v is None else v) for c in numeric if df[c].null_count()
        }
        fmt.update(
            {
                c: (lambda v, f=f, dash=c in numeric: ("-" if dash else "") if v is None else f.format(v))
                for c, f in formats.items()
                if c in df.columns
            }
        )
        return mo.ui.table(
            df,
            format_mapping=fmt or None,
            page_size=page_size,
            label=label or "",
            selection=None,
            show_data_types=False,
        )
    head = "".join(f"<th>{html.escape(c.replace('_', ' '))}</th>" for c in df.columns)
    rows = []
    for row in df.iter_rows():
        cells = []
        for c, v in zip(df.columns, row, strict=True):
            text, num = ("-", True) if v is None and c in numeric else _cell(v, formats.get(c))
            cells.append(
                f'<td class="n">{html.escape(text)}</td>' if num else f"<td>{html.escape(text)}</td>"
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    cap = f"<caption>{html.escape(label)}</caption>" if label else ""
    return mo.Html(
        f'<table class="data">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def grain(first: dt.date | None, last: dt.date | None) -> tuple[str, str]:
    """The bar width for a span of days: ``("1d", "day")`` up to 60 days, weeks up to
    a year, else months (Polars ``dt.truncate`` interval, Altair ``timeUnit`` word)."""
    days = (last - first).days + 1 if first and last else 0
    if days <= 60:
        return "1d", "day"
    if days <= 366:
        return "1w", "week"
    return "1mo", "month"


#: what the pages of one process share while the store is unchanged (``Store.cached``;
#: under ``marimo run`` every page's kernel is a thread of the one server process):
#: (home, key) → (``store_signature``, value)
_SHARED: dict[tuple[str, str], tuple[tuple, object]] = {}


def _file_id(home: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``<home>/store.db``; None when it is gone."""
    from ctxkeep.sinks.files import STORE_DB

    try:
        st = os.stat(Path(home) / STORE_DB)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def store_signature(home: Path) -> tuple:
    """Size and mtime of the store's system of record (``store.db`` and its WAL: every
    ingest, purge or retention writes them; DuckDB is derived from them) and of
    ``prices.toml`` (the costs): equal signatures, equal analytics."""
    from ctxkeep.sinks.files import STORE_DB, STORE_DB_SIDECARS

    out: list[tuple[str, int | None, int | None]] = []
    for name in (STORE_DB, STORE_DB_SIDECARS[0], "prices.toml"):
        try:
            st = os.stat(Path(home) / name)
            out.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((name, None, None))
    return tuple(out)


class Store:
    """A notebook's view of the store for one period: ``home``, a read-only ``lite``
    (SQLite) connection, the ``window`` (zone, local dates), ``agents`` (every agent of
    the store, sorted) and their ``colour`` scale. ``q(sql, **tables)`` runs DuckDB SQL
    with ``$tz``, ``$since``, ``$until`` bound (and the DataFrames ``tables`` under
    their names) and returns a Polars DataFrame; ``in_period(col)`` is the SQL filter
    of a timestamp column on the period's local days; ``local(col)`` the column as
    local time (naive, in the zone).

    The DuckDB file is opened read-only for each query and closed after it: a
    notebook or the app left open never holds it (DuckDB lets no process write while
    another has it open, and an ingest must sync it). Raises what
    ``service.analytics.open_store`` and ``window`` raise."""

    def __init__(self, store: str, timezone: str, since: str, until: str):
        from ctxkeep.service import analytics

        self.window = analytics.window(timezone, since, until)
        self.home, duck, lite = analytics.open_store(store, wait=1.0)
        self._lite, self._lite_file = lite, _file_id(self.home)
        try:
            self.agents = self.cached("agents", lambda: analytics.agents_of(duck))
        finally:
            duck.close()
        self.params = self.window.params()
        self.colour = agent_scale(self.agents)
        self._analytics = analytics

    def colour_of(self, frame: pl.DataFrame) -> alt.Scale:
        """The agents' colour scale for a chart of ``frame`` (its ``agent`` column): its
        agents only, each in its store-wide colour (``agent_scale``)."""
        return agent_scale(self.agents, frame["agent"].unique().to_list() if frame.height else [])

    @property
    def lite(self):
        """The read-only sqlite3 connection to ``store.db`` (``open_store``'s), opened
        again when the path names another file than the one it holds (a reparse,
        reindex or restore put a new store in place by a rename: the old connection
        would show the replaced store until the app restarted; left20)."""
        from ctxkeep.service.analytics import open_lite

        now = _file_id(self.home)
        if now is not None and now != self._lite_file:
            old = self._lite
            self._lite = open_lite(self.home)
            self._lite_file = now
            old.close()
        return self._lite

    @property
    def tz(self) -> str:
        return self.window.tz

    def cached(self, key: str, compute: Callable[[], object]):
        """``compute()``, or what it gave an earlier page of this process while the
        store's ``store_signature`` is unchanged (a page's costliest questions, e.g.
        the ``sessions`` view aggregating every entry, asked once per store change).
        The value is shared: never modify it."""
        sig = store_signature(self.home)  # before: a write during compute is seen next time
        hit = _SHARED.get((str(self.home), key))
        if hit is not None and hit[0] == sig:
            return hit[1]
        value = compute()
        _SHARED[(str(self.home), key)] = (sig, value)
        return value

    def q(self, sql: str, **tables):
        return self.qs({"_": sql}, **tables)["_"]

    def qs(self, queries: dict[str, str], params: dict | None = None, **tables) -> dict:
        """Several queries on one read-only connection, opened once and closed after
        (a view's queries pay the opening, and bringing DuckDB current, once): name →
        Polars DataFrame. ``params``: more ``$name`` values beside the window's."""
        import polars as pl

        _home, duck, lite = self._analytics.open_store(self.home)
        lite.close()
        out = {}
        try:
            for name, df in tables.items():
                duck.register(name, df.to_arrow())
            for key, sql in queries.items():
                df = self._analytics.frame(duck, sql, {**self.params, **(params or {})})
                # DuckDB sums come back as decimals: whole ones (counts, bytes) as integers, USD as floats
                out[key] = df.with_columns(
                    [
                        pl.col(c).cast(pl.Int64 if getattr(t, "scale", None) == 0 else pl.Float64)
                        for c, t in df.schema.items()
                        if isinstance(t, pl.Decimal)
                    ]
                )
        finally:
            duck.close()
        return out

    @staticmethod
    def local(col: str) -> str:
        return f"timezone($tz, {col})"

    @staticmethod
    def in_period(col: str) -> str:
        day = f"CAST(timezone($tz, {col}) AS DATE)"
        return f"($since::DATE IS NULL OR {day} >= $since::DATE) AND ($until::DATE IS NULL OR {day} <= $until::DATE)"

    def header(self, title: str, what: str):
        """The page's heading: title, what it shows, the store and the period."""
        return mo.md(f"# {title}\n\n{what}\n\nStore `{self.home}` · period {self.window.label()}")


def page_params() -> tuple[str, str, str, str]:
    """The parameters of a notebook page from its command line (``marimo run|edit X.py
    -- --store HOME --timezone ZONE --since DAY --until DAY``): ``(store, timezone,
    since, until)``, ``""`` for a missing one (the zone: the local one). A script run
    (``app.run(defs=...)``) overrides the cell that calls this."""
    from ctxkeep.timeutil import local_timezone

    args = mo.cli_args()
    return (
        str(args.get("store") or ""),
        str(args.get("timezone") or local_timezone()),
        str(args.get("since") or ""),
        str(args.get("until") or ""),
    )


def script_line(name: str, outputs: Sequence, defs: Mapping[str, Any]) -> str:
    """The one line ``python NAME.py --store …`` prints when its run ends (marimo's
    ``app.run()`` shows nothing; newuser17 F11: the README's "run it as a script"
    printed nothing at all): the store read, the cells run and, for the usage page,
    its API responses, tokens and cost (as ``ctxkeep report``'s totals)."""
    st = defs.get("st")
    where = f"the store at {st.home}" if st is not None else "no store"
    usage = defs.get("usage")
    if usage is not None:
        tokens = int(usage["total_tokens"].sum() or 0)
        cost = float(usage["cost_usd"].sum() or 0)
        what = f"{usage.height:,} API responses, {tokens:,} tokens, ${cost:,.2f} in {where}"
    else:
        what = f"{len(outputs)} cells run against {where}"
    return f"{name}.py: {what}; `marimo edit {name}.py` shows the page, `ctxkeep report html DIR` writes it"


def run_script(name: str, app) -> int:
    """Run notebook ``name``'s ``app`` as a script (``python NAME.py --store …``, the
    README's way): print ``script_line`` and return 0; or, when the store or a
    parameter is wrong, ONE line on stderr, ``NAME.py: error: <what> (<where>) - <what
    to do>`` (``store_problem``), and return the error's exit code (2 wrong usage: a
    bad ``--since``; 1 failure: no store, a damaged file), never marimo's traceback
    (newuser19 F12: ~30 lines through marimo's script runner for a missing store)."""
    from ctxkeep.errors import CtxkeepError

    try:
        outputs, defs = app.run()
    except Exception as e:
        err = e if isinstance(e, CtxkeepError) else store_problem(page_params()[0], e)
        print(f"{name}.py: error: {err}", file=sys.stderr)
        return err.exit_code
    print(script_line(name, outputs, defs))
    return 0


def open_page(store: str, timezone: str, since: str, until: str) -> Store:
    """The page's ``Store`` for the period. Without one (no store yet, an ingest holds
    it, a damaged file) the cell stops here showing ``no_store`` (``mo.stop``), so no
    later cell draws half a page; run as a script (``report html``) the error is
    raised instead: a static page saying "no data" would be written as if it were a
    report (the caller says what failed, in one line: ``render.report.failure``)."""
    try:
        return Store(store, timezone, since, until)
    except Exception as e:
        if not interactive():
            raise
        mo.stop(True, no_store(store, e))
        raise  # not reached: mo.stop raises


def store_problem(store: str, e: BaseException):
    """``e``, raised opening or reading the store ``store`` ("": the default home), as
    the one error a user acts on (``render.report.failure``: no store yet, a damaged
    store.db or analytics.duckdb, a full disk, ...): a ``CtxkeepError``."""
    from ctxkeep.render.report import failure
    from ctxkeep.service.store import resolve_home

    try:
        home = resolve_home(store or None)
    except Exception:  # the home itself is the problem: ``e`` says so
        home = Path(store or ".")
    return failure(home, e, "opening the store")


def no_store(store: str, e: BaseException):
    """What a notebook shows when it cannot open the store ``store``: what failed,
    where, and what to do (``store_problem``; a damaged file says to run doctor or
    reindex, not ingest)."""
    err = store_problem(store, e)
    where = f" (`{err.where}`)" if err.where else ""
    return mo.md(
        f"**No data to show:** {err.what}{where}.\n\nWhat to do: {err.todo or 'run `ctxkeep ingest` first'}."
    )
