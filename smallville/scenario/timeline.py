"""Reading a scenario's `memories:`, `events:` and `probes:`, the parts that name agents and places."""

from __future__ import annotations

from datetime import datetime

from yaml.nodes import Node

from smallville.scenario.agentfile import read_memories
from smallville.scenario.mapfile import check_area
from smallville.scenario.model import Probe, SeedMemory, WorldEvent
from smallville.scenario.yamlpos import Reader, child, is_null

EVENT_KEYS = ("at", "what", "where", "agent")
PROBE_KEYS = ("question", "match")


def read_scenario_memories(
    reader: Reader, node: Node | None, agent_ids: set[str] | None, start: datetime | None
) -> dict[str, tuple[SeedMemory, ...]]:
    """Seed memories per agent id, in file order; each id must be an agent of the scenario."""
    if node is None or is_null(node):
        return {}
    memories = {}
    for agent_id, key_node, value_node in reader.pairs(node, "memories") or []:
        path = child("memories", agent_id)
        if agent_ids is not None and agent_id not in agent_ids:
            reader.report(key_node, f"memories name agent {agent_id!r}, who is not in this scenario's agents", path)
            continue
        memories[agent_id] = read_memories(reader, value_node, path, start)
    return memories


def read_events(
    reader: Reader, node: Node | None, agent_ids: set[str] | None, areas: tuple[str, ...] | None, start: datetime | None
) -> tuple[WorldEvent, ...]:
    """World events sorted by time (stable); each has exactly one of `where` and `agent`."""
    events = []
    for number, item in enumerate(reader.sequence(node, "events") or []):
        path = child("events", number)
        fields = reader.mapping(item, path, EVENT_KEYS, ("at", "what"))
        if fields is None:
            continue
        when = reader.datetime(fields.get("at"), child(path, "at"))
        what = reader.text(fields.get("what"), child(path, "what"))
        where, agent = _target(reader, item, fields, path, agent_ids, areas)
        if when is not None and what is not None and start is not None and (where or agent):
            events.append(WorldEvent((when - start).total_seconds(), what, where, agent))
    return tuple(sorted(events, key=lambda event: event.at))


def _target(
    reader: Reader,
    item: Node,
    fields: dict[str, Node],
    path: str,
    agent_ids: set[str] | None,
    areas: tuple[str, ...] | None,
) -> tuple[str | None, str | None]:
    """An event's (where, agent): an area path or prefix on the map, or an agent of the scenario."""
    if "where" in fields and "agent" in fields:
        reader.report(item, "event has both 'where' and 'agent': give exactly one", path)
        return None, None
    if "where" in fields:
        return check_area(reader, fields["where"], child(path, "where"), areas, "an area or area prefix"), None
    if "agent" not in fields:
        reader.report(item, "event needs 'where' (an area on the map) or 'agent' (an agent id)", path)
        return None, None
    key = child(path, "agent")
    agent = reader.text(fields["agent"], key)
    if agent is not None and agent_ids is not None and agent not in agent_ids:
        reader.report(fields["agent"], f"event agent {agent!r} is not in this scenario's agents", key)
        return None, None
    return None, agent


def read_probes(reader: Reader, node: Node | None) -> tuple[Probe, ...]:
    """Probes in file order, each with a question and at least one lower-cased match word."""
    if node is None or is_null(node):
        return ()
    probes = []
    for name, _, value_node in reader.pairs(node, "probes") or []:
        path = child("probes", name)
        fields = reader.mapping(value_node, path, PROBE_KEYS, ("question", "match"))
        if fields is None:
            continue
        question = reader.text(fields.get("question"), child(path, "question"))
        match = _match_words(reader, fields.get("match"), child(path, "match"))
        if question is not None and match:
            probes.append(Probe(name, question, match))
    return tuple(probes)


def _match_words(reader: Reader, node: Node | None, key: str) -> tuple[str, ...]:
    """A probe's match words: a non-empty list of non-empty words, lower-cased."""
    if node is None:
        return ()
    items = reader.sequence(node, key)
    if items is None:
        return ()
    if not items:
        reader.report(node, "match must list at least one word", key)
        return ()
    words = []
    for number, item in enumerate(items):
        word = reader.text(item, child(key, number))
        if word is None:
            continue
        words.append(word.lower())
    return tuple(words) if len(words) == len(items) else ()
