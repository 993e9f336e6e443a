"""Memories ordered by importance and by last access, kept up to date in O(1) per change,
for the threshold search of the HNSW path (`smallville.memory.approx.hnsw`).

Importance is a rating 1..10, so "by importance" is ten levels. Within a level, memories
are kept in an append-only log of (time, memory) entries: an add or an access appends
one, and the memory's older entry goes stale (it is skipped, and dropped when the log is
compacted). Simulated time only moves forward, so the log is sorted by time and its tail
holds the most recently accessed memories; an entry that arrives out of order marks the
level for one re-sort before the next search.
"""

from __future__ import annotations

import numpy as np

LEVELS = 10
SLACK = 1024  # stale entries a log may hold beyond its live ones before compaction


class Level:
    """One importance level's access log."""

    def __init__(self) -> None:
        self.times = np.zeros(16, dtype=np.float64)
        self.mids = np.zeros(16, dtype=np.int64)
        self.end = 0  # entries written
        self.head = 0  # entries before it are all stale
        self.live = 0  # memories of this level
        self.sorted = True

    def append(self, mid: int, time: float) -> int:
        if self.end == len(self.times):
            self.times = np.concatenate([self.times, np.zeros_like(self.times)])
            self.mids = np.concatenate([self.mids, np.zeros_like(self.mids)])
        if self.end and time < self.times[self.end - 1]:
            self.sorted = False
        self.times[self.end], self.mids[self.end] = time, mid
        self.end += 1
        return self.end - 1


class AccessOrder:
    """Per importance level, the memories from most to least recently accessed."""

    def __init__(self) -> None:
        self.levels = [Level() for _ in range(LEVELS)]
        self.pos = np.zeros(16, dtype=np.int64)  # memory -> its entry in its level's log
        self.level = np.zeros(16, dtype=np.int8)

    def add(self, mid: int, importance: int, time: float) -> None:
        if mid >= len(self.pos):
            self.pos = np.concatenate([self.pos, np.zeros_like(self.pos)])
            self.level = np.concatenate([self.level, np.zeros_like(self.level)])
        lv = self.levels[importance - 1]
        self.level[mid] = importance - 1
        self.pos[mid] = lv.append(mid, time)
        lv.live += 1

    def touch(self, mids: list[int], time: float) -> None:
        """Mark `mids` accessed at `time`: O(1) each, amortised."""
        for mid in mids:
            lv = self.levels[self.level[mid]]
            self.pos[mid] = lv.append(mid, time)
            if lv.end - lv.head > 2 * lv.live + SLACK:
                self._compact(lv, sort=False)

    def prepare(self) -> None:
        """Re-sort any level that received an entry out of time order."""
        for lv in self.levels:
            if not lv.sorted:
                self._compact(lv, sort=True)

    def importance_range(self) -> tuple[int, int]:
        used = [i + 1 for i, lv in enumerate(self.levels) if lv.live]
        return used[0], used[-1]

    def newest(self) -> float:
        """The latest last-access time (the tail of each sorted log is live)."""
        return max(lv.times[lv.end - 1] for lv in self.levels if lv.live)

    def oldest(self) -> float:
        return min(self._head_time(lv) for lv in self.levels if lv.live)

    def _head_time(self, lv: Level) -> float:
        while True:
            chunk = lv.mids[lv.head : min(lv.end, lv.head + 256)]
            live = np.flatnonzero(self.pos[chunk] == np.arange(lv.head, lv.head + len(chunk)))
            if len(live):
                lv.head += int(live[0])
                return float(lv.times[lv.head])
            lv.head += len(chunk)

    def _compact(self, lv: Level, sort: bool) -> None:
        idx = np.arange(lv.head, lv.end)
        keep = idx[self.pos[lv.mids[lv.head : lv.end]] == idx]
        times, mids = lv.times[keep], lv.mids[keep]
        if sort:
            order = np.lexsort((mids, times))
            times, mids = times[order], mids[order]
        size = max(16, 2 * len(keep))
        lv.times, lv.mids = np.zeros(size), np.zeros(size, dtype=np.int64)
        lv.times[: len(keep)], lv.mids[: len(keep)] = times, mids
        lv.head, lv.end = 0, len(keep)
        lv.sorted = lv.sorted or sort
        self.pos[mids] = np.arange(len(keep))
