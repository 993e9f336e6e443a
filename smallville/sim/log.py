"""The append-only event log: one JSON object a line (t, time, kind, agent, data)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import IO, Any

from smallville.timefmt import format_sim


class EventLog:
    """Writes events as they happen; keeps them in memory too when no file is given."""

    def __init__(self, start: datetime, out: IO[str] | None = None) -> None:
        self.start = start
        self.out = out
        self.records: list[dict[str, Any]] = []
        self.count = 0
        self._clock: tuple[float, str] = (math.nan, "")  # the last time written, and its text
        self._encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def time_text(self, t: float) -> str:
        """`format_sim` of `t`; events come in runs of one instant, so the last is kept."""
        if self._clock[0] != t:
            self._clock = (t, format_sim(self.start, t))
        return self._clock[1]

    def emit(self, t: float, kind: str, agent: str | None, data: dict[str, Any]) -> None:
        record = {
            "t": int(t) if float(t).is_integer() else round(t, 3),
            "time": self.time_text(t),
            "kind": kind,
            "agent": agent,
            "data": data,
        }
        self.count += 1
        if self.out is None:
            self.records.append(record)
        else:
            self.out.write(self._encode(record) + "\n")

    def flush(self) -> None:
        if self.out is not None:
            self.out.flush()


class Nowhere:
    """A file that forgets what is written to it: where the log of a simulation rebuilt in
    memory goes."""

    def write(self, text: str) -> None:
        pass

    def flush(self) -> None:
        pass


class Counting(EventLog):
    """A log that only counts its events: the log of a copy of a simulation that must leave
    no trace (run-ahead's)."""

    def emit(self, t: float, kind: str, agent: str | None, data: dict[str, Any]) -> None:
        self.count += 1
