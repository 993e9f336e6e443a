"""Reading and checking a scenario's `map:` (legend, grid, objects) and area paths against it."""

from __future__ import annotations

import difflib
from bisect import bisect_left

from yaml.constructor import SafeConstructor
from yaml.nodes import Node, ScalarNode, SequenceNode

from smallville.scenario.model import WALL, MapObject, MapSpec, normalise_area
from smallville.scenario.yamlpos import INT_TAG, Reader, child, describe, is_null, leaf

MAP_KEYS = ("tile_time", "vision", "legend", "grid", "objects")
MAP_REQUIRED = ("legend", "grid")
OBJECT_KEYS = ("name", "at", "state")


def read_map(reader: Reader, node: Node, key: str = "map") -> MapSpec | None:
    """The map, or None when its legend is unusable (so area paths cannot be checked)."""
    fields = reader.mapping(node, key, MAP_KEYS, MAP_REQUIRED)
    if fields is None:
        return None
    tile_time = reader.duration(fields.get("tile_time"), child(key, "tile_time"), default=10.0)
    vision = reader.integer(fields.get("vision"), child(key, "vision"), low=1, default=4)
    legend, legend_ok = _read_legend(reader, fields.get("legend"), child(key, "legend"))
    grid = _read_grid(reader, fields.get("grid"), child(key, "grid"), legend, legend_ok)
    objects = _read_objects(reader, fields.get("objects"), child(key, "objects"), legend or {}, grid)
    if legend is None or not legend_ok:
        return None
    return MapSpec(tile_time or 10.0, vision or 4, legend, grid, objects)


def check_area(
    reader: Reader, node: Node | None, key: str, areas: tuple[str, ...] | None, kind: str = "an area"
) -> str | None:
    """A normalised area path, checked for empty parts and (when `areas` is known) against the map.

    `areas` holds every area path and each of its prefixes, sorted (`MapSpec.areas`), so a sector passes too.
    """
    path = reader.text(node, key)
    if path is None:
        return None
    if any(not part.strip() for part in path.split("/")):
        reader.report(node, f"{leaf(key)} area path {path!r} has an empty part", key)
        return None
    path = normalise_area(path)
    if areas is not None and not _listed(path, areas):
        close = difflib.get_close_matches(path, areas, n=3, cutoff=0.6)
        hint = f" (close: {', '.join(repr(area) for area in close)})" if close else ""
        reader.report(node, f"{leaf(key)} {path!r} is not {kind} on the map{hint}", key)
        return None
    return path


def _listed(path: str, areas: tuple[str, ...]) -> bool:
    """Whether `path` is one of the sorted `areas`: a binary search, as a generated town of
    thousands checks tens of thousands of places against tens of thousands of areas."""
    i = bisect_left(areas, path)
    return i < len(areas) and areas[i] == path


def _read_legend(reader: Reader, node: Node | None, key: str) -> tuple[dict[str, str] | None, bool]:
    """The legend (character -> "wall" or an area path) and whether it had no problems.

    None when there is no usable legend; a one-character key with a bad value maps to "", so
    the grid's characters can still be checked.
    """
    pairs = None if node is None else reader.pairs(node, key)
    if pairs is None:
        return None, False
    legend: dict[str, str] = {}
    for name, key_node, value_node in pairs:
        path = child(key, name)
        if len(name) != 1:
            reader.report(key_node, f"legend key {name!r} must be exactly one character", path)
        else:
            legend[name] = _legend_value(reader, name, value_node, path)
    return legend, len(legend) == len(pairs) and all(legend.values())


def _legend_value(reader: Reader, name: str, node: Node, key: str) -> str:
    """One legend value: "wall", or an area path with no empty part ("" after reporting a problem)."""
    if is_null(node) or (isinstance(node, ScalarNode) and not node.value.strip()):
        reader.report(node, f"legend value for {name!r} is empty: expected 'wall' or an area path", key)
        return ""
    value = reader.text(node, key)
    if value is None or value == WALL:
        return value or ""
    if any(not part.strip() for part in value.split("/")):
        reader.report(node, f"legend value {value!r} for {name!r} has an empty part in its area path", key)
        return ""
    return normalise_area(value)


def _read_grid(
    reader: Reader, node: Node | None, key: str, legend: dict[str, str] | None, legend_ok: bool
) -> tuple[str, ...]:
    """The grid rows, checked for equal widths, known characters and at least one walkable tile."""
    if node is None:
        return ()
    if not isinstance(node, ScalarNode) or is_null(node):
        reader.report(node, f"grid must be rows of text (write `grid: |` then the rows), got {describe(node)}", key)
        return ()
    rows = node.value.split("\n")
    while rows and rows[-1] == "":
        rows.pop()
    if not rows:
        reader.report(node, "map.grid is empty", key)
        return ()
    exact = _row_places(reader, node, rows)
    places = exact or [(node.start_mark.line + 1, node.start_mark.column + 1)] * len(rows)
    width = len(rows[0])
    for number, row in enumerate(rows):
        if len(row) != width:
            line, column = places[number]
            reader.report_at(line, column, f"map.grid row {number} is {len(row)} wide, expected {width}", key)
    if legend is not None:
        _check_characters(reader, rows, places, exact is not None, key, legend, legend_ok)
    return tuple(rows)


def _check_characters(
    reader: Reader,
    rows: list[str],
    places: list[tuple[int, int]],
    exact: bool,
    key: str,
    legend: dict[str, str],
    legend_ok: bool,
) -> None:
    """Report each unknown character once (at its first place), or a grid with nowhere to walk."""
    first: dict[str, tuple[int, int]] = {}
    counts: dict[str, int] = {}
    for number, row in enumerate(rows):
        for column, char in enumerate(row):
            if char not in legend:
                first.setdefault(char, (number, column))
                counts[char] = counts.get(char, 0) + 1
    for char, (number, column) in first.items():
        line, start = places[number]
        more = f" (and {counts[char] - 1} more in the grid)" if counts[char] > 1 else ""
        message = f"unknown legend character {char!r} in map.grid row {number}{more}"
        reader.report_at(line, start + column if exact else start, message, key)
    if legend_ok and not first and all(legend[char] == WALL for row in rows for char in row):
        reader.report_at(*places[0], "map.grid has no walkable tile: every character is a wall", key)


def _row_places(reader: Reader, node: ScalarNode, rows: list[str]) -> list[tuple[int, int]] | None:
    """The 1-based (line, column) where each row starts in the file; None when it cannot be told.

    Only a literal block (`grid: |`) keeps rows on their own lines; its content starts on the
    line after the `|`, indented by whatever precedes the row's text on that line.
    """
    if node.style != "|":
        return None
    places = []
    for number, row in enumerate(rows):
        index = node.start_mark.line + 1 + number
        source = reader.lines[index] if index < len(reader.lines) else None
        if source is None or not source.endswith(row) or source[: len(source) - len(row)].strip(" "):
            return None
        places.append((index + 1, len(source) - len(row) + 1))
    return places


def _read_objects(
    reader: Reader, node: Node | None, key: str, legend: dict[str, str], grid: tuple[str, ...]
) -> tuple[MapObject, ...]:
    """The objects, each on a walkable tile inside the grid."""
    objects = []
    for number, item in enumerate(reader.sequence(node, key) or []):
        path = child(key, number)
        fields = reader.mapping(item, path, OBJECT_KEYS, ("name", "at"))
        if fields is None:
            continue
        name = reader.text(fields.get("name"), child(path, "name"))
        at = _read_at(reader, fields.get("at"), child(path, "at"))
        state = reader.text(fields.get("state"), child(path, "state"), required=False, default="idle") or "idle"
        if at is None or name is None:
            continue
        if _check_place(reader, fields["at"], child(path, "at"), name, at, legend, grid):
            objects.append(MapObject(name, at, state))
    return tuple(objects)


def _read_at(reader: Reader, node: Node | None, key: str) -> tuple[int, int] | None:
    """An object's `[column, row]`."""
    if node is None:
        return None
    items = node.value if isinstance(node, SequenceNode) else []
    if len(items) != 2 or not all(isinstance(item, ScalarNode) and item.tag == INT_TAG for item in items):
        reader.report(node, f"at must be a pair of integers [column, row], got {_flow(node)}", key)
        return None
    constructor = SafeConstructor()
    return constructor.construct_yaml_int(items[0]), constructor.construct_yaml_int(items[1])


def _check_place(
    reader: Reader, node: Node, key: str, name: str, at: tuple[int, int], legend: dict[str, str], grid: tuple[str, ...]
) -> bool:
    """Whether an object's tile is inside the grid and not a wall (reporting when not)."""
    if not grid:
        return True
    column, row = at
    width = len(grid[0])
    if not (0 <= row < len(grid) and 0 <= column < len(grid[row]) and column < width):
        reader.report(node, f"object {name!r} at [{column}, {row}] is outside the {width}x{len(grid)} grid", key)
        return False
    if legend.get(grid[row][column]) == WALL:
        reader.report(node, f"object {name!r} at [{column}, {row}] stands on a wall tile", key)
        return False
    return True


def _flow(node: Node) -> str:
    """A short rendering of a node's value for messages: [1, 2, 3] or 'text'."""
    if isinstance(node, SequenceNode):
        return "[" + ", ".join(item.value if isinstance(item, ScalarNode) else "..." for item in node.value) + "]"
    return describe(node)
