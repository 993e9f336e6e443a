"""Loading a scenario file with its agents, and validating scenario and agent files.

Every check records a `Problem` and reading goes on, so one call reports everything
wrong with a scenario and the agent files it uses; the scenario is built only when there
are none.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from smallville.errors import ScenarioError
from smallville.scenario.agentfile import AGENT_KEYS, agent_fields, build_agent
from smallville.scenario.mapfile import read_map
from smallville.scenario.memorymodel import (
    MODELS,
    PAPER_SETTINGS,
    SALIENCE_SETTINGS,
    Adjust,
    MemoryModel,
    Reflection,
    preset,
)
from smallville.scenario.model import AGENT_ID, MEMORY_INDEXES, AgentSpec, Problem, Scenario
from smallville.scenario.overrides import apply_override
from smallville.scenario.timeline import read_events, read_probes, read_scenario_memories
from smallville.scenario.yamlpos import LOADER, Field, Reader, child, describe, is_null

SCENARIO_KEYS = (
    "name",
    "description",
    "start",
    "duration",
    "tick",
    "seed",
    "map",
    "agents",
    "memories",
    "events",
    "probes",
    "brain",
    "memory",
    "agent_types",
)
SCENARIO_REQUIRED = ("name", "start", "map", "agents")
MEMORY_KEYS = ("preset", "index", "model") + tuple(f.name for f in fields(MemoryModel) if f.name != "model")
SECTIONS = {
    "reflection": tuple(f.name for f in fields(Reflection)),
    "importance_adjust": tuple(f.name for f in fields(Adjust)),
}
DEFAULT_DURATION = 86400.0
DEFAULT_TICK = 60.0


def load_scenario(path: str | os.PathLike, overrides: Iterable[str] = ()) -> Scenario:
    """The scenario at `path` with its agents, and `overrides` ("memory.KEY=VALUE", as
    `smallville run --set` gives them) over what its file says; ScenarioError listing
    every problem if any."""
    scenario, problems = _read_scenario(os.fspath(path), tuple(overrides))
    if problems or scenario is None:
        raise ScenarioError(problems)
    return scenario


def validate_files(paths: Iterable[str | os.PathLike]) -> list[Problem]:
    """Every problem in the given scenario and agent files (an agent file is checked without a map)."""
    problems: list[Problem] = []
    for path in map(os.fspath, paths):
        if is_agent_file(path):
            problems.extend(_check_agent_file(path))
        else:
            problems.extend(_read_scenario(path)[1])
    return list(dict.fromkeys(problems))


def is_agent_file(path: str) -> bool:
    """Whether a file is an agent file: under an `agents/` folder, or a mapping with name and home but no map."""
    if Path(path).parent.name == "agents":
        return True
    try:
        node = yaml.compose(Path(path).read_text(encoding="utf-8-sig"), Loader=LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    if not isinstance(node, MappingNode):
        return False
    names = {key.value for key, _ in node.value if isinstance(key, ScalarNode)}
    return {"name", "home"} <= names and "map" not in names


@dataclass(frozen=True)
class _Opened:
    """A YAML file read and composed: its bytes (for the hash), its reader and its top node."""

    data: bytes
    reader: Reader
    top: Node


def _open(path: str, label: str, problems: list[Problem]) -> _Opened | None:
    """Read and compose a file, reporting (under `label`) why it cannot be."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        problems.append(Problem(label, 0, 0, f"cannot read file: {error.strerror or error}"))
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        problems.append(Problem(label, line, column, f"the file is not UTF-8 text (byte {error.start})"))
        return None
    reader = Reader(label, text, problems)
    top = reader.compose()
    return None if top is None else _Opened(data, reader, top)


def _read_scenario(path: str, overrides: tuple[str, ...] = ()) -> tuple[Scenario | None, list[Problem]]:
    """The scenario at `path` (with `overrides`) and the problems found; the scenario is None
    unless there are none."""
    problems: list[Problem] = []
    opened = _open(path, path, problems)
    if opened is not None and isinstance(opened.top, MappingNode):
        for option in overrides:
            apply_override(opened.top, option, problems)
    fields = opened.reader.mapping(opened.top, "", SCENARIO_KEYS, SCENARIO_REQUIRED) if opened else None
    if opened is None or fields is None:
        return None, _ordered(problems)
    reader = opened.reader
    start = reader.datetime(fields.get("start"), "start")
    map_spec = read_map(reader, fields["map"]) if "map" in fields else None
    areas = map_spec.areas() if map_spec is not None else None
    memory = _read_memory(reader, fields.get("memory"))
    agent_types = _read_agent_types(reader, fields.get("agent_types"), memory.get("memory_model"))
    agents, agent_ids, agent_data = _read_agents(
        reader, fields.get("agents"), path, areas, start, tuple(dict(agent_types))
    )
    scenario = Scenario(
        path=path,
        name=reader.text(fields.get("name"), "name"),
        description=reader.text(fields.get("description"), "description", required=False, default=""),
        start=start,
        duration=reader.duration(fields.get("duration"), "duration", default=DEFAULT_DURATION),
        tick=reader.duration(fields.get("tick"), "tick", default=DEFAULT_TICK),
        seed=reader.integer(fields.get("seed"), "seed", default=0),
        map=map_spec,
        agents=tuple(agents),
        memories=read_scenario_memories(reader, fields.get("memories"), agent_ids, start),
        events=read_events(reader, fields.get("events"), agent_ids, areas, start),
        probes=read_probes(reader, fields.get("probes")),
        sha256=hashlib.sha256(opened.data + b"".join(agent_data)).hexdigest(),
        brain=_read_brain(reader, fields.get("brain")),
        agent_types=agent_types,
        **memory,
    )
    return (None, _ordered(problems)) if problems else (scenario, [])


def _read_agents(
    reader: Reader,
    node: Node | None,
    path: str,
    areas: tuple[str, ...] | None,
    start: datetime | None,
    types: tuple[str, ...] = (),
) -> tuple[list[AgentSpec], set[str] | None, list[bytes]]:
    """The scenario's agents in order, the set of ids it lists (None if unreadable), and their files' bytes."""
    items = reader.sequence(node, "agents")
    if items is None:
        return [], None, []
    if not items:
        reader.report(node, "agents must list at least one agent", "agents")
    agents, data, first_key = [], [], {}
    for number, item in enumerate(items):
        entry = _agent_entry(reader, item, child("agents", number))
        if entry is None:
            continue
        agent_id, id_field, overrides = entry
        if agent_id in first_key:
            message = f"agent {agent_id!r} is listed twice in agents (first at {first_key[agent_id]})"
            reader.report(id_field.node, message, id_field.key)
            continue
        first_key[agent_id] = id_field.key
        loaded = _load_agent(id_field, path, agent_id, overrides, areas, start, types)
        if loaded is not None:
            agents.append(loaded[0])
            data.append(loaded[1])
    return agents, set(first_key), data


def _agent_entry(reader: Reader, item: Node, key: str) -> tuple[str, Field, dict[str, Field]] | None:
    """(id, where the id is written, overrides) of one `agents:` entry: an id, or {id: ..., key: override}."""
    overrides: dict[str, Field] = {}
    if isinstance(item, ScalarNode):
        id_field = Field(reader, item, key)
    else:
        fields = reader.mapping(item, key, ("id",) + AGENT_KEYS, ("id",))
        if fields is None or "id" not in fields:
            return None
        id_field = Field(reader, fields["id"], child(key, "id"))
        overrides = {name: Field(reader, node, child(key, name)) for name, node in fields.items() if name != "id"}
    agent_id = reader.text(id_field.node, id_field.key)
    if agent_id is None:
        return None
    if not AGENT_ID.match(agent_id):
        reader.report(
            id_field.node, f"agent id {agent_id!r} is not lower_snake_case (like isabella_rodriguez)", id_field.key
        )
        return None
    return agent_id, id_field, overrides


def _load_agent(
    id_field: Field,
    path: str,
    agent_id: str,
    overrides: dict[str, Field],
    areas: tuple[str, ...] | None,
    start: datetime | None,
    types: tuple[str, ...] = (),
) -> tuple[AgentSpec, bytes] | None:
    """An agent's spec (file plus overrides) and its file's bytes; None when anything is wrong."""
    candidates = agent_paths(path, agent_id)
    found = next(((real, label) for real, label in candidates if os.path.isfile(real)), None)
    if found is None:
        looked = " and ".join(label for _, label in candidates)
        message = f"agent file for {agent_id!r} not found: looked for {looked}"
        id_field.reader.report(id_field.node, message, id_field.key)
        return None
    opened = _open(found[0], found[1], id_field.reader.problems)
    fields = agent_fields(opened.reader, opened.top) if opened else None
    if opened is None or fields is None:
        return None
    merged = {**fields, **overrides}
    kind = merged.get("type")
    if kind is not None and kind.reader.text(kind.node, kind.key) not in (*types, None):
        kind.reader.report(
            kind.node,
            f"type {kind.node.value!r} is not one of the scenario's agent_types ({', '.join(types) or 'it has none'})",
            kind.key,
        )
        return None
    spec = build_agent(agent_id, merged, opened.reader, opened.top, areas, start)
    return None if spec is None else (spec, opened.data)


def agent_paths(scenario_path: str, agent_id: str) -> list[tuple[str, str]]:
    """Where an agent file is looked for, in order, as (path to open, path to show the user)."""
    folder = os.path.dirname(scenario_path)
    paths = []
    for base in (folder, os.path.join(folder, os.pardir)):
        candidate = os.path.join(base, "agents", f"{agent_id}.yaml")
        paths.append((candidate, os.path.normpath(candidate)))
    return paths


def _check_agent_file(path: str) -> list[Problem]:
    """Every problem in one agent file read on its own (no map, so places are not checked)."""
    problems: list[Problem] = []
    opened = _open(path, path, problems)
    if opened is None:
        return problems
    stem = Path(path).stem
    if Path(path).parent.name == "agents" and not AGENT_ID.match(stem):
        message = f"agent file name {stem!r} is not a lower_snake_case id (like isabella_rodriguez)"
        opened.reader.report_at(1, 1, message)
    fields = agent_fields(opened.reader, opened.top)
    if fields is not None:
        build_agent(stem, fields, opened.reader, opened.top, None, None)
    return _ordered(problems)


def _read_brain(reader: Reader, node: Node | None) -> dict:
    """The free-form `brain:` settings (not checked inside)."""
    if node is None or is_null(node):
        return {}
    if not isinstance(node, MappingNode):
        reader.report(node, f"brain must be a mapping of settings, got {describe(node)}", "brain")
        return {}
    return reader.construct(node, "brain") or {}


def _read_memory(reader: Reader, node: Node | None) -> dict:
    """The `memory:` settings as the Scenario's fields: the index of every agent's memory
    stream (exact unless set), the paper model's weights, and the memory model (a preset's
    settings under the block's own). A setting of the other model than the one chosen is
    refused where it is written."""
    if node is None or is_null(node):
        return {}
    fields = reader.mapping(node, "memory", MEMORY_KEYS) or {}
    out = {
        "memory_index": reader.choice(fields.get("index"), "memory.index", MEMORY_INDEXES, default="exact") or "exact"
    }
    base: dict = {}
    if "preset" in fields:
        try:
            base = preset(reader.construct(fields["preset"], "memory.preset"))
        except (TypeError, ValueError) as error:
            reader.report(fields["preset"], str(error), "memory.preset")
    model = reader.choice(fields.get("model"), "memory.model", MODELS, default=base.get("model", "paper")) or "paper"
    other = PAPER_SETTINGS if model == "salience" else SALIENCE_SETTINGS
    settings = {k: v for k, v in base.items() if k not in other}
    for name, value_node in fields.items():
        if name in ("index", "model", "preset"):
            continue
        key = f"memory.{name}"
        if name in other:
            reader.report(
                value_node,
                f"{name} is a setting of the {'paper' if model == 'salience' else 'salience'}"
                f" model: it does not go with model: {model}",
                key,
            )
            continue
        value = _memory_setting(reader, value_node, key, name, model, settings.get(name))
        if value is not None:
            settings[name] = value
    if settings.get("normalize") == "fixed" and out["memory_index"] != "exact":
        reader.report(fields.get("normalize", node), "normalize: fixed needs index: exact", "memory.normalize")
    try:
        memory_model = MemoryModel.of({**settings, "model": model})
    except (TypeError, ValueError) as error:
        reader.report(node, str(error), "memory")
        return out
    out["memory_model"] = memory_model
    if memory_model.weights is not None:
        out["memory_weights"] = memory_model.weights
    return out


def _memory_setting(reader: Reader, node: Node, key: str, name: str, model: str, under=None):
    """One `memory:` setting, checked alone (a section key by key, over `under`, the
    preset's); None, reported where it is written, when it is wrong."""
    if name in SECTIONS and isinstance(node, MappingNode):
        merged = dict(under or {})
        for part, part_node in (reader.mapping(node, key, SECTIONS[name]) or {}).items():
            value = reader.construct(part_node, f"{key}.{part}")
            try:
                MemoryModel.of({"model": model, name: {**merged, part: value}})
            except (TypeError, ValueError) as error:
                reader.report(part_node, str(error), f"{key}.{part}")
                continue
            merged[part] = value
        return merged
    value = reader.construct(node, key)
    try:
        MemoryModel.of({"model": model, name: value})
    except (TypeError, ValueError) as error:
        reader.report(node, str(error), key)
        return None
    return value


def _read_agent_types(reader: Reader, node: Node | None, memory: MemoryModel | None) -> tuple:
    """`agent_types:`: each type's keyword table (a source's or an emotion's name -> words),
    for `tagger: keywords`; every name must be one of the memory model's."""
    if node is None or is_null(node):
        return ()
    names = [n for n, _ in (memory.sources + memory.emotions)] if memory is not None else None
    out = []
    for kind, table_node in (reader.mapping(node, "agent_types") or {}).items():
        table = []
        for name, words_node in (reader.mapping(table_node, f"agent_types.{kind}", names) or {}).items():
            key = f"agent_types.{kind}.{name}"
            words = reader.sequence(words_node, key)
            if words is not None:
                table.append((name, tuple(w.lower() for w in (reader.text(n, key) for n in words) if w)))
        out.append((kind, tuple(table)))
    return tuple(out)


def _ordered(problems: list[Problem]) -> list[Problem]:
    """Problems grouped by file (in the order files were met), then by place; duplicates dropped."""
    files = {problem.file: index for index, problem in reversed(list(enumerate(problems)))}
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda problem: (files[problem.file], problem.line, problem.column))
