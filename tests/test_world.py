"""The grid, shortest paths and perception."""

from smallville.world import Grid, World
from smallville.world.grid import in_area, normalize_area

LEGEND = {"#": "wall", ".": "Town / street", "c": "Cafe / cafe", "k": "Cafe / kitchen", "p": "Park"}
ROWS = (
    "##########",
    "#cccc#...#",
    "#cccck...#",
    "#cccc#.pp#",
    "##########",
)


def make_world(vision=2):
    grid = Grid(ROWS, LEGEND)
    return World(grid, [("coffee machine", (1, 1), "idle"), ("bench", (8, 3), "free")], vision, 10.0)


def test_areas_and_walls():
    grid = Grid(ROWS, LEGEND)
    assert grid.area_at((0, 0)) is None and not grid.walkable((0, 0))
    assert grid.area_at((2, 2)) == "Cafe / cafe"
    assert grid.area_at((8, 3)) == "Park"
    assert "Cafe" in grid.areas() and "Cafe / kitchen" in grid.areas()
    assert set(grid.tiles_in("Cafe")) == set(grid.tiles_in("Cafe / cafe")) | {(5, 2)}
    assert normalize_area(" Cafe/cafe ") == "Cafe / cafe"
    assert in_area("Cafe / cafe", "Cafe") and not in_area("Cafeteria", "Cafe")


def test_shortest_path_goes_through_the_door():
    grid = Grid(ROWS, LEGEND)
    path = grid.path((1, 1), (8, 1))
    assert path[0] == (1, 1) and path[-1] == (8, 1)
    assert (5, 2) in path                      # the only way out of the cafe
    assert len(path) - 1 == grid.distance((1, 1), (8, 1)) == 9
    assert all(abs(a[0] - b[0]) + abs(a[1] - b[1]) == 1 for a, b in zip(path, path[1:]))
    assert all(grid.walkable(t) for t in path)


def test_path_to_a_wall_or_itself():
    grid = Grid(ROWS, LEGEND)
    assert grid.path((1, 1), (0, 0)) is None
    assert grid.path((1, 1), (1, 1)) == [(1, 1)]


def test_perception_needs_vision_and_the_same_arena():
    world = make_world(vision=2)
    world.place("ann", (1, 1))
    world.place("bob", (3, 3))      # 2 tiles away, same arena
    world.place("cat", (4, 1))      # 3 tiles away
    world.place("dan", (6, 1))      # street, behind the wall
    assert world.agents_near("ann") == ["bob"]
    assert world.agents_near("bob") == ["ann", "cat"]
    assert world.agents_near("dan") == []
    assert [t.name for t in world.objects_near("ann")] == ["coffee machine"]
    assert world.objects_near("dan") == []


def test_moving_updates_the_spatial_index():
    world = make_world(vision=2)
    world.place("ann", (1, 1))
    world.place("bob", (8, 1))
    assert world.agents_near("ann") == []
    world.place("bob", (2, 2))
    assert world.agents_near("ann") == ["bob"]
    assert world.agents_in("Cafe") == ["ann", "bob"]
    assert world.area_of("bob") == "Cafe / cafe"
