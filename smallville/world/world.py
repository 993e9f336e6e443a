"""Where everyone and everything is, and what each can see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from smallville.world.grid import Grid, Tile, in_area

if TYPE_CHECKING:
    from smallville.scenario.model import MapSpec


@dataclass(eq=False)
class Thing:
    """An object on one tile; actions change its state, and it returns to `idle_state`.
    Two things are the same only if they are one (`world.things.index` finds it at once)."""

    name: str
    tile: Tile
    area: str
    state: str
    idle_state: str
    user: str | None = None


def _copy_thing(thing: Thing) -> Thing:
    """A copy of `thing` (as `dataclasses.replace` makes, four times as fast: worlds are
    copied often by run-ahead)."""
    other = Thing.__new__(Thing)
    other.__dict__.update(thing.__dict__)
    return other


class World:
    """The grid, its objects, and agent positions in a spatial hash for cheap perception."""

    def __init__(self, grid: Grid, objects: list[tuple[str, Tile, str]], vision: int, tile_time: float) -> None:
        self.grid = grid
        self.vision = vision
        self.tile_time = tile_time
        self.things = [Thing(name, tile, grid.area_at(tile) or "", state, state) for name, tile, state in objects]
        self.things.sort(key=lambda t: (t.area, t.name, t.tile))
        self._things_by_area: dict[str, list[Thing]] = {}
        for thing in self.things:
            self._things_by_area.setdefault(thing.area, []).append(thing)
        self._cell = max(1, vision)
        self._positions: dict[str, Tile] = {}
        self._cells: dict[Tile, set[str]] = {}

    @classmethod
    def from_map(cls, spec: MapSpec) -> World:
        """A world from a scenario's `MapSpec`."""
        grid = Grid(spec.grid, spec.legend)
        objects = [(o.name, (o.at[0], o.at[1]), o.state) for o in spec.objects]
        return cls(grid, objects, spec.vision, spec.tile_time)

    def copy(self) -> World:
        """A world with the same grid (shared: it never changes), and its own copies of the
        objects and of where everyone is."""
        other = World.__new__(World)
        other.grid, other.vision, other.tile_time, other._cell = self.grid, self.vision, self.tile_time, self._cell
        other.things = [_copy_thing(t) for t in self.things]
        other._things_by_area = {}
        for thing in other.things:
            other._things_by_area.setdefault(thing.area, []).append(thing)
        other._positions = dict(self._positions)
        other._cells = {cell: set(agents) for cell, agents in self._cells.items()}
        return other

    def clear(self) -> None:
        """No one anywhere (objects are left as they are)."""
        self._positions, self._cells = {}, {}

    # ---- agents ---------------------------------------------------------------------

    def place(self, agent: str, tile: Tile) -> None:
        old = self._positions.get(agent)
        if old is not None:
            self._cells[self._cell_of(old)].discard(agent)
        self._positions[agent] = tile
        self._cells.setdefault(self._cell_of(tile), set()).add(agent)

    def position(self, agent: str) -> Tile:
        return self._positions[agent]

    def area_of(self, agent: str) -> str:
        return self.grid.area_at(self._positions[agent]) or ""

    def _cell_of(self, tile: Tile) -> Tile:
        return (tile[0] // self._cell, tile[1] // self._cell)

    def _visible(self, here: Tile, there: Tile) -> bool:
        return max(abs(here[0] - there[0]), abs(here[1] - there[1])) <= self.vision

    def agents_near(self, agent: str) -> list[str]:
        """Other agents within `vision` tiles in the same arena, by id."""
        here = self._positions[agent]
        area = self.grid.area_at(here)
        cx, cy = self._cell_of(here)
        seen = []
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for other in self._cells.get((cx + dx, cy + dy), ()):
                    there = self._positions[other]
                    if other != agent and self._visible(here, there) and self.grid.area_at(there) == area:
                        seen.append(other)
        return sorted(seen)

    def agents_in(self, prefix: str) -> list[str]:
        """Agents whose area lies within an area path or prefix, by id."""
        return sorted(a for a, t in self._positions.items() if in_area(self.grid.area_at(t) or "", prefix))

    # ---- objects --------------------------------------------------------------------

    def objects_in(self, area: str) -> list[Thing]:
        return self._things_by_area.get(area, [])

    def objects_within(self, prefix: str) -> list[Thing]:
        """Objects in the areas within an area path or prefix (a place's rooms), by area and name."""
        return [t for area in self.grid.arenas_in(prefix) for t in self._things_by_area.get(area, ())]

    def objects_near(self, agent: str) -> list[Thing]:
        """Objects within `vision` tiles in the agent's arena."""
        here = self._positions[agent]
        return [t for t in self.objects_in(self.grid.area_at(here) or "") if self._visible(here, t.tile)]

    def find_object(self, area: str, name: str | None) -> Thing | None:
        if not name:
            return None
        return next((t for t in self.objects_in(area) if t.name == name), None)
