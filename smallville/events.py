"""Every kind of event the engine writes, and the keys of its `data`: the one place for both.

An event is a line of `events.jsonl`: `{"t", "time", "kind", "agent", "data"}` (see
docs/run-format.md, whose table tests/test_events.py checks against `KINDS`). Writers build
`data` with `data(KIND, ...)`, which puts the keys in the kind's order and refuses a missing,
unknown or mistyped one; readers compare `event["kind"]` with the names below, and read a key
that may be absent with `get`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

PLAN, ACTION, MOVE, OBJECT, MEMORY, REFLECT = "plan", "action", "move", "object", "memory", "reflect"
TALK_START, SAY, TALK_END, RELATIONSHIP = "talk_start", "say", "talk_end", "relationship"
REPLAN, SLEEP, WAKE, EVENT, LEARNED, SPAWN = "replan", "sleep", "wake", "event", "learned", "spawn"
BRAIN_FALLBACK, BRAIN_REPAIR, BRAIN_REFUSED = "brain_fallback", "brain_repair", "brain_refused"
RECALL = "recall"
DECISIONS = (PLAN, ACTION, REPLAN, SAY, TALK_START, REFLECT, MEMORY)
"""The kinds whose event may name the request it came of (`req`: the agent's request number)."""

_JSON_TYPES = {
    "str": (str,),
    "int": (int,),
    "number": (int, float),
    "bool": (bool,),
    "list": (list,),
    "null": (type(None),),
}


@dataclass(frozen=True)
class Field:
    """One key of an event's `data`: its JSON type (`str`, `int`, `number`, `bool`, `list`, or
    two of them as `str/null`) and whether it may be absent (`optional`)."""

    name: str
    type: str
    optional: bool = False
    types: tuple[Any, ...] = dataclasses.field(init=False, repr=False, compare=False)  # from `type`
    takes_bool: bool = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        types = tuple(t for name in self.type.split("/") for t in _JSON_TYPES[name])
        object.__setattr__(self, "types", types)  # checked for every event written: worked out once
        object.__setattr__(self, "takes_bool", bool in types)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.types) and (self.takes_bool or not isinstance(value, bool))

    def empty(self) -> Any:
        """What a reader takes for this field when it is absent."""
        return [] if self.type == "list" else False if self.type == "bool" else None

    def __str__(self) -> str:
        """As docs/run-format.md writes it: `` `links` list? ``."""
        return f"`{self.name}` {self.type}{'?' if self.optional else ''}"


@dataclass(frozen=True)
class Kind:
    """A kind of event: its name, whose event it is (the line's `agent`), its `data` fields in
    order, and what it means."""

    name: str
    agent: str
    fields: tuple[Field, ...]
    meaning: str
    names: tuple[str, ...] = dataclasses.field(init=False, repr=False, compare=False)  # the fields'

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", tuple(f.name for f in self.fields))

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"a {self.name} event has no field {name!r}")


def _kind(name: str, agent: str, fields: str, meaning: str) -> Kind:
    """A Kind from its fields written as in the doc: "to str, text str, links list?"."""
    parsed = []
    for part in fields.split(", "):
        field_name, type_name = part.split(" ")
        parsed.append(Field(field_name, type_name.rstrip("?"), type_name.endswith("?")))
    return Kind(name, agent, tuple(parsed), meaning)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        _kind(PLAN, "who", "date str, blocks list, req int?", "the day's plan, in blocks [start, end, activity, area]"),
        _kind(ACTION, "who", "action str, area str, object str/null, until str, req int?", "an action begins"),
        _kind(MOVE, "who", "from list, to list, area str, tiles int, arrive str", "a walk begins"),
        _kind(OBJECT, "who changed it", "object str, area str, state str", "an object's state changed"),
        _kind(
            MEMORY,
            "whose",
            "id int/null, kind str, importance int, text str, links list?, speaker str?, "
            "listener str?, line str?, salience number?, source str?, emotion str?, req int?",
            "a memory was stored (a chat line: who said it to whom; salience model: its I, source and "
            "emotion, and id null when it stays only in the working memory)",
        ),
        _kind(
            REFLECT, "who", "importance number, questions list, req int?", "enough happened: the questions reflected on"
        ),
        _kind(TALK_START, "who began", "with str, area str, req int?", "a conversation begins"),
        _kind(SAY, "speaker", "to str, text str, req int?", "a line of a conversation"),
        _kind(TALK_END, "who began", "with str, lines int, reason str", "a conversation ends"),
        _kind(RELATIONSHIP, "whose view", "with str, talks int, view str", "a view of another, after a talk"),
        _kind(REPLAN, "who", "reason str, actions list, req int?", "the rest of a block is planned again"),
        _kind(SLEEP, "who", "area str, until str", "the agent goes to sleep"),
        _kind(WAKE, "who", "area str", "the agent wakes up"),
        _kind(
            EVENT,
            "null, or the agent of a whisper",
            "what str, where str?, present list?, whisper bool?, injected bool?",
            "a scenario event happens, or a whisper",
        ),
        _kind(LEARNED, "who", "probe str, memory int", "the agent now knows a probe's news"),
        _kind(SPAWN, "who", "tile list, area str", "where the agent is when the simulation starts"),
        _kind(BRAIN_FALLBACK, "who asked", "kind str, key str, error str", "the model failed: a safe default"),
        _kind(BRAIN_REPAIR, "who asked", "kind str, key str, repairs list", "an answer was repaired to fit"),
        _kind(BRAIN_REFUSED, "who asked", "kind str, ceiling int", "over the hourly request ceiling: a safe default"),
        _kind(
            RECALL,
            "who asked",
            "req int, request str, key str, queries list",
            "what retrieval brought back for a request: each query with its memories' ids and scores",
        ),
    )
}


def data(kind: str, /, **values: Any) -> dict[str, Any]:
    """The `data` of a `kind` event, its keys in the kind's order. A name Python reserves is
    given with a trailing `_` (`with_`, `from_`); an optional field given None is left out.
    An unknown kind or field, a missing field or a value of the wrong type: ValueError."""
    spec = _spec(kind)
    given = {(name[:-1] if name[-1] == "_" else name): value for name, value in values.items()}
    out = {}
    for f in spec.fields:
        value = given.get(f.name)
        if value is None:
            if f.optional:
                continue
            if f.name not in given:
                raise ValueError(f"a {kind} event needs its field {f.name!r}")
        if not (isinstance(value, f.types) and (f.takes_bool or value.__class__ is not bool)):
            raise ValueError(f"a {kind} event's {f.name!r} is {f.type}, not {value!r}")
        out[f.name] = value
    if len(out) != len(given):
        unknown = [name for name in given if name not in spec.names]
        if unknown:
            raise ValueError(f"a {kind} event has no field {unknown[0]!r}")
    return out


def problems(event: dict[str, Any]) -> list[str]:
    """What is wrong with an event as read back: an unknown kind, or `data` with keys missing,
    unknown, out of order or of the wrong type (empty when nothing is)."""
    spec = KINDS.get(str(event.get("kind")))
    if spec is None:
        return [f"unknown kind {event.get('kind')!r}"]
    found = event.get("data", {})
    out = [f"{spec.name}: no field {k!r}" for k in found if k not in spec.names]
    out += [f"{spec.name}: missing {f.name!r}" for f in spec.fields if not f.optional and f.name not in found]
    out += [
        f"{spec.name}: {f.name!r} is {f.type}, not {found[f.name]!r}"
        for f in spec.fields
        if f.name in found and not f.accepts(found[f.name])
    ]
    if not out and list(found) != [n for n in spec.names if n in found]:
        out.append(f"{spec.name}: fields out of order: {list(found)}")
    return out


def get(event: dict[str, Any], name: str) -> Any:
    """A field of an event, or, for an optional field that is absent, its empty value (`[]`,
    False or None). A name that is no field of the event's kind: KeyError."""
    field = _spec(event["kind"]).field(name)
    return event["data"][name] if name in event["data"] or not field.optional else field.empty()


@dataclass(frozen=True)
class Said:
    """A line of a conversation as a `chat` memory's event carries it: agent ids and the line."""

    speaker: str
    listener: str
    line: str


def said(event: dict[str, Any]) -> Said | None:
    """Who said what to whom, for the `memory` event of a chat line; None for any other event,
    and for a log written before chat memories carried `speaker`, `listener` and `line`."""
    if event["kind"] != MEMORY or "speaker" not in event["data"]:
        return None
    d = event["data"]
    return Said(d["speaker"], d["listener"], d["line"])


def _spec(kind: str) -> Kind:
    spec = KINDS.get(kind)
    if spec is None:
        raise ValueError(f"no event kind {kind!r}")
    return spec
