"""The long strings of a run's recorded requests, each written once: `answers.texts.jsonl`
beside the record, one JSON string a line, append-only, in the order first written.

A request in the record (`answers.jsonl`) shows such a string as a reference to its line,
`{"$": n}`, so an agent's identity line, its summary and each memory it recalls are written
once, not in every request that shows them. `Texts.unpack` gives the request back whole; a
request written before references existed holds none and is its own unpacking. Keys are
worked out from the whole request, so they do not change.

The record refers only to lines flushed before it: a crash can tear the last line, which
nothing refers to; readers skip it and the next writer cuts it off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from smallville.errors import RunError

TEXTS = "answers.texts.jsonl"

SHORTEST = 20
"""Characters below which a string stays where it is: its reference, `{"$":n}`, would save little."""

REF = "$"


class Texts:
    """The side file at `path`, read when first needed: `unpack` a recorded request, or
    `pack` one to write it (its new strings appended; `flush` puts them in the file)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lines: list[str] | None = None  # the strings by line
        self._whole = 0  # bytes of the file's whole lines, when read
        self._where: dict[str, int] | None = None  # a string -> its line, for a writer
        self._out = None

    def unpack(self, value: Any) -> Any:
        """`value` (a recorded request) with each reference replaced by its string."""
        if isinstance(value, dict):
            if len(value) == 1 and REF in value:
                return self._text(value[REF])
            return {k: self.unpack(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.unpack(v) for v in value]
        return value

    def pack(self, value: Any) -> Any:
        """`value` (a request's dict) with each string of SHORTEST characters or more replaced
        by a reference to its line, the strings new to the file appended to it."""
        if isinstance(value, str):
            return {REF: self._line(value)} if len(value) >= SHORTEST else value
        if isinstance(value, dict):
            return {k: self.pack(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.pack(v) for v in value]
        return value

    def flush(self) -> None:
        if self._out is not None:
            self._out.flush()

    def fileno(self) -> int | None:
        """The file being written, if any (to sync it before a checkpoint)."""
        return self._out.fileno() if self._out is not None else None

    def size(self) -> int:
        """The file's length in bytes now (0: there is none)."""
        return self.path.stat().st_size if self.path.exists() else 0

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def _text(self, line: int) -> str:
        """The string at `line`; the file read again for a line written since it was read (a
        run going on)."""
        if self._where is None and line >= len(self._read()):
            self._lines = None
        try:
            return self._read()[line]
        except (IndexError, TypeError):
            raise RunError(f"{self.path} has no line {line}, which the run's record refers to") from None

    def _read(self) -> list[str]:
        """The strings the file holds, its whole lines only; read once."""
        if self._lines is None:
            data = self.path.read_bytes() if self.path.exists() else b""
            self._whole = data.rfind(b"\n") + 1
            self._lines = [json.loads(line) for line in data[: self._whole].split(b"\n")[:-1]]  # not a torn last line
        return self._lines

    def _line(self, text: str) -> int:
        if self._where is None:
            self._open()
        assert self._where is not None and self._lines is not None and self._out is not None
        line = self._where.get(text)
        if line is None:
            line = self._where[text] = len(self._lines)
            self._lines.append(text)
            self._out.write(json.dumps(text, ensure_ascii=False) + "\n")
        return line

    def _open(self) -> None:
        """Open the file for appending after its whole lines (a torn last one cut off)."""
        lines = self._read()
        self._where = {}
        for i, text in enumerate(lines):
            self._where.setdefault(text, i)
        self._out = open(self.path, "a", encoding="utf-8")
        self._out.truncate(self._whole)
