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
    assert (5, 2) in path  # the only way out of the cafe
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
    world.place("bob", (3, 3))  # 2 tiles away, same arena
    world.place("cat", (4, 1))  # 3 tiles away
    world.place("dan", (6, 1))  # street, behind the wall
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


def test_a_copy_of_the_world_moves_and_uses_things_on_its_own():
    world = make_world(vision=2)
    world.place("ann", (1, 1))
    world.place("bob", (8, 1))
    copy = world.copy()
    assert copy.grid is world.grid and copy.agents_near("ann") == []
    copy.place("bob", (2, 2))
    machine = copy.find_object("Cafe / cafe", "coffee machine")
    machine.state, machine.user = "brewing", "bob"
    assert copy.agents_near("ann") == ["bob"] and world.agents_near("ann") == []
    assert world.position("bob") == (8, 1)
    assert (world.find_object("Cafe / cafe", "coffee machine").state, world.things[0].user) == ("idle", None)
    assert [t.name for t in copy.objects_near("bob")] == ["coffee machine"]


def _reference_path(grid, start, goal):
    """The path as the engine drew it before A*: a full breadth-first distance field to the
    goal, then from each tile the first neighbour (up, left, right, down) nearest the goal."""
    from collections import deque

    steps = ((0, -1), (-1, 0), (1, 0), (0, 1))
    dist, queue = {goal: 0}, deque([goal])
    while queue:
        c, r = queue.popleft()
        for dc, dr in steps:
            nxt = (c + dc, r + dr)
            if grid.walkable(nxt) and nxt not in dist:
                dist[nxt] = dist[(c, r)] + 1
                queue.append(nxt)
    if start not in dist:
        return None
    path = [start]
    while path[-1] != goal:
        c, r = path[-1]
        path.append(min(((c + dc, r + dr) for dc, dr in steps if (c + dc, r + dr) in dist), key=lambda t: dist[t]))
    return path


def test_paths_in_a_generated_town_are_the_reference_shortest_paths():
    import random

    from smallville.town import generate_town

    text = generate_town(60, seed=2).scenario
    import yaml

    spec = yaml.safe_load(text)["map"]
    grid = Grid(spec["grid"].splitlines(), spec["legend"])
    tiles = sorted(grid._area)
    rng = random.Random(0)
    for _ in range(40):
        a, b = rng.choice(tiles), rng.choice(tiles)
        assert grid.path(a, b) == _reference_path(grid, a, b)
        assert grid.distance(a, b) == len(grid.path(a, b)) - 1
    assert grid.path(tiles[0], tiles[0]) == [tiles[0]]


def test_unreachable_and_prefix_tiles():
    rows = ("#####", "#a#b#", "#####")
    grid = Grid(rows, {"#": "wall", "a": "Left / room", "b": "Right / room"})
    assert grid.path((1, 1), (3, 1)) is None and grid.distance((1, 1), (3, 1)) is None
    nested = Grid(("abc",), {"a": "Town / Hall / east", "b": "Town / Hall / west", "c": "Town / street"})
    assert nested.tiles_in("Town / Hall") == [(0, 0), (1, 0)]
    assert nested.tiles_in("Town / Hall") is nested.tiles_in("Town/Hall")  # computed once
    assert nested.tiles_in("Nowhere") == []


def test_ville_paths_unchanged():
    import random

    from smallville.scenario import load_scenario

    from conftest import THE_VILLE

    spec = load_scenario(THE_VILLE).map
    grid = Grid(spec.grid, spec.legend)
    tiles = sorted(grid._area)
    rng = random.Random(1)
    for _ in range(25):
        a, b = rng.choice(tiles), rng.choice(tiles)
        assert grid.path(a, b) == _reference_path(grid, a, b)


def test_a_memory_tells_of_every_place_it_names_as_a_plain_search_finds_them():
    """Places are found in a text in one pass; the answer is what testing each name finds,
    for names that overlap, nest, differ in case or are shorter than the filing key."""
    from smallville.world.mentions import Mentions

    names = [
        "Hobbs Cafe",
        "Cafe",
        "Oak Hill College",
        "Oak",
        "Ox",
        "The Rose and Crown Pub",
        "Pub",
        "Harvey Oak Supply",
    ]
    texts = [
        "isabella is at hobbs cafe",
        "the ox and the oak hill college",
        "nothing here",
        "ox",
        "the rose and crown pub, harvey oak supply store and a pub",
        "cafeteria",
        "",
        "oa",
    ]
    mentions = Mentions(names)
    for text in texts:
        assert mentions.found_in(text) == {n for n in names if n.lower() in text}
    assert mentions.found_in("harvey oak supply") == {"Harvey Oak Supply", "Oak"}
