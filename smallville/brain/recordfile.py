"""A run's record (`answers.jsonl`) read by key from a byte offset on, reading only what is
asked: a replay from a checkpoint needs the lines after it, in order, and now and then the
last line of a key before it.

Lines after the offset are indexed a block at a time as the replay reaches them. A key not
among them is first looked for in the bytes (`bytes.find` of the line start the record
always writes, at memory speed), so a request the record lacks (an interview) costs a scan
of the file, not a parse of every line. Past a few such scans, the rest of the file is
indexed once, as replay did before.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path

BLOCK = 1 << 16
"""Bytes read at a time to index lines."""

SCAN_BLOCK = 1 << 20
"""Bytes read at a time to look for a key."""

SCANS = 4
"""Scans for keys that are not ahead after which the whole file is indexed instead."""


def key_of(line: bytes) -> str:
    """A record line's key, read without parsing the line (it comes first, as the record
    writes it)."""
    return line[8:24].decode() if line.startswith(b'{"key":"') else json.loads(line)["key"]


class RecordFile:
    """The record at `path` as it is now (what is appended later is not read), from the
    first line starting at or after byte `start`. `take(key)` gives the next line of `key`
    from there on, then its last one again; for a key with no line from there on, its last
    line before; None if it has none. A line that is not a record line raises ValueError."""

    def __init__(self, path: str | Path, start: int = 0) -> None:
        self.path = Path(path)
        with open(self.path, "rb") as f:
            self.size = os.fstat(f.fileno()).st_size
        self.begin = self._line_start(start)
        self._cursor = self.begin  # lines before it (from `begin`) are indexed
        self._ahead: dict[str, deque[bytes]] = {}  # indexed lines not taken yet, by key
        self._last: dict[str, bytes | None] = {}  # the line a key's next take gives again
        self._before: dict[str, bytes] | None = None  # every key's last line before `begin`, once read
        self._scans = 0

    def take(self, key: str) -> bytes | None:
        queue = self._ahead.get(key)
        if not queue and self._cursor < self.size:
            at = self._find(key, self._cursor, self.size) if self._before is None else -1
            if at >= 0:
                self._index_to(at)
                queue = self._ahead.get(key)
        if queue:
            self._last[key] = queue.popleft()
        elif key not in self._last:
            self._last[key] = self._last_before(key)
        return self._last[key]

    def lines_before(self) -> int:
        """The record lines before `begin` (blank ones not counted)."""
        return sum(1 for line in self._lines(0, self.begin) if line.strip())

    def lines(self) -> int:
        """The record lines in the file (blank ones not counted)."""
        return sum(1 for line in self._lines(0, self.size) if line.strip())

    # -- reading ------------------------------------------------------------------------

    def _read(self, lo: int, hi: int) -> bytes:
        lo, hi = max(0, lo), min(hi, self.size)
        if hi <= lo:
            return b""
        with open(self.path, "rb") as f:
            f.seek(lo)
            return f.read(hi - lo)

    def _line_start(self, at: int) -> int:
        """The first line start at or after byte `at`."""
        at = min(max(0, at), self.size)
        while 0 < at < self.size and self._read(at - 1, at) != b"\n":
            data = self._read(at, at + BLOCK)
            cut = data.find(b"\n")
            at = at + cut + 1 if cut >= 0 else at + len(data)
        return at

    def _lines(self, lo: int, hi: int):
        """The lines starting in [lo, hi) (`lo` a line start), a block at a time."""
        rest = b""
        for s in range(lo, hi, BLOCK):
            data = rest + self._read(s, min(s + BLOCK, hi))
            *whole, rest = data.split(b"\n")
            for line in whole:
                yield line + b"\n"
        if rest:
            yield rest + self._read(hi, self._line_start(hi))  # the last line, to its end

    def _index_to(self, at: int) -> None:
        """Index the lines from the cursor on, up to and including the one starting at `at`."""
        end = min(self.size, self._line_start(at + 1))
        for line in self._lines(self._cursor, end):
            if line.strip():
                self._ahead.setdefault(key_of(line), deque()).append(line)
        self._cursor = end

    def _find(self, key: str, lo: int, hi: int, last: bool = False) -> int:
        """Where the first (`last`: the last) line starting in [lo, hi) with `key` begins
        (`lo` a line start); -1 if none. After SCANS searches that read to the end of their
        range, the whole file is indexed instead and the answer is -1: the indexes hold it."""
        if self._scans >= SCANS:
            self._index_all()
            return -1
        needle = b'\n{"key":"' + key.encode() + b'"'
        starts = range(lo, hi, SCAN_BLOCK)
        for s in reversed(starts) if last else starts:
            e = min(s + SCAN_BLOCK, hi)
            # the file with a newline before it: a match at j is a line starting at s + j in [s, e)
            data = (b"\n" if s == 0 else b"") + self._read(s - 1 if s else 0, e + len(needle) - 2)
            j = data.rfind(needle) if last else data.find(needle)
            if j >= 0:
                if last:
                    self._scans += 1
                return s + j
        self._scans += 1
        return -1

    def _last_before(self, key: str) -> bytes | None:
        if self._before is not None:
            return self._before.get(key)
        at = self._find(key, 0, self.begin, last=True)
        if self._before is not None:  # `_find` indexed everything instead
            return self._before.get(key)
        return next(self._lines(at, at + 1)) if at >= 0 else None

    def _index_all(self) -> None:
        """Index the rest of the file, and every key's last line before `begin`."""
        self._index_to(self.size)
        before: dict[str, bytes] = {}
        for line in self._lines(0, self.begin):
            if line.strip():
                before[key_of(line)] = line
        self._before = before
