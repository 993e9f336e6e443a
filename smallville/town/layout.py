"""The map of a generated town: rows of walled buildings along streets, each with a door.

Buildings are packed left to right into rows of a fixed height; a street runs above every
row, a street column separates every two buildings and runs down both edges, so every
room opens onto the one street network and every tile is reachable.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ROW_HEIGHT = 7  # a building's height, walls included
STREET = "."
WALL = "#"


@dataclass
class Room:
    """One arena (or a sector without arenas): its area path, legend character, size and objects."""

    area: str
    width: int  # walls included
    objects: list[str]
    char: str = ""
    x: int = 0  # top-left corner on the map (its wall)
    y: int = 0
    placed: list[tuple[str, tuple[int, int]]] = field(default_factory=list)


@dataclass
class Building:
    """A sector: one or more rooms side by side, each with its own door onto the street."""

    sector: str
    kind: str  # home, cafe, pub, market, office, workshop, clinic, college, park
    rooms: list[Room]


def draw(
    buildings: list[Building], town: str, chars: list[str]
) -> tuple[list[str], dict[str, str], list[tuple[str, tuple[int, int]]]]:
    """Lay buildings out on a grid, a legend character of `chars` per room, in order:
    (rows, legend, objects as (name, (column, row)))."""
    rooms = [room for b in buildings for room in b.rooms]
    for room, ch in zip(rooms, chars, strict=True):
        room.char = ch
    total = sum(room.width + 1 for room in rooms) * (ROW_HEIGHT + 1)
    width = max(24, int((total * 1.6) ** 0.5))  # a little wider than tall
    x, y = 1, 1
    for b in buildings:  # a building's rooms stay side by side
        if x + sum(room.width + 1 for room in b.rooms) > width and x > 1:
            x, y = 1, y + ROW_HEIGHT + 1
        for room in b.rooms:
            room.x, room.y = x, y + 1
            x += room.width + 1
    height = y + ROW_HEIGHT + 3
    width = max(width, max(r.x + r.width + 1 for r in rooms) + 1)
    cells = [[WALL] * width for _ in range(height)]
    for r in range(1, height - 1):  # streets everywhere inside the border
        for c in range(1, width - 1):
            cells[r][c] = STREET
    objects: list[tuple[str, tuple[int, int]]] = []
    for room in rooms:
        _draw_room(cells, room)
        objects.extend(room.placed)
    legend = {WALL: "wall", STREET: f"{town} / street"}
    legend.update({room.char: room.area for room in rooms})
    return ["".join(row) for row in cells], legend, objects


def _draw_room(cells: list[list[str]], room: Room) -> None:
    """Walls around, the room's character inside and in a door in the top wall; objects
    on inside tiles away from the door, in reading order."""
    x0, y0, w, h = room.x, room.y, room.width, ROW_HEIGHT
    for r in range(y0, y0 + h):
        for c in range(x0, x0 + w):
            edge = r in (y0, y0 + h - 1) or c in (x0, x0 + w - 1)
            cells[r][c] = WALL if edge else room.char
    door = x0 + w // 2
    cells[y0][door] = room.char
    inside = [(c, r) for r in range(y0 + 2, y0 + h - 1) for c in range(x0 + 1, x0 + w - 1)]
    spots = inside[::2] if len(inside) >= 2 * len(room.objects) else inside
    room.placed = [(name, spot) for name, spot in zip(room.objects, spots)]
