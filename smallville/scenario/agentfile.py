"""Reading and checking an agent file (and a scenario's overrides of it) into an `AgentSpec`."""

from __future__ import annotations

from datetime import datetime

from yaml.nodes import Node, ScalarNode

from smallville.scenario.mapfile import check_area
from smallville.scenario.model import AGENT_ID, AgentSpec, RoutineItem, SeedMemory
from smallville.scenario.yamlpos import Field, Reader, child, is_null

AGENT_KEYS = (
    "name",
    "age",
    "traits",
    "backstory",
    "currently",
    "lifestyle",
    "home",
    "start_at",
    "routine",
    "relationships",
    "memories",
    "places",
    "type",
)
AGENT_REQUIRED = ("name", "home")
ROUTINE_KEYS = ("at", "do", "where")
MEMORY_KEYS = ("text", "importance", "at")


def agent_fields(reader: Reader, top: Node, key: str = "") -> dict[str, Field] | None:
    """The keys of an agent mapping (unknown keys reported), each with where it came from."""
    values = reader.mapping(top, key, AGENT_KEYS)
    if values is None:
        return None
    return {name: Field(reader, node, child(key, name)) for name, node in values.items()}


def build_agent(
    agent_id: str,
    fields: dict[str, Field],
    source: Reader,
    top: Node,
    areas: tuple[str, ...] | None,
    start: datetime | None,
) -> AgentSpec | None:
    """An AgentSpec from merged fields; None (with problems reported) when anything is wrong.

    `source` and `top` are the agent file and its mapping, where a missing key is reported;
    `areas` is None when there is no map to check places against.
    """
    before = len(source.problems)
    for name in AGENT_REQUIRED:
        if name not in fields:
            source.report(top, f"missing required key {name!r}", name)
    home = _area(fields.get("home"), areas)
    start_at = _area(fields.get("start_at"), areas) or home
    agent = AgentSpec(
        id=agent_id,
        name=_text(fields.get("name"), required=True),
        age=_age(fields.get("age")),
        traits=_text(fields.get("traits")),
        backstory=_text(fields.get("backstory")),
        currently=_text(fields.get("currently")),
        lifestyle=_text(fields.get("lifestyle")),
        home=home,
        start_at=start_at,
        routine=_routine(fields.get("routine"), areas),
        relationships=_relationships(fields.get("relationships")),
        memories=_memories(fields.get("memories"), start),
        source=source.file,
        places=_places(fields.get("places"), areas),
        type=_text(fields.get("type")),
    )
    return agent if len(source.problems) == before else None


def read_memories(reader: Reader, node: Node | None, key: str, start: datetime | None) -> tuple[SeedMemory, ...]:
    """Seed memories: each a sentence, or {text, importance 1..10, at date-time}.

    `at` becomes seconds since `start`; with no start (an agent file read alone) it stays None.
    """
    memories = []
    for number, item in enumerate(reader.sequence(node, key) or []):
        path = child(key, number)
        if isinstance(item, ScalarNode):
            text = reader.text(item, path)
            if text is not None:
                memories.append(SeedMemory(text))
            continue
        fields = reader.mapping(item, path, MEMORY_KEYS, ("text",))
        if fields is None:
            continue
        text = reader.text(fields.get("text"), child(path, "text"))
        importance = reader.integer(fields.get("importance"), child(path, "importance"), low=1, high=10)
        when = reader.datetime(fields.get("at"), child(path, "at"))
        at = (when - start).total_seconds() if when is not None and start is not None else None
        if text is not None:
            memories.append(SeedMemory(text, importance, at))
    return tuple(memories)


def _text(field: Field | None, required: bool = False) -> str:
    """Free text of a field, "" when absent."""
    if field is None:
        return ""
    return field.reader.text(field.node, field.key, required=required) or ""


def _area(field: Field | None, areas: tuple[str, ...] | None) -> str:
    """A checked area path of a field, "" when absent or wrong."""
    if field is None:
        return ""
    return check_area(field.reader, field.node, field.key, areas) or ""


def _age(field: Field | None) -> int | None:
    """The age, a non-negative integer."""
    if field is None or is_null(field.node):
        return None
    return field.reader.integer(field.node, field.key, low=0)


def _routine(field: Field | None, areas: tuple[str, ...] | None) -> tuple[RoutineItem, ...]:
    """The routine, sorted by clock time (stable for equal times)."""
    if field is None:
        return ()
    reader = field.reader
    items = []
    for number, item in enumerate(reader.sequence(field.node, field.key) or []):
        path = child(field.key, number)
        fields = reader.mapping(item, path, ROUTINE_KEYS, ("at", "do"))
        if fields is None:
            continue
        at = reader.clock(fields.get("at"), child(path, "at"))
        do = reader.text(fields.get("do"), child(path, "do"))
        where_node = fields.get("where")
        where = None if is_null(where_node) else check_area(reader, where_node, child(path, "where"), areas)
        if at is not None and do is not None:
            items.append(RoutineItem(at, do, where))
    return tuple(sorted(items, key=lambda item: item.at))


def _places(field: Field | None, areas: tuple[str, ...] | None) -> tuple[str, ...]:
    """The area paths (or sectors) a person knows at the start, each checked against the map."""
    if field is None or is_null(field.node):
        return ()
    reader = field.reader
    places = []
    for number, item in enumerate(reader.sequence(field.node, field.key) or []):
        place = check_area(reader, item, child(field.key, number), areas)
        if place:
            places.append(place)
    return tuple(places)


def _relationships(field: Field | None) -> dict[str, str]:
    """Agent id -> how this person sees them, in file order."""
    if field is None or is_null(field.node):
        return {}
    reader = field.reader
    relationships = {}
    for name, key_node, value_node in reader.pairs(field.node, field.key) or []:
        path = child(field.key, name)
        if not AGENT_ID.match(name):
            message = f"relationships key {name!r} is not an agent id (lower_snake_case, like maria_lopez)"
            reader.report(key_node, message, path)
            continue
        text = reader.text(value_node, path)
        if text is not None:
            relationships[name] = text
    return relationships


def _memories(field: Field | None, start: datetime | None) -> tuple[SeedMemory, ...]:
    """The agent's own seed memories."""
    if field is None:
        return ()
    return read_memories(field.reader, field.node, field.key, start)
