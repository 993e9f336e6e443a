"""A run's event log followed from a byte offset: the whole lines appended since, never the
file again from its start (a line still being written waits for its newline)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from smallville.errors import RunError, Truncated

CHUNK = 1 << 20  # bytes of events read at a time


def read_from(path: Path, offset: int, limit: int = CHUNK) -> tuple[list[dict], int]:
    """The whole lines from byte `offset` on (about `limit` bytes of them, at least one if
    there is one) and the offset after them."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        size = 0
    if size < offset:
        raise Truncated(f"{path} is {size} bytes, shorter than {offset}")
    if size == offset:
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(limit)
        while b"\n" not in data and offset + len(data) < size:  # one line longer than limit
            more = f.read(limit)
            if not more:
                break
            data += more
    whole = data[: data.rfind(b"\n") + 1]
    out, at = [], offset
    for line in whole.splitlines(keepends=True):
        try:
            if line.strip():
                out.append(json.loads(line))
        except ValueError:
            raise RunError(f"{path.parent.name}/{path.name}: the line at byte {at} is not an event") from None
        at += len(line)
    return out, offset + len(whole)
