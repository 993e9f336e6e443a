"""Tables and consoles for people: nothing shown is ever cut off.

A table fits the width: the terminal's, or in a pipe or a file 80 columns (COLUMNS to change
it). A cell too long for its column wraps, or folds, onto more lines instead of ending in '…',
and a table whose columns cannot all fit side by side is shown as several tables, each
repeating the first column. In a pipe or a file the output is plain text (no colours, no
control codes) and lines of prose are not broken, so a path stays whole.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from rich.console import Console, OverflowMethod, RenderableType
from rich.measure import Measurement
from rich.table import Column
from rich.table import Table as RichTable
from rich.text import Text

UNLIMITED = 100_000  # a width for measuring what a table needs at most


class Table(RichTable):
    """A rich Table whose columns fold what does not fit, rather than cutting it, and whose
    cells are plain text (a memory that reads `[note]` is shown as written, not as markup)."""

    def add_column(
        self,
        header: RenderableType = "",
        footer: RenderableType = "",
        *,
        overflow: OverflowMethod = "fold",
        **options: Any,
    ) -> None:
        super().add_column(header, footer, overflow=overflow, **options)

    def add_row(self, *cells: RenderableType | None, **options: Any) -> None:
        super().add_row(*(Text(cell) if isinstance(cell, str) else cell for cell in cells), **options)


def make_console(stderr: bool = False) -> Console:
    """The console of stdout (or stderr). Rich writes plain text at 80 columns (or COLUMNS)
    to a pipe or a file; there it also leaves lines of text whole (soft wrap)."""
    console = Console(stderr=stderr)
    return console if console.is_terminal else Console(stderr=stderr, soft_wrap=True)


def print_table(console: Console, table: RichTable) -> None:
    """Print `table`; as several tables, one under the other, if its columns cannot all fit."""
    for part in reflow(console, table):
        console.print(fit(console, part))


def reflow(console: Console, table: RichTable) -> list[RichTable]:
    """`table` if its narrowest layout fits the console's width, else tables of its first
    column and as many of the others as fit (in order), the title on the first and the
    caption on the last."""
    if _narrowest(console, table) <= console.width or len(table.columns) < 3:
        return [table]
    key, rest = table.columns[0], table.columns[1:]
    groups: list[list[Column]] = [[]]
    for column in rest:
        if groups[-1] and _narrowest(console, _part(table, [key, *groups[-1], column])) > console.width:
            groups.append([])
        groups[-1].append(column)
    parts = [_part(table, [key, *group]) for group in groups]
    for i, part in enumerate(parts):
        part.title = table.title if i == 0 else None
        part.caption = table.caption if i == len(parts) - 1 else None
    return parts


def fit(console: Console, table: RichTable) -> RichTable:
    """`table` with widths that fit the console: the widest columns give way first, and none
    narrower than its longest word, so what is too long wraps at spaces (rich on its own can
    narrow a column of names below the longest name, and fold it)."""
    spans = [_span(console, column) for column in table.columns]
    room = console.width - (_narrowest(console, table) - sum(low for low, _ in spans))
    widths = [high for _, high in spans]
    if sum(widths) <= room or sum(low for low, _ in spans) > room:
        return table  # it fits; or no layout does, and rich folds
    for _ in range(sum(widths) - room):
        widest = max((i for i, (low, _) in enumerate(spans) if widths[i] > low), key=lambda i: widths[i])
        widths[widest] -= 1
    fitted = _part(table, table.columns)
    for column, width in zip(fitted.columns, widths):
        column.width = width
    return fitted


def _span(console: Console, column: Column) -> tuple[int, int]:
    """The least and the most width of a column's content: its longest word, its longest line."""
    options = console.options.update_width(UNLIMITED)
    sizes = [Measurement.get(console, options, cell) for cell in (column.header, *column.cells)]
    return max(m.minimum for m in sizes), max(m.maximum for m in sizes)


def _narrowest(console: Console, table: RichTable) -> int:
    """The least width `table` takes without cutting a word (titles and captions wrap)."""
    titles = table.title, table.caption
    table.title = table.caption = None
    try:
        return Measurement.get(console, console.options.update_width(UNLIMITED), table).minimum
    finally:
        table.title, table.caption = titles


def _part(table: RichTable, columns: list[Column]) -> RichTable:
    """A copy of `table` with only `columns` (its rows and their styles kept), built through
    rich's public `add_column` and `add_row`, so each column knows its new place."""
    part = copy.copy(table)
    part.columns, part.rows = [], []
    for column in columns:
        part.add_column(**{f.name: getattr(column, f.name) for f in fields(column) if not f.name.startswith("_")})
    cells = [list(column.cells) for column in columns]
    for i, row in enumerate(table.rows):
        part.add_row(*(column[i] for column in cells), style=row.style, end_section=row.end_section)
    return part
