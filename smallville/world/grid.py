"""The ASCII map as tiles: areas, walls and shortest paths."""

from __future__ import annotations

import heapq
import re
from functools import cached_property, lru_cache

from smallville.world.mentions import Mentions

Tile = tuple[int, int]  # (column, row)
_STEPS = ((0, -1), (-1, 0), (1, 0), (0, 1))  # fixed order: paths are deterministic


def normalize_area(path: str) -> str:
    """`Hobbs Cafe/cafe ` -> `Hobbs Cafe / cafe`."""
    return " / ".join(part.strip() for part in path.split("/"))


def in_area(area: str, prefix: str) -> bool:
    """Whether an area path lies within a prefix ("Hobbs Cafe" holds "Hobbs Cafe / cafe")."""
    return area == prefix or area.startswith(prefix + " / ")


def room_open_to(area: str, name: str) -> bool:
    """Whether a person may use a room: a room named as someone's, a capitalised name with
    's ("Eddy Lin's bedroom", "John and Mei's bedroom"), is for those it names by first name;
    any other room ("men's restroom"), and a place as a whole, is for everyone."""
    if " / " not in area:
        return True
    room = area.rsplit(" / ", 1)[1]
    if not re.search(r"\b[A-Z][\w-]*'s\b", room):
        return True
    return re.search(rf"\b{re.escape(name.split()[0])}\b", room, re.IGNORECASE) is not None


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
        self._prefix_tiles: dict[str, list[Tile]] = {}
        self._path = lru_cache(maxsize=4096)(self._shortest)  # paths only: a few MB at most

    def walkable(self, tile: Tile) -> bool:
        return tile in self._area

    def walkable_tiles(self) -> list[Tile]:
        """Every walkable tile."""
        return list(self._area)

    def arenas(self) -> list[str]:
        """The full area paths tiles have (no bare sectors), sorted."""
        return sorted(set(self._area.values()))

    @cached_property
    def _place_arenas(self) -> dict[str, tuple[str, ...]]:
        """Each place's full area paths, sorted."""
        arenas: dict[str, list[str]] = {}
        for area in self.arenas():
            arenas.setdefault(area.split(" / ")[0], []).append(area)
        return {place: tuple(areas) for place, areas in arenas.items()}

    def arenas_in(self, prefix: str) -> tuple[str, ...]:
        """The full area paths within an area path or prefix (a place's rooms), sorted."""
        prefix = normalize_area(prefix)
        return tuple(a for a in self._place_arenas.get(prefix.split(" / ")[0], ()) if in_area(a, prefix))

    def area_at(self, tile: Tile) -> str | None:
        """The area path of a tile ("Sector / Arena"), or None for a wall."""
        return self._area.get(tile)

    def areas(self) -> list[str]:
        return sorted(self._tiles_by_area)

    @cached_property
    def places(self) -> tuple[str, ...]:
        """The top-level places (the first part of each area's path), sorted."""
        return tuple(sorted({a.split(" / ")[0] for a in self._tiles_by_area}))

    @cached_property
    def mentions(self) -> Mentions:
        """Finds the places a text names (made once: copies of a world share their grid)."""
        return Mentions(self.places)

    def tiles_in(self, area: str) -> list[Tile]:
        """Tiles of an area path or of any area under a prefix, in reading order."""
        area = normalize_area(area)
        if area in self._tiles_by_area:
            return self._tiles_by_area[area]
        if area not in self._prefix_tiles:  # a deeper prefix or an unknown area: scan once
            self._prefix_tiles[area] = sorted(
                (t for t, a in self._area.items() if in_area(a, area)), key=lambda t: (t[1], t[0])
            )
        return self._prefix_tiles[area]

    def _distances_to(self, goal: Tile, start: Tile) -> dict[Tile, int] | None:
        """Exact steps to `goal` from every tile that lies on a shortest start-goal path (and
        from some others), or None when start cannot reach goal.

        A* from the goal towards the start with the Manhattan heuristic, which is consistent,
        so every settled tile's distance is exact; the search goes on until every tile with
        f <= the shortest length is settled, so all tiles of all shortest paths are in the
        answer. It costs about the area between start and goal, not the whole map, and keeps
        nothing once the path is drawn: memory stays bounded however large the town.
        """
        if goal not in self._area or start not in self._area:
            return None
        sc, sr = start
        area = self._area
        done: dict[Tile, int] = {}
        best = {goal: 0}
        heap = [(abs(goal[0] - sc) + abs(goal[1] - sr), 0, goal)]
        bound = None
        while heap:
            f, neg_g, tile = heapq.heappop(heap)
            if bound is not None and f > bound:
                break
            if tile in done:
                continue
            g = -neg_g
            done[tile] = g
            if tile == start:
                bound = g
            c, r = tile
            for dc, dr in _STEPS:
                nxt = (c + dc, r + dr)
                if nxt in area and nxt not in done and g + 1 < best.get(nxt, 1 << 60):
                    best[nxt] = g + 1
                    heapq.heappush(heap, (g + 1 + abs(nxt[0] - sc) + abs(nxt[1] - sr), -(g + 1), nxt))
        return done if bound is not None else None

    def path(self, start: Tile, goal: Tile) -> list[Tile] | None:
        """Shortest 4-neighbour path from start to goal, both included; None if unreachable.

        From each tile the path steps to the first neighbour (in `_STEPS` order) one step
        nearer the goal, so the same start and goal always give the same path."""
        path = self._path(start, goal)
        return None if path is None else list(path)

    def _shortest(self, start: Tile, goal: Tile) -> tuple[Tile, ...] | None:
        dist = self._distances_to(goal, start)
        if dist is None:
            return None
        path = [start]
        here = start
        while here != goal:
            c, r = here
            want = dist[here] - 1
            here = next(t for t in ((c + dc, r + dr) for dc, dr in _STEPS) if dist.get(t) == want)
            path.append(here)
        return tuple(path)

    def distance(self, start: Tile, goal: Tile) -> int | None:
        """Steps on the shortest path, or None if unreachable."""
        path = self._path(start, goal)
        return None if path is None else len(path) - 1
