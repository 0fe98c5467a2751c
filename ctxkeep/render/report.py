"""``ctxkeep report html DIR``: the marimo notebooks (``ctxkeep/notebooks/*.py``) run
as scripts against the store and written as static, self-contained pages.

Why not ``marimo export html``: its pages load marimo's frontend from a CDN
(``cdn.jsdelivr.net/npm/@marimo-team/frontend@<version>/…``, checked with marimo
0.25.2; marimo issues #575 and #5717, open, ask for a standalone export), so they
are blank offline. Here each notebook's ``app.run(defs=…)`` returns its cells'
outputs; markdown and tables (``render.nbkit``: plain HTML tables when run as a
script) are written as they are, Altair charts as inline SVG rendered by
vl-convert (offline; it embeds Vega). A page loads nothing: no script, CSS inline.

Needs the ``notebooks`` extra (marimo, altair, vl-convert-python).
"""

from __future__ import annotations

import datetime as dt
import html
import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path

from ctxkeep.errors import CtxkeepError, UsageError, from_os_error

#: the notebooks ``report html`` runs, in order: (name, title)
NOTEBOOKS: tuple[tuple[str, str], ...] = (
    ("usage", "Usage: tokens and cost over time"),
    ("sessions", "Sessions: context growth and tool calls"),
    ("store", "Store: what is kept, dedup, compression, quarantine"),
)
#: the file a report writes into its DIR (``{"schema": 1, "pages": [names]}``): a DIR
#: holding it is a previous report, written over; any other non-empty DIR (a report
#: from before the marker included: its index.html cannot be told from the user's) is
#: refused unless ``force``, as ``export html`` does with ``render.site.MARKER``
MARKER = ".ctxkeep-report.json"
#: the import names the pages need (the ``notebooks`` extra)
REQUIRED_MODULES = ("marimo", "altair", "vl_convert")
INSTALL_HINT = "add them with `uv sync --extra notebooks` or `pip install 'ctxkeep[notebooks]'`"


def missing_modules() -> list[str]:
    """The import names of ``REQUIRED_MODULES`` that are not installed."""
    return [m for m in REQUIRED_MODULES if importlib.util.find_spec(m) is None]


def notebooks_dir() -> Path:
    """``ctxkeep/notebooks/`` (package data in the wheel). Raises CtxkeepError when a
    notebook is missing (a damaged installation)."""
    from importlib.resources import files

    d = Path(str(files("ctxkeep") / "notebooks"))
    if not all((d / f"{name}.py").is_file() for name, _ in NOTEBOOKS):
        raise CtxkeepError(
            "the analytics notebooks are missing",
            where=str(d),
            hint="reinstall ctxkeep (the wheel ships them in ctxkeep/notebooks/)",
        )
    return d


def load_app(path: Path):
    """The ``marimo.App`` of the notebook file ``path`` (imported under a private
    module name; its ``if __name__ == "__main__"`` block does not run)."""
    spec = importlib.util.spec_from_file_location(f"ctxkeep_notebook_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the notebook {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.app


def run_notebook(path: Path, params: dict[str, str]):
    """Run the notebook at ``path`` as a script with ``params`` (``store``,
    ``timezone``, ``since``, ``until``; they replace the parameter cell's values).
    Returns marimo's ``(outputs, defs)``: each cell's output, and every name the cells
    defined."""
    return load_app(path).run(defs=dict(params))


def _svg(chart) -> str:
    import altair as alt
    import vl_convert as vlc

    # every row drawn: Altair refuses a chart of more than 5,000 rows by default (the
    # context growth of a big store's largest sessions: 6,000+ entries on a 200 MB
    # store), and the page is static, so the rows are inlined whatever their number
    with alt.data_transformers.enable("default", max_rows=None):
        spec = chart.to_json()
    svg = vlc.vegalite_to_svg(spec)
    # inline SVG in HTML needs no namespace declarations (and then names no URL)
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg, count=0)


def part_html(part) -> str:
    """One output part as HTML: a chart as SVG, ``mo.Html`` as its text, a list of
    parts in order; anything else as escaped text."""
    import altair as alt
    import marimo as mo

    if part is None:
        return ""
    if isinstance(part, list | tuple):
        return "\n".join(part_html(p) for p in part)
    if isinstance(part, alt.TopLevelMixin):
        return f'<figure class="chart">{_svg(part)}</figure>'
    if isinstance(part, mo.Html):
        return f'<div class="part">{part.text}</div>'
    return f"<pre>{html.escape(str(part))}</pre>"


def page(title: str, outputs, nav: str = "") -> str:
    """The static page of one notebook's ``outputs``."""
    body = "\n".join(part_html(o) for o in outputs)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>{html.escape(title)} · ctxkeep</title><style>{_CSS}</style></head>\n"
        f"<body>{nav}\n{body}\n</body></html>\n"
    )


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:64rem;margin:1.5rem auto;padding:0 1rem;
line-height:1.5;color:#1f2328}
nav a{margin-right:1rem}
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #d1d9e0}
table.data{border-collapse:collapse;font-size:.88rem;margin:.6rem 0}
table.data th,table.data td{border-bottom:1px solid #d1d9e0;padding:.2rem .5rem;text-align:left}
table.data td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.data caption{text-align:left;color:#59636e}
figure.chart{margin:.8rem 0;overflow-x:auto}
.part,pre{overflow-x:auto}
code{background:#f3f3f3;padding:0 .2em}
@media print{nav{display:none}figure.chart,table.data{break-inside:avoid-page}}
"""


def failure(
    home: Path, e: BaseException, doing: str, where: str | None = None, hint: str | None = None
) -> CtxkeepError:
    """The one-line error of a failure ``e`` while ``doing`` (e.g. ``notebook usage``):
    a file-system failure anywhere in its causes (full disk, read-only, permission:
    ``errors.from_os_error``, naming its file or the store), itself when it is a
    ``CtxkeepError``, ``store.db is damaged (…) - run 'ctxkeep doctor'`` for SQLite's
    SQLITE_CORRUPT/SQLITE_NOTADB and ``analytics store is unreadable: … - … reindex``
    for DuckDB's damage texts, each found in ``e`` or its causes (a cell's error reaches
    here as marimo raised it); anything else (a bug) as ``<doing> failed: <type>: <its
    last line>`` naming ``where``, with ``hint`` (default: check the store, else report
    the bug). Never raises."""
    from ctxkeep.service.store import store_error
    from ctxkeep.sinks.analytics_file import analytics_damage
    from ctxkeep.sinks.analytics_read import unreadable

    fs = from_os_error(e, where=str(home))
    if fs is not None:
        return fs
    seen: list[BaseException] = []
    x: BaseException | None = e
    while x is not None and len(seen) < 32 and not any(x is y for y in seen):
        seen.append(x)
        known = store_error(home, x)
        if known is not None:
            return known
        if type(x).__module__.startswith(("duckdb", "_duckdb")) and analytics_damage(x):
            return unreadable(home, x)  # type: ignore[arg-type]  # a DuckDB error is an Exception
        x = x.__cause__ or x.__context__
    text = str(e).strip()
    last = text.splitlines()[-1] if text else ""
    return CtxkeepError(
        f"{doing} failed: {type(e).__name__}{': ' + last if last else ''}",
        where=where,
        hint=hint
        or "run `ctxkeep doctor` to check the store; if it is sound, this is a ctxkeep bug: report it",
    )


def check_out_dir(out_dir: Path, force: bool = False) -> None:
    """Refuse a DIR that is a file, or a non-empty folder that holds no previous report
    (no ``MARKER``) unless ``force``: a report
    never writes over files it did not make. Raises UsageError."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError("DIR is a file", where=str(out_dir), hint="give a folder (it is created)")
    if force or not out_dir.is_dir():
        return
    if not (out_dir / MARKER).is_file() and any(out_dir.iterdir()):
        raise UsageError(
            "DIR is not empty and holds no previous ctxkeep report",
            where=str(out_dir),
            hint="give a new or empty folder, or add --force to write into it anyway",
        )


def write_reports(
    home: Path,
    out_dir: Path,
    params: dict[str, str],
    *,
    progress: Callable[[str, str], None] | None = None,
    force: bool = False,
) -> list[Path]:
    """Run every notebook of ``NOTEBOOKS`` against ``home`` and write
    ``out_dir/<name>.html`` and ``out_dir/index.html``. ``params``: ``timezone``,
    ``since``, ``until`` (text; "" = open). ``progress(name, "running"|"done")``.
    Returns the written paths (index last). Raises CtxkeepError when the extra is
    missing, the store cannot be opened (checked first, one line) or a notebook fails
    (its name and the error; a damaged store, a full disk: ``failure``'s one line);
    UsageError for a DIR that is a file or a non-empty folder
    that holds no previous report without ``force`` (``check_out_dir``, before any
    notebook runs); FileSystemError when DIR cannot be made."""
    missing = missing_modules()
    if missing:
        raise CtxkeepError(f"`report html` needs {', '.join(missing)}", hint=INSTALL_HINT)
    out_dir = Path(out_dir)
    check_out_dir(out_dir, force)
    from ctxkeep.service.analytics import open_store
    from ctxkeep.service.store import reading

    try:  # fail early, with one line: no store, a damaged analytics file or store.db header
        _home, duck, lite = open_store(home)
        duck.close()
        lite.close()
        with reading(home):  # opening store.db checks it (a damaged one: StoreDamaged)
            pass
    except Exception as e:
        raise failure(home, e, "opening the store") from None
    src = notebooks_dir()
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise (
            from_os_error(e, str(out_dir)) or CtxkeepError(f"cannot make DIR: {e}", where=str(out_dir))
        ) from None
    nav = (
        "<nav>"
        + "".join(f'<a href="{n}.html">{n}</a>' for n, _ in NOTEBOOKS)
        + '<a href="index.html">index</a></nav>'
    )
    written = []
    for name, title in NOTEBOOKS:
        if progress:
            progress(name, "running")
        path = out_dir / f"{name}.html"
        try:
            outputs, _defs = run_notebook(src / f"{name}.py", {"store": str(home), **params})
            text = page(title, outputs, nav)
        except Exception as e:  # a cell failed: the store's error, or the cell's, in one line
            nb = src / f"{name}.py"
            raise failure(
                home, e, f"notebook {name}", str(nb), f"open it with `marimo edit {nb}` to see the cell"
            ) from None
        _write(path, text)
        written.append(path)
        if progress:
            progress(name, "done")
    index = out_dir / "index.html"
    made = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    items = "".join(f'<li><a href="{n}.html">{html.escape(t)}</a></li>' for n, t in NOTEBOOKS)
    period = f"{params.get('since') or 'start'} … {params.get('until') or 'today'} ({params.get('timezone')})"
    _write(
        index,
        page(
            "ctxkeep reports",
            [],
            f"<h1>ctxkeep reports</h1><p>Store <code>{html.escape(str(home))}</code>, period "
            f"{html.escape(period)}, made {made}.</p><ul>{items}</ul>",
        ),
    )
    written.append(index)
    _write(out_dir / MARKER, json.dumps({"schema": 1, "pages": [p.name for p in written]}))
    return written


def _write(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``; a file-system failure (full disk, read-only,
    permission) as its one-line FileSystemError naming the file."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        raise (
            from_os_error(e, str(path))
            or CtxkeepError(f"cannot write the page: {e.strerror or e}", where=str(path))
        ) from None
