"""The analytics notebooks (``ctxkeep/notebooks/*.ipynb``, shipped in the wheel): opening the store from them, and
running them headlessly into self-contained HTML (``ctxkeep report html``).

The notebooks read ``<home>/analytics.duckdb`` read-only (DuckDB) and, for what only the
system of record holds (quarantine, content dedup), ``<home>/store.db`` read-only
(SQLite, ``mode=ro``). Each has a papermill ``parameters`` cell: ``store`` (the ctxkeep
home; "" = ``$CTXKEEP_HOME`` or the platform data dir), ``timezone`` (IANA name),
``since`` / ``until`` (local dates ``YYYY-MM-DD``, inclusive; "" = open).

Running them needs the optional extra ``ctxkeep[notebooks]`` (papermill, nbconvert,
matplotlib, ipykernel, jupyterlab): papermill, nbconvert and matplotlib are imported
only inside ``render_html``, so importing this module costs nothing.
"""

from __future__ import annotations

import datetime as dt
import html
import importlib.util
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ctxkeep.errors import CtxkeepError, UsageError
from ctxkeep.sinks import analytics_current, files

#: the notebooks ``report html`` runs, in order: (name, title)
NOTEBOOKS: tuple[tuple[str, str], ...] = (
    ("usage", "Usage: tokens and cost over time"),
    ("sessions", "Sessions: context growth and tool calls"),
    ("store", "Store: what is kept, dedup, compression, quarantine"),
)
#: the modules the extra brings that ``render_html`` needs (import names)
REQUIRED_MODULES = ("papermill", "nbconvert", "matplotlib", "ipykernel")
INSTALL_HINT = "add them with `uv sync --extra notebooks` or `pip install 'ctxkeep[notebooks]'`"
#: seconds one cell may run before the run is stopped
CELL_TIMEOUT = 600


def notebooks_dir() -> Path:
    """The folder holding the ``.ipynb`` files: ``ctxkeep/notebooks/``, package data
    shipped in the wheel (found with ``importlib.resources``, so a source checkout and
    an installed wheel are the same). Raises CtxkeepError when a notebook is missing (a
    damaged installation)."""
    from importlib.resources import files

    d = Path(str(files("ctxkeep") / "notebooks"))
    if not all((d / f"{name}.ipynb").is_file() for name, _ in NOTEBOOKS):
        raise CtxkeepError(
            "the analytics notebooks are missing",
            where=str(d),
            hint="reinstall ctxkeep (the wheel ships them in ctxkeep/notebooks/)",
        )
    return d


def missing_modules() -> list[str]:
    """The import names of ``REQUIRED_MODULES`` that are not installed (empty: the
    ``notebooks`` extra is there)."""
    return [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]


@dataclass(frozen=True)
class Window:
    """The notebooks' parameters, checked: ``tz`` an IANA zone name, ``since`` /
    ``until`` local dates (inclusive) or None for an open end."""

    tz: str
    since: dt.date | None
    until: dt.date | None

    def params(self) -> dict:
        """The SQL parameters ``$tz``, ``$since``, ``$until`` (dates or None) for the
        notebooks' ``CAST(timezone($tz, ts) AS DATE) BETWEEN …`` filters."""
        return {"tz": self.tz, "since": self.since, "until": self.until}

    def label(self) -> str:
        """``2026-01-01 … 2026-01-31 (Europe/Berlin)``, ``start`` / ``today`` for open ends."""
        return f"{self.since or 'start'} … {self.until or 'today'} ({self.tz})"


def window(tz: str, since: str | dt.date | None, until: str | dt.date | None) -> Window:
    """Check the notebooks' ``timezone``, ``since`` and ``until``. Raises UsageError
    for an unknown zone, a date not ``YYYY-MM-DD`` or ``since`` after ``until``."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"unknown time zone {tz!r}", where="--timezone", hint="give an IANA name such as Europe/Berlin"
        ) from None

    def day(v, opt: str) -> dt.date | None:
        from ctxkeep.timeutil import when_day

        return when_day(v, tz=tz, where=opt)

    w = Window(tz, day(since, "--since"), day(until, "--until"))
    if w.since and w.until and w.since > w.until:
        raise UsageError(
            f"--since {w.since} is after --until {w.until}", where="--since", hint="swap the two dates"
        )
    return w


def open_store(store: str | Path | None):
    """Open a ctxkeep home for a notebook: ``(home, duck, lite)`` with ``home`` the
    resolved Path, ``duck`` a read-only DuckDB connection to ``analytics.duckdb`` and
    ``lite`` a read-only sqlite3 connection to ``store.db`` (``mode=ro``: a reader
    never writes, and the store's WAL is honoured). Raises CtxkeepError when the store
    has no analytics file yet, or when a running ingest holds it."""
    import duckdb

    from ctxkeep.config import resolve_home

    home = Path(resolve_home(str(store) if store else None))
    path = home / files.ANALYTICS_DB
    if not path.exists() or not (home / files.STORE_DB).exists():
        raise CtxkeepError("no store yet", where=str(home), hint="run `ctxkeep ingest` first")
    analytics_current.bring_current(home)  # a lag left (a busy store) shows what DuckDB holds
    try:
        duck = duckdb.connect(str(path), read_only=True)
    except duckdb.IOException as e:
        raise CtxkeepError(
            f"the analytics store is held by another process: {str(e).splitlines()[0]}",
            where=str(path),
            hint="run it again when the ingest has finished",
        ) from None
    lite = sqlite3.connect(f"file:{home / files.STORE_DB}?mode=ro", uri=True)
    return home, duck, lite


def render_html(
    home: Path,
    out_dir: Path,
    w: Window,
    *,
    progress: Callable[[str, str], None] | None = None,
) -> list[Path]:
    """Execute every notebook of ``NOTEBOOKS`` with papermill against the store
    ``home`` (parameters ``store``, ``timezone``, ``since``, ``until`` from ``w``) on the
    ``python3`` kernel of this interpreter, and render each with nbconvert's
    ``HTMLExporter`` (inputs hidden, ``exclude_input``; the plots are PNGs embedded as
    ``data:`` URIs, so each page is self-contained) into ``out_dir/<name>.html``, then
    write ``out_dir/index.html`` linking them. ``progress(name, state)`` is called with
    state ``running`` before and ``done`` after each notebook. Returns the written
    paths (index last).

    Raises CtxkeepError when the extra is missing (``INSTALL_HINT``), the store cannot
    be opened (``open_store``) or a notebook fails (its name and the error's last line).
    """
    missing = missing_modules()
    if missing:
        raise CtxkeepError(f"the notebooks need {', '.join(missing)}", hint=INSTALL_HINT)
    home = Path(home)
    _home, duck, lite = open_store(home)  # fail early, with one line, before any kernel
    duck.close()
    lite.close()
    src = notebooks_dir()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    import jinja2
    import nbformat
    import papermill
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        extra_loaders=[jinja2.DictLoader({"ctxkeep.html.j2": _TEMPLATE})],
        template_file="ctxkeep.html.j2",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
    )
    params = {
        "store": str(home),
        "timezone": w.tz,
        "since": w.since.isoformat() if w.since else "",
        "until": w.until.isoformat() if w.until else "",
    }
    written = []
    for name, title in NOTEBOOKS:
        if progress:
            progress(name, "running")
        try:
            nb = papermill.execute_notebook(
                str(src / f"{name}.ipynb"),
                None,  # keep the executed notebook in memory only
                parameters=params,
                kernel_name="python3",
                cwd=str(out_dir),  # not the package folder: it may be read-only
                progress_bar=False,
                log_output=False,
                execution_timeout=CELL_TIMEOUT,
                # the kernel's own warnings (ipykernel 7: "running over TCP without
                # encryption" on a loopback it alone uses) would interleave with the
                # progress lines; its errors still show
                extra_arguments=["--IPKernelApp.log_level=ERROR"],
            )
        except papermill.PapermillExecutionError as e:
            last = (e.evalue or e.ename or "failed").strip().splitlines()[-1]
            raise CtxkeepError(
                f"notebook {name} failed: {e.ename}: {last}",
                where=str(src / f"{name}.ipynb"),
                hint="open it in JupyterLab with the same parameters to see the cell",
            ) from None
        nb.metadata["title"] = title
        body, _res = exporter.from_notebook_node(nbformat.from_dict(nb))
        path = out_dir / f"{name}.html"
        path.write_text(body, encoding="utf-8")
        written.append(path)
        if progress:
            progress(name, "done")
    index = out_dir / "index.html"
    index.write_text(_index_html(w, home), encoding="utf-8")
    written.append(index)
    return written


#: nbconvert's JupyterLab page without the two scripts it loads from a CDN (require.js,
#: MathJax): the plots are embedded PNGs and the pages use neither, so a page opens
#: complete with no network
_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
"""


def _index_html(w: Window, home: Path) -> str:
    made = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    items = "\n".join(
        f'    <li><a href="{name}.html">{html.escape(title)}</a></li>' for name, title in NOTEBOOKS
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>ctxkeep reports</title>
<style>body{{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;line-height:1.5}}
code{{background:#f3f3f3;padding:0 .2em}}</style></head>
<body>
  <h1>ctxkeep reports</h1>
  <p>Store <code>{html.escape(str(home))}</code>, period {html.escape(w.label())}, made {made}.</p>
  <ul>
{items}
  </ul>
</body>
</html>
"""


def frame(con, sql: str, params: dict):
    """``con.sql(sql, params=…).pl()``: a Polars DataFrame of a DuckDB query, given only
    those of ``params`` (e.g. ``Window.params()``) that ``sql`` names as ``$name``
    (DuckDB refuses unused parameters)."""
    return con.sql(sql, params={k: v for k, v in params.items() if f"${k}" in sql}).pl()
