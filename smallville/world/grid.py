"""The ASCII map as tiles: areas, walls and shortest paths."""

from __future__ import annotations

from collections import deque
from functools import lru_cache

Tile = tuple[int, int]          # (column, row)
_STEPS = ((0, -1), (-1, 0), (1, 0), (0, 1))   # fixed order: paths are deterministic


def normalize_area(path: str) -> str:
    """`Hobbs Cafe/cafe ` -> `Hobbs Cafe / cafe`."""
    return " / ".join(part.strip() for part in path.split("/"))


def in_area(area: str, prefix: str) -> bool:
    """Whether an area path lies within a prefix ("Hobbs Cafe" holds "Hobbs Cafe / cafe")."""
    return area == prefix or area.startswith(prefix + " / ")


class Grid:
    """Walkable tiles and the area path of each, from a legend and rows of characters."""

    def __init__(self, rows: tuple[str, ...] | list[str], legend: dict[str, str]) -> None:
        self.rows = tuple(rows)
        self.height = len(self.rows)
        self.width = len(self.rows[0]) if self.rows else 0
        self._area: dict[Tile, str] = {}
        for r, row in enumerate(self.rows):
            for c, ch in enumerate(row):
                value = legend.get(ch, "wall")
                if value != "wall":
                    self._area[(c, r)] = normalize_area(value)
        self._tiles_by_area: dict[str, list[Tile]] = {}
        for tile in sorted(self._area, key=lambda t: (t[1], t[0])):
            area = self._area[tile]
            self._tiles_by_area.setdefault(area, []).append(tile)
            if " / " in area:
                self._tiles_by_area.setdefault(area.split(" / ")[0], []).append(tile)
        self._field = lru_cache(maxsize=4096)(self._distance_field)

    def walkable(self, tile: Tile) -> bool:
        return tile in self._area

    def area_at(self, tile: Tile) -> str | None:
        """The area path of a tile ("Sector / Arena"), or None for a wall."""
        return self._area.get(tile)

    def areas(self) -> list[str]:
        return sorted(self._tiles_by_area)

    def tiles_in(self, area: str) -> list[Tile]:
        """Tiles of an area path or of any area under a prefix, in reading order."""
        area = normalize_area(area)
        if area in self._tiles_by_area:
            return self._tiles_by_area[area]
        return sorted((t for t, a in self._area.items() if in_area(a, area)), key=lambda t: (t[1], t[0]))

    def _distance_field(self, goal: Tile) -> dict[Tile, int]:
        """Steps from every reachable tile to `goal` (breadth-first)."""
        dist = {goal: 0}
        queue = deque([goal])
        while queue:
            c, r = queue.popleft()
            d = dist[(c, r)] + 1
            for dc, dr in _STEPS:
                nxt = (c + dc, r + dr)
                if nxt in self._area and nxt not in dist:
                    dist[nxt] = d
                    queue.append(nxt)
        return dist

    def path(self, start: Tile, goal: Tile) -> list[Tile] | None:
        """Shortest 4-neighbour path from start to goal, both included; None if unreachable."""
        field = self._field(goal)
        if start not in field:
            return None
        path = [start]
        here = start
        while here != goal:
            c, r = here
            here = min(((c + dc, r + dr) for dc, dr in _STEPS if (c + dc, r + dr) in field),
                       key=lambda t: field[t])
            path.append(here)
        return path

    def distance(self, start: Tile, goal: Tile) -> int | None:
        """Steps on the shortest path, or None if unreachable."""
        return self._field(goal).get(start)
