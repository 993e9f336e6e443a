"""Build a town of n agents for a seed, as the text of a scenario file and its agent files."""

from __future__ import annotations

import random
from dataclasses import dataclass
from itertools import islice
from json.encoder import encode_basestring
from pathlib import Path

from smallville.errors import TownExists, UsageError
from smallville.town.layout import Building, Room, draw
from smallville.town.legend import legend_chars
from smallville.town.names import agent_id, name_people
from smallville.town.nearby import Nearby, Place
from smallville.town.people import TRAITS, Person, hhmm, routine_for, tie

TOWNS = ("Millbrook", "Ashford", "Larkspur", "Fenwick", "Oakmere", "Brightwater", "Kestrel Hill", "Thornbury")
WORDS = (
    "Willow",
    "Bluebird",
    "Copper",
    "Lantern",
    "Juniper",
    "Harbour",
    "Maple",
    "Heron",
    "Thistle",
    "Amber",
    "Cedar",
    "Robin",
    "Linden",
    "Saffron",
    "Fern",
    "Hazel",
    "Marigold",
    "Otter",
    "Pebble",
    "Rowan",
    "Sparrow",
    "Tansy",
    "Violet",
    "Wren",
    "Birch",
    "Clover",
    "Elm",
    "Larch",
    "Poplar",
    "Aspen",
)
STREETS = ("Row", "Lane", "Close", "Terrace", "Road", "Walk", "Crescent", "Gardens")
SUBJECTS = ("history", "biology", "music", "economics", "chemistry", "literature", "engineering", "art")
RoomKind = tuple[str | None, int, list[str], int, str]  # arena (None: the building is one room), width,
#                                                           objects, staff, task
KINDS: dict[str, list[RoomKind]] = {
    "cafe": [
        ("cafe", 10, ["counter", "coffee machine", "window table", "corner table"], 2, "serve customers"),
        ("kitchen", 6, ["oven", "stove"], 1, "cook and bake"),
    ],
    "pub": [("pub", 10, ["bar", "piano", "dartboard", "long table"], 2, "pour drinks and serve")],
    "market": [
        ("store", 9, ["shelves", "till"], 2, "stock shelves and serve customers"),
        ("pharmacy", 6, ["counter"], 1, "serve customers at the pharmacy"),
    ],
    "park": [(None, 14, ["bench", "fountain", "rose garden", "picnic table"], 1, "look after the park")],
    "office": [
        ("office", 12, ["desk 1", "desk 2", "desk 3", "desk 4", "printer", "meeting table"], 6, "work at a desk")
    ],
    "workshop": [("workshop", 9, ["workbench", "lathe", "toolbox"], 5, "build and repair things")],
    "clinic": [("clinic", 8, ["reception desk", "examination table"], 4, "see patients")],
}
# Residents per public place of each kind, the same at every size, so a resident's day is
# as crowded in a town of 25 as in a town of 1,000 (a town of 25 has one of each, used by
# about 8 to 19 people); rooms at work and college hold a fixed number of people each.
PER_PLACE = {"cafe": 25, "pub": 25, "market": 25, "park": 25}
PER_CLASS = 10  # students per classroom at most, each with its own library
SLACK = 1.25  # jobs and college seats per worker and student, so the last
# ones to choose still find one near home
SUFFIX = {
    "cafe": "Cafe",
    "pub": "Arms",
    "market": "Market",
    "park": "Park",
    "office": "Offices",
    "workshop": "Workshop",
    "clinic": "Clinic",
}


@dataclass
class Town:
    """A generated town: the scenario file's text and each agent file's text, by id."""

    scenario: str
    agents: dict[str, str]


def generate_town(n: int, seed: int = 0) -> Town:
    """A town of `n` agents; the same (n, seed) gives the same text, byte for byte."""
    if n < 1:
        raise UsageError(f"a town needs at least one agent, got {n}")
    legend_chars(_fewest_rooms(n), n)  # a town too large for its map fails here, at once
    rng = random.Random(f"town:{n}:{seed}")
    town = TOWNS[seed % len(TOWNS)]
    names = name_people(n, rng)
    households: list[list[int]] = []
    for i, (_, last) in enumerate(names):
        if households and names[households[-1][0]][1] == last and len(households[-1]) < 4:
            households[-1].append(i)
        else:
            households.append([i])
    people: dict[str, Person] = {}
    homes: list[Building] = []
    for h, members in enumerate(households):
        home = _address(h)
        for i in members:
            first, last = names[i]
            age = rng.choice((rng.randint(18, 24), rng.randint(25, 66), rng.randint(25, 66), rng.randint(67, 88)))
            role = "student" if age <= 24 and rng.random() < 0.7 else ("retired" if age >= 67 else "worker")
            pid = agent_id(first, last)
            people[pid] = Person(pid, first, last, age, role, home)
        beds = [f"{names[i][0].title()}'s bed" for i in members]
        homes.append(Building(home, "home", [Room(home, 6, beds + ["stove", "kitchen table"])]))
    public, slots = _public_places(people)
    buildings = _interleave(homes, sorted(public, key=lambda b: rng.random()))
    chars = legend_chars(sum(len(b.rooms) for b in buildings), n)
    rows, legend, objects = draw(buildings, town, chars)
    _assign(people, buildings, slots)
    _add_ties(people, households, public, rng)
    places = _places(public)
    doors = {room.area: (room.x, room.y) for b in buildings for room in b.rooms}
    nearby: dict[str, Nearby[str]] = {
        kind: Nearby([Place(area, *doors[area], area) for area in areas]) for kind, areas in places.items()
    }
    load = {area: 0 for areas in places.values() for area in areas}
    for p in people.values():
        p.routine = routine_for(p, rng, _nearest(nearby, doors[p.home], load))
        p.memories = _memories(p, people, rng)
    scenario = _scenario_text(town, n, seed, rows, legend, objects, people, places, rng)
    return Town(scenario, {pid: _agent_text(p, people, rng) for pid, p in sorted(people.items())})


def _address(h: int) -> str:
    """The address of the `h`th home: 20 houses on each of 240 streets, then the streets grow
    longer (house 21, 22, ...), so addresses stay distinct and readable at any size."""
    street = f"{WORDS[(h // 20) % len(WORDS)]} {STREETS[(h // 20 // len(WORDS)) % len(STREETS)]}"
    return f"{h % 20 + 1 + 20 * (h // (20 * len(WORDS) * len(STREETS)))} {street}"


def _fewest_rooms(n: int) -> int:
    """Fewer rooms than any town of `n` residents has: a home for every four, and its public places."""
    return -(-n // 4) + sum(len(KINDS[kind]) * max(1, round(n / per)) for kind, per in PER_PLACE.items())


def _public_places(people: dict[str, Person]) -> tuple[list[Building], list[tuple[Building, Room, str]]]:
    """Workplaces and public places enough for the town, and the jobs in them (at least one
    per worker): (buildings, slots as (building, room, task)). The college is one building
    per classroom, each with its library, spread over the town like the other places, so
    students study near home whatever the size of the town."""
    n = len(people)
    counts = {kind: max(1, round(n / per)) for kind, per in PER_PLACE.items()}
    buildings = [_building(kind, i) for kind, c in counts.items() for i in range(c)]
    students = sum(p.role == "student" for p in people.values())
    classes = max(1, -int(-students * SLACK // PER_CLASS))
    campus = [
        Building(
            "Oak Hill College",
            "college",
            [
                Room(
                    f"Oak Hill College / classroom {i + 1}", 12, ["blackboard", "lectern", "front desks", "back desks"]
                ),
                Room(f"Oak Hill College / library {i + 1}", 10, ["bookshelves", "reading table", "computer"]),
            ],
        )
        for i in range(classes)
    ]
    campus[0].rooms.insert(0, Room("Oak Hill College / hallway", 8, ["notice board"]))
    slots = [
        (b, room, task)
        for b in buildings
        for room, (_, _, _, staff, task) in zip(b.rooms, KINDS[b.kind])
        for _ in range(staff)
    ]
    slots += [(b, b.rooms[-2], "teach classes") for b in campus]
    buildings += campus
    workers = sum(p.role == "worker" for p in people.values())
    extra = ("office", "workshop", "clinic")
    k = 0
    while len(slots) < workers * SLACK:
        kind = extra[k % 3]
        b = _building(kind, k // 3)
        buildings.append(b)
        slots += [(b, b.rooms[0], KINDS[kind][0][4])] * KINDS[kind][0][3]
        k += 1
    return buildings, slots


def _assign(people: dict[str, Person], buildings: list[Building], slots: list[tuple[Building, Room, str]]) -> None:
    """Give every worker a job and every student a classroom and library near home: in the
    order their homes are drawn, each takes the nearest job still open (as the crow flies
    from door to door, ties by drawing order), so each workplace room keeps its fixed number
    of staff and nobody crosses the whole town to get to work, however large the town."""
    door = {room.area: (room.x, room.y) for b in buildings for room in b.rooms}
    order = {room.area: i for i, room in enumerate(room for b in buildings for room in b.rooms)}

    def by_home(role: str) -> list[str]:
        return sorted((p.id for p in people.values() if p.role == role), key=lambda pid: (order[people[pid].home], pid))

    jobs = _openings(slots, order)
    for pid in by_home("worker"):
        b, room, task = jobs.take(*door[people[pid].home])
        people[pid].job, people[pid].workplace, people[pid].job_title = room.area, b.sector, task
    seats = _openings([(b, b.rooms[-2], "") for b in buildings if b.kind == "college" for _ in range(PER_CLASS)], order)
    for pid in by_home("student"):
        b, room, _ = seats.take(*door[people[pid].home])
        people[pid].job, people[pid].workplace, people[pid].study = room.area, b.sector, b.rooms[-1].area


def _openings(slots: list[tuple[Building, Room, str]], order: dict[str, int]) -> Nearby[tuple[Building, Room, str]]:
    """Slots (building, room, task) as places to take, each room as often as it has slots, ranked by drawing order."""
    first: dict[str, tuple[Building, Room, str]] = {}
    uses: dict[int, int] = {}
    for slot in slots:
        first.setdefault(slot[1].area, slot)
        uses[order[slot[1].area]] = uses.get(order[slot[1].area], 0) + 1
    return Nearby([Place(order[area], slot[1].x, slot[1].y, slot) for area, slot in first.items()], uses)


def _building(kind: str, i: int) -> Building:
    word = WORDS[i % len(WORDS)] + (f" {i // len(WORDS) + 1}" if i >= len(WORDS) else "")
    sector = f"The {word} {SUFFIX[kind]}" if kind == "pub" else f"{word} {SUFFIX[kind]}"
    rooms = [
        Room(sector if arena is None else f"{sector} / {arena}", width, list(objects))
        for arena, width, objects, _, _ in KINDS[kind]
    ]
    return Building(sector, kind, rooms)


def _interleave(homes: list[Building], public: list[Building]) -> list[Building]:
    """Public buildings spread evenly among the homes, so every quarter has some."""
    out: list[Building] = []
    step = max(1, len(homes) // max(1, len(public)))
    queue = iter(public)
    for i, home in enumerate(homes):
        if i % step == 0:
            out.extend(islice(queue, 1))
        out.append(home)
    return out + list(queue)


def _places(public: list[Building]) -> dict[str, list[str]]:
    kinds = {"cafe": "cafe", "pub": "pub", "market": "shop", "park": "park"}
    places: dict[str, list[str]] = {v: [] for v in kinds.values()}
    for b in public:
        if b.kind in kinds:
            places[kinds[b.kind]].append(b.rooms[0].area)
    return places


def _nearest(
    places: dict[str, Nearby[str]], home: tuple[int, int], load: dict[str, int], keep: int = 3
) -> dict[str, list[str]]:
    """For each kind of place, the one a resident uses: of the `keep` nearest to their home
    (as the crow flies, ties by name), the one fewest residents use so far, so no place
    draws a crowd because it happens to sit among many homes. Counts the choice in `load`."""
    out = {}
    for kind, index in places.items():
        near = index.nearest(*home, keep)
        pick = min(near, key=lambda area: (load[area], near.index(area)))
        load[pick] += 1
        out[kind] = [pick]
    return out


def _add_ties(
    people: dict[str, Person], households: list[list[int]], public: list[Building], rng: random.Random
) -> None:
    ids = list(people)  # in household order
    by_home: dict[str, list[str]] = {}
    for pid in ids:
        by_home.setdefault(people[pid].home, []).append(pid)
    homes = list(by_home.values())
    for members in homes:
        for a in members:
            for b in members:
                if a < b:
                    tie(people, a, b, "family; they share a home", "family; they share a home")
    for left, right in zip(homes, homes[1:]):
        a, b = rng.choice(left), rng.choice(right)
        tie(people, a, b, f"a neighbour at {people[b].home}", f"a neighbour at {people[a].home}")
    by_work: dict[str, list[str]] = {}
    for pid in ids:
        if people[pid].workplace:
            by_work.setdefault(people[pid].workplace, []).append(pid)
    for place, staff in sorted(by_work.items()):
        for a, b in zip(staff, staff[1:]):
            what = "a classmate" if people[a].role == people[b].role == "student" else "a coworker"
            tie(people, a, b, f"{what} at {place}", f"{what} at {place}")
    for a in ids:
        if rng.random() < 0.6:
            b = rng.choice(ids)
            tie(people, a, b, "an old friend", "an old friend")


def _memories(p: Person, people: dict[str, Person], rng: random.Random) -> list[str]:
    first = p.first.title()
    if p.role == "worker":
        out = [f"{first} has worked at {p.workplace} for {rng.randint(1, 20)} years."]
    elif p.role == "student":
        out = [f"{first} is studying {rng.choice(SUBJECTS)} at Oak Hill College."]
    else:
        out = [f"{first} retired last year and enjoys having time for long walks."]
    friends = sorted(o for o, view in p.ties.items() if view == "an old friend")
    if friends:
        out.append(f"{first} promised to catch up with {people[friends[0]].name} soon.")
    neighbours = sorted(o for o, view in p.ties.items() if view.startswith("a neighbour"))
    if neighbours and rng.random() < 0.5:
        out.append(f"{first} lent {people[neighbours[0]].name} a ladder last week.")
    return out


def _q(text: str) -> str:
    """A YAML scalar: JSON strings are YAML double-quoted scalars (json.dumps(text, ensure_ascii=False), faster)."""
    return encode_basestring(text)


def _scenario_text(
    town: str,
    n: int,
    seed: int,
    rows: list[str],
    legend: dict[str, str],
    objects: list[tuple[str, tuple[int, int]]],
    people: dict[str, Person],
    places: dict[str, list[str]],
    rng: random.Random,
) -> str:
    ids = sorted(people)
    cafe_staff = [pid for pid in ids if people[pid].workplace.endswith("Cafe")]
    host = people[cafe_staff[0] if cafe_staff else ids[0]]
    others = [pid for pid in ids if pid != host.id] or ids
    candidate = people[rng.choice(others)]
    park = places["park"][0]
    about = (
        f"A generated town of {n} residents: homes, workplaces, cafes, parks, shops, a pub and a college. "
        f"{host.name} is organising a spring fair and {candidate.name} is running for mayor; at the start "
        "each is the only one who knows."
    )
    out = [
        f"# A town of {n} residents, generated by `smallville town generate --agents {n} --seed {seed}`.",
        f"name: {_q(f'{town} ({n} residents)')}",
        f"description: {_q(about)}",
        "start: 2023-02-13 07:00",
        "duration: 1d",
        "tick: 1m",
        f"seed: {seed}",
        "",
        "map:",
        "  tile_time: 10s",
        "  vision: 4",
        "  legend:",
    ]
    out += [f"    {_q(ch)}: {_q(area)}" for ch, area in legend.items()]
    out += ["  grid: |"] + [f"    {row}" for row in rows]
    out += ["  objects:"] + [f"    - {{name: {_q(name)}, at: [{c}, {r}], state: idle}}" for name, (c, r) in objects]
    out += ["", "agents:"] + [f"  - {pid}" for pid in ids]
    news = {
        host.id: [
            f"{host.name} is organising a spring fair at {park} on February 14th from 4pm to 6pm, "
            "and wants the whole town to come."
        ]
    }
    news.setdefault(candidate.id, []).append(
        f"{candidate.name} is running for mayor in the local election and hopes to win the support of the neighbours."
    )
    out += ["", "memories:"]
    for pid, texts in news.items():
        out += [f"  {pid}:"] + [line for text in texts for line in (f"    - text: {_q(text)}", "      importance: 8")]
    helpers = f"{host.first.title()} thinks the spring fair needs more helpers and means to ask around today."
    out += [
        "",
        "events:",
        "  - at: 2023-02-13 09:00",
        f"    agent: {host.id}",
        f"    what: {_q(helpers)}",
        "  - at: 2023-02-13 12:00",
        f"    where: {_q(park)}",
        f"    what: {_q(f'A brass band starts playing in {park}.')}",
        "",
        "probes:",
        "  fair:",
        "    question: Do you know about a spring fair?",
        "    match: [spring, fair]",
        "  election:",
        "    question: Do you know who is running for mayor?",
        "    match: [mayor, election]",
        "",
    ]
    return "\n".join(out)


def _agent_text(p: Person, people: dict[str, Person], rng: random.Random) -> str:
    first = p.first.title()
    traits = ", ".join(rng.sample(TRAITS, 3))
    work = {
        "worker": f"works at {p.workplace}, where they {p.task()}",
        "student": "studies at Oak Hill College",
        "retired": "is retired",
    }[p.role]
    out = [
        f"name: {_q(p.name)}",
        f"age: {p.age}",
        f"traits: {_q(traits)}",
        f"backstory: {_q(f'{first} lives at {p.home} and {work}.')}",
        f"currently: {_q('getting through a busy week')}",
        f"lifestyle: {_q(f'wakes around {hhmm(p.routine[0][0])}, goes to bed around {hhmm(p.routine[-1][0])}')}",
        f"home: {_q(p.home)}",
        "routine:",
    ]
    out += [f"  - {{at: {_q(hhmm(at))}, do: {_q(do)}, where: {_q(where)}}}" for at, do, where in p.routine]
    if p.ties:
        out += ["relationships:"] + [f"  {o}: {_q(view)}" for o, view in sorted(p.ties.items())]
    out += ["memories:"] + [f"  - {_q(m)}" for m in p.memories]
    return "\n".join(out) + "\n"


def write_town(town: Town, out: str | Path, force: bool = False) -> list[Path]:
    """Write the scenario to `out` and each agent to `agents/ID.yaml` beside it; refuses to
    overwrite any existing file unless `force`. Returns the paths written."""
    out = Path(out)
    folder = out.parent / "agents"
    targets = [out] + [folder / f"{pid}.yaml" for pid in town.agents]
    existing = [t for t in targets if t.exists()]
    if existing and not force:
        more = f" (and {len(existing) - 1} more files)" if len(existing) > 1 else ""
        raise TownExists(f"{existing[0]}{more} already exists; use --force to overwrite")
    folder.mkdir(parents=True, exist_ok=True)
    for pid, text in town.agents.items():
        (folder / f"{pid}.yaml").write_text(text, encoding="utf-8")
    out.write_text(town.scenario, encoding="utf-8")
    return targets
