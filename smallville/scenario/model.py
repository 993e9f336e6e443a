"""The typed, immutable form of a scenario and its agents, as read from their files."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from smallville.scenario.memorymodel import MemoryModel

WALL = "wall"
AREA_SEPARATOR = " / "
AGENT_ID = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")
MEMORY_INDEXES = ("exact", "hnsw")
"""What `memory.index` may name: `smallville.memory.INDEXES`, repeated here so that reading a
scenario needs no numpy or FAISS (a test keeps the two the same)."""


def normalise_area(path: str) -> str:
    """An area path with each "/"-separated part stripped: "Hobbs Cafe/ cafe" -> "Hobbs Cafe / cafe"."""
    return AREA_SEPARATOR.join(part.strip() for part in path.split("/"))


def area_prefixes(path: str) -> tuple[str, ...]:
    """Every leading part of an area path, shortest first: ("Hobbs Cafe", "Hobbs Cafe / cafe")."""
    parts = normalise_area(path).split(AREA_SEPARATOR)
    return tuple(AREA_SEPARATOR.join(parts[:count]) for count in range(1, len(parts) + 1))


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a scenario or agent file, with its place (1-based line and column;
    0 and 0 when it is about the file as a whole, e.g. a file that cannot be read)."""

    file: str
    line: int
    column: int
    message: str
    key: str = ""

    def __str__(self) -> str:
        where = f" (at {self.key})" if self.key else ""
        place = f":{self.line}:{self.column}" if self.line else ""
        return f"{self.file}{place}: {self.message}{where}"


@dataclass(frozen=True)
class SeedMemory:
    """A memory an agent starts with; `at` is simulated seconds since the start (None = the start)."""

    text: str
    importance: int | None = None
    at: float | None = None


@dataclass(frozen=True)
class RoutineItem:
    """One step of an agent's typical day; `at` is minutes since midnight."""

    at: int
    do: str
    where: str | None = None


@dataclass(frozen=True)
class AgentSpec:
    """A person as described by their agent file, with the scenario's overrides applied."""

    id: str
    name: str
    age: int | None
    traits: str
    backstory: str
    currently: str
    lifestyle: str
    home: str
    start_at: str
    routine: tuple[RoutineItem, ...]
    relationships: dict[str, str]
    memories: tuple[SeedMemory, ...]
    source: str
    places: tuple[str, ...] = ()  # the places known at the start; () : home, start and routine's
    type: str = ""  # its type in the scenario's `agent_types` ("": none)


@dataclass(frozen=True)
class MapObject:
    """A thing agents use, standing on one tile; `at` is (column, row), 0-based."""

    name: str
    at: tuple[int, int]
    state: str = "idle"


@dataclass(frozen=True)
class MapSpec:
    """The town's tiles: a legend from characters to areas (or walls) and a grid of them."""

    tile_time: float
    vision: int
    legend: dict[str, str]
    grid: tuple[str, ...]
    objects: tuple[MapObject, ...] = ()

    @property
    def width(self) -> int:
        """Columns in the grid."""
        return len(self.grid[0]) if self.grid else 0

    @property
    def height(self) -> int:
        """Rows in the grid."""
        return len(self.grid)

    def area_at(self, at: tuple[int, int]) -> str:
        """The legend value of the tile at (column, row): an area path or "wall"."""
        column, row = at
        return self.legend[self.grid[row][column]]

    def areas(self) -> tuple[str, ...]:
        """Every area path on the map and each of its prefixes (sectors), sorted."""
        paths = {prefix for value in self.legend.values() if value != WALL for prefix in area_prefixes(value)}
        return tuple(sorted(paths))


@dataclass(frozen=True)
class WorldEvent:
    """Something that happens at a set time: in an area (`where`) or as a thought of one `agent`."""

    at: float
    what: str
    where: str | None = None
    agent: str | None = None


@dataclass(frozen=True)
class Probe:
    """A fact whose spread is measured: an agent knows it when a memory holds every `match` word."""

    name: str
    question: str
    match: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """A whole scenario file with its agents loaded; times are seconds, `start` is a date-time."""

    path: str
    name: str
    description: str
    start: datetime
    duration: float
    tick: float
    seed: int
    map: MapSpec
    agents: tuple[AgentSpec, ...]
    memories: dict[str, tuple[SeedMemory, ...]] = field(default_factory=dict)
    events: tuple[WorldEvent, ...] = ()
    probes: tuple[Probe, ...] = ()
    sha256: str = ""
    brain: dict = field(default_factory=dict)
    memory_index: str = "exact"
    memory_weights: tuple[float, float, float] | None = None  # `memory.weights`; None: the paper's
    memory_model: MemoryModel = field(default_factory=MemoryModel)
    agent_types: tuple[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]], ...] = ()  # type -> keyword table

    def keyword_table(self, agent_type: str):
        """The keyword table (`tagger: keywords`) of the agent type `agent_type`; None if it has none."""
        return dict(self.agent_types).get(agent_type)

    def areas(self) -> tuple[str, ...]:
        """Every area path on the map and each of its sectors, sorted."""
        return self.map.areas()

    def area_exists(self, path: str) -> bool:
        """Whether `path` (normalised) is an area path or a sector on the map."""
        return normalise_area(path) in self.areas()

    def is_area_prefix(self, path: str) -> bool:
        """Whether `path` is a leading part of some area path (whole parts only)."""
        wanted = normalise_area(path)
        return any(wanted in area_prefixes(area) for area in self.areas())

    def agent(self, agent_id: str) -> AgentSpec:
        """The agent with this id; KeyError if the scenario has none."""
        for agent in self.agents:
            if agent.id == agent_id:
                return agent
        raise KeyError(agent_id)
