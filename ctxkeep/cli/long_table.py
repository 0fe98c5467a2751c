"""A long table printed as Rich prints it, without Rich's per-cell cost: ``report daily``
of a 10 GB store is ~7,000 day x agent rows, and Rich measures and renders each cell
as an object (padding, segments, line splits: 4.3 s of the command, issue 26).

How: a Rich table's layout (its column widths, borders, the columns a narrow
terminal leaves out, a caption) depends only on each column's measure, the widest
of its cells' measures (``Text``: its longest line and its longest word). So Rich lays
out and renders a *proxy*: the same table with only the rows holding some column's
widest line or longest word (at most two per column). Its body rows are then
formatted here, from the widths Rich chose (``FiguresTable.widths``), as Rich formats
a plain text cell: padding, left or right justified, blank lines under a shorter cell
of a multi-line row, the box's dividers. The proxy's own rows, formatted here, must
equal the lines Rich rendered for them (a check made on every print); every row is
then put where the proxy's rows were. Anything else (a cell with a tab or a control
character, a style, a cell wider than its column, a row Rich would fold or crop, a
mismatch) prints the whole table with Rich, as before: the output is byte-identical
either way (``tests/cli/test_long_table.py`` compares both at 60-200 columns, on the
corpus's reports and a 10,000-row table).

Cells are plain strings (printed as ``Text``: literal, never markup), rows of equal
length, one string per column of the table as made (before a narrow terminal leaves
columns out).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

#: what makes a cell other than plain text for this path: a tab (expanded by Rich), a
#: control character (stripped by ``Text`` or escaped by the console), a line break
#: other than ``\n`` (``str.splitlines`` splits there), a blank before a line end
#: (Rich strips it from a right-justified line)
_NOT_PLAIN = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]| \n| $")


def proxy_rows(cells: Sequence[Sequence[str]]) -> list[int]:
    """The indexes (ascending) of the rows a proxy table needs: per column the first row
    with its longest line and the first with its longest word (Rich's measure of a
    ``Text``: ``cell_len`` of the widest line, of the widest whitespace-separated
    word; a cell without words: its widest line). A column of one-word ASCII cells
    (dates, figures) is measured with ``len`` at C speed."""
    from rich.cells import cell_len

    if not cells:
        return []
    pick: set[int] = set()
    for col in zip(*cells, strict=True):
        joined = "".join(col)
        if joined.isascii() and not _SPACE.search(joined):  # one line, one word each
            lens = list(map(len, col))
            pick.add(lens.index(max(lens)))
            continue
        best_max = best_min = -1
        at_max = at_min = 0
        for i, s in enumerate(col):
            mx = max(map(cell_len, s.split("\n"))) if "\n" in s else cell_len(s)
            words = s.split()
            mn = max(map(cell_len, words)) if words else mx
            if mx > best_max:
                best_max, at_max = mx, i
            if mn > best_min:
                best_min, at_min = mn, i
        pick.update((at_max, at_min))
    return sorted(pick)


#: whitespace as ``str.split`` splits at it
_SPACE = re.compile(r"\s")


def plain(cells: Sequence[Sequence[str]]) -> bool:
    """Whether every cell is plain text this module formats as Rich does."""
    return not any(_NOT_PLAIN.search(s) for row in cells for s in row)


def print_long(
    console,
    proxy,
    cells: Sequence[Sequence[str]],
    picked: Sequence[int],
    whole: Callable[[], object],
) -> bool:
    """Print on ``console`` the table whose body is ``cells``: ``proxy`` (a
    ``cli.table()`` table holding only the rows ``picked`` of ``cells``, as
    ``proxy_rows`` picks them, with the whole table's columns, header and footer) laid
    out and rendered by Rich, every row formatted here. Falls back to printing
    ``whole()`` (the table with every row) with Rich when a cell is not plain or the
    proxy's rows do not come out as Rich rendered them. Returns True when the fast
    path printed."""
    if not cells or not plain(cells):
        console.print(whole())
        return False
    made = list(proxy.columns)  # a narrow terminal may leave some out while printing
    with console.capture() as cap:
        console.print(proxy)
    lines = cap.get().split("\n")
    widths = getattr(proxy, "widths", None)
    body = None if widths is None else _formatter(console, proxy, made, widths)
    try:
        if body is not None:
            mine = [x for i in picked for x in body(cells[i])]
            at = _find(lines, mine)
            if at is not None:
                rows = (x for row in cells for x in body(row))
                console.file.write("\n".join([*lines[:at], *rows, *lines[at + len(mine) :]]))
                console.file.flush()
                return True
    except _Wider:
        pass
    console.print(whole())
    return False


def _find(lines: list[str], block: list[str]) -> int | None:
    """The first index where ``block`` stands in ``lines`` (None: nowhere)."""
    if not block:
        return None
    for i in range(len(lines) - len(block) + 1):
        if lines[i] == block[0] and lines[i : i + len(block)] == block:
            return i
    return None


class _Wider(Exception):
    """A cell wider than its column (Rich would fold or crop it)."""


def _formatter(console, t, made: list, widths: list[int]) -> Callable[[Sequence[str]], list[str]] | None:
    """``row -> its printed lines`` for a body row of ``t`` as last laid out (``widths``
    of its shown columns; ``made``: its columns before a narrow terminal left some
    out, the rows' order), as Rich's ``Table._render`` and ``_get_cells`` make them;
    None when this module does not format such a table (styles, row lines, a vertical
    alignment other than top, a justification other than left or right, a column of
    fixed width). The returned function raises ``_Wider`` for a cell wider than its
    column."""
    from rich.cells import cell_len

    def styled(x) -> bool:  # "none", "", None: no style
        return bool(console.get_style(x or ""))

    if t.row_styles or t.show_lines or t.leading or styled(t.style) or styled(t.border_style):
        return None
    cols = t.columns
    if len(widths) != len(cols):
        return None
    index = [next(i for i, m in enumerate(made) if m is c) for c in cols]
    _, right, _, left = t.padding
    pads = []
    for j, c in enumerate(cols):
        if (
            styled(c.style)
            or c.vertical != "top"
            or c.justify not in ("left", "right")
            or c.width is not None
        ):
            return None
        lp, rp = (left, right) if any(t.padding) else (0, 0)
        if t.collapse_padding and j > 0:
            lp = max(0, lp - rp)
        if not t.pad_edge:
            lp = 0 if j == 0 else lp
            rp = 0 if j == len(cols) - 1 else rp
        pads.append((" " * lp, " " * rp, widths[j] - lp - rp, c.justify == "right"))
    edge_l = edge_r = divider = ""
    if t.box:
        box = t.box.substitute(console.options, safe=console.safe_box if t.safe_box is None else t.safe_box)
        divider = box.mid_vertical
        if t.show_edge:
            edge_l, edge_r = box.mid_left, box.mid_right
    blanks = [" " * w for w in widths]

    def body(row: Sequence[str]) -> list[str]:
        parts = [row[i].split("\n") for i in index]
        out = []
        for n in range(max(len(p) for p in parts)):
            line = []
            for j, p in enumerate(parts):
                if n >= len(p):  # a shorter cell of a multi-line row: blank below
                    line.append(blanks[j])
                    continue
                s = p[n]
                lp, rp, room, rjust = pads[j]
                gap = room - cell_len(s)
                if gap < 0:
                    raise _Wider
                line.append(lp + (" " * gap + s if rjust else s + " " * gap) + rp)
            out.append(edge_l + divider.join(line) + edge_r)
        return out

    return body
