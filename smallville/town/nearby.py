"""Places on a generated map, found nearest first, in time that does not grow with the town.

A resident's cafe, job or classroom is the nearest one as the crow flies from their door
(|dx| + |dy|, ties by a rank such as drawing order or name). Scanning every place for every
resident made generating a town grow with the square of its size; here places sit in square
cells of a few places each, and a search looks at the cells ring by ring outward from the
door, stopping once no place in an unseen cell could be nearer than those found.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from math import isqrt
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")
PER_CELL = 4  # places a cell holds on average: fewer cells to visit, more to sort


class Place(NamedTuple):
    """A place to find: its rank (distinct, breaks ties of distance), its door and what it is."""

    rank: Hashable
    x: int
    y: int
    item: Any


class Nearby(Generic[T]):
    """Places to find nearest first; with `uses` (by rank), each may be taken that many times."""

    def __init__(self, places: list[Place], uses: dict[Any, int] | None = None) -> None:
        width, height = max((p.x for p in places), default=0) + 1, max((p.y for p in places), default=0) + 1
        self.size = max(1, isqrt(width * height * PER_CELL // max(1, len(places))))
        self.cells: dict[tuple[int, int], list[Place]] = {}
        for place in places:
            self.cells.setdefault(self._cell(place.x, place.y), []).append(place)
        self.last = self._cell(width - 1, height - 1)
        self.uses = uses
        self.count = len(places)

    def nearest(self, x: int, y: int, k: int = 1) -> list[T]:
        """The `k` places nearest to (x, y), nearest first (fewer if there are fewer)."""
        return [place.item for place in self._search(x, y, k)]

    def take(self, x: int, y: int) -> T:
        """The nearest place to (x, y), used once more: once used `uses` times it is gone."""
        if not self.count or self.uses is None:
            raise LookupError("no place left to take")
        (place,) = self._search(x, y, 1)
        self.uses[place.rank] -= 1
        if not self.uses[place.rank]:
            cell = self._cell(place.x, place.y)
            self.cells[cell].remove(place)
            if not self.cells[cell]:
                del self.cells[cell]
            self.count -= 1
        taken: T = place.item
        return taken

    def _search(self, x: int, y: int, k: int) -> list[Place]:
        cx, cy = self._cell(x, y)
        want = min(k, self.count)
        found: list[tuple[int, Hashable, Place]] = []
        for r in range(max(cx, self.last[0] - cx, cy, self.last[1] - cy) + 1):
            if (2 * r + 1) ** 2 > PER_CELL * len(self.cells):  # few cells left: look at all unseen at once
                cells = [cell for cell in self.cells if max(abs(cell[0] - cx), abs(cell[1] - cy)) >= r]
                found += [(abs(p.x - x) + abs(p.y - y), p.rank, p) for cell in cells for p in self.cells[cell]]
                found.sort(key=lambda f: f[:2])
                break
            for cell in _ring(cx, cy, r, self.last):
                if cell in self.cells:
                    found += [(abs(p.x - x) + abs(p.y - y), p.rank, p) for p in self.cells[cell]]
            found.sort(key=lambda f: f[:2])
            if len(found) >= want and (not want or found[want - 1][0] <= r * self.size):
                break  # a place r + 1 rings out or more is over r * size tiles away
        return [place for _, _, place in found[:k]]

    def _cell(self, x: int, y: int) -> tuple[int, int]:
        return x // self.size, y // self.size


def _ring(cx: int, cy: int, r: int, last: tuple[int, int]) -> Iterator[tuple[int, int]]:
    """The cells `r` cells from (cx, cy) by the larger offset, within (0, 0) to `last`."""
    if r == 0:
        yield cx, cy
        return
    xs = range(max(0, cx - r), min(last[0], cx + r) + 1)
    for y in (cy - r, cy + r):
        if 0 <= y <= last[1]:
            yield from ((x, y) for x in xs)
    for x in (cx - r, cx + r):
        if 0 <= x <= last[0]:
            yield from ((x, y) for y in range(max(0, cy - r + 1), min(last[1], cy + r - 1) + 1))
