"""Rows of results as a CSV file, for experiments and evaluations alike."""

from __future__ import annotations

import csv
import os
from pathlib import Path


def write_csv(path: Path, rows: list[dict[str, object]]) -> None:
    """Write `rows` (dicts) to `path` with a column for every key any row has, in the order
    first seen; a missing or None value is an empty cell. Written beside and renamed into
    place, so a reader never sees half a file."""
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns or ["condition"])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    os.replace(tmp, path)
