"""Reading YAML with positions: values are built from composed nodes, so every problem has a place.

A `Reader` wraps one file. Its methods each read one kind of value from a node; when the
value is wrong they record a `Problem` at the node and return None, so reading carries on
and every problem in the file is found in one pass.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from smallville import timefmt
from smallville.scenario.model import Problem

NULL_TAG = "tag:yaml.org,2002:null"
INT_TAG = "tag:yaml.org,2002:int"
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9_]+$")


def child(key: str, name: str | int) -> str:
    """The key path of `name` inside `key`: "map.legend", "agents[2]", "probes['my probe']"."""
    if isinstance(name, int):
        return f"{key}[{name}]"
    if _PLAIN_NAME.match(name):
        return f"{key}.{name}" if key else name
    return f"{key}[{name!r}]"


def leaf(key: str) -> str:
    """The last part of a key path, to name a value in a message ("agents[1].age" -> "age")."""
    return key.rsplit(".", 1)[-1] if key else "the file"


def describe(node: Node) -> str:
    """What a node holds, in a few words, for "must be X, got Y" messages."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == NULL_TAG:
        return "nothing"
    return repr(node.value)


def is_null(node: Node | None) -> bool:
    """Whether a node is absent or an explicit YAML null (`key:` with no value, or `~`)."""
    return node is None or (isinstance(node, ScalarNode) and node.tag == NULL_TAG)


@dataclass(frozen=True)
class Field:
    """A value node together with the file it came from and its key path there."""

    reader: Reader
    node: Node
    key: str


OVERRIDE = "--set "
"""How a YAML node given on the command line names where it came from (its marks' name)."""

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's where pyyaml has it: 10x faster


class Reader:
    """One YAML file being read: its label, its lines, and the shared list of problems found."""

    def __init__(self, file: str, text: str, problems: list[Problem]) -> None:
        self.file = file
        self.source = text
        self.lines = text.splitlines()
        self.problems = problems

    def report_at(self, line: int, column: int, message: str, key: str = "") -> None:
        """Record a problem at a 1-based line and column."""
        self.problems.append(Problem(self.file, line, column, message, key))

    def report(self, node: Node, message: str, key: str = "") -> None:
        """Record a problem at the start of a node (in the option that gave it, for a node
        of a `--set` option: `smallville.scenario.overrides`)."""
        mark = node.start_mark
        file = mark.name if str(mark.name).startswith(OVERRIDE) else self.file
        self.problems.append(Problem(file, mark.line + 1, mark.column + 1, message, key))

    def compose(self) -> Node | None:
        """The file's top node, or None after reporting a syntax error or an empty file."""
        try:
            try:
                node = yaml.compose(self.source, Loader=LOADER)
            except yaml.YAMLError:  # said as pyyaml's own parser says it: clearer
                node = yaml.compose(self.source, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as error:
            mark = error.problem_mark or error.context_mark
            what = error.problem or error.context or "cannot be read"
            line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            self.report_at(line, column, f"YAML syntax error: {what}")
            return None
        except yaml.YAMLError as error:
            self.report_at(1, 1, f"YAML syntax error: {error}")
            return None
        if is_null(node):
            self.report_at(1, 1, "the file is empty: expected a mapping of keys")
            return None
        return node

    def pairs(
        self, node: Node, key: str, known: Sequence[str] | None = None, required: Sequence[str] = ()
    ) -> list[tuple[str, Node, Node]] | None:
        """(name, key node, value node) of a mapping, checking unknown, duplicate and missing keys."""
        if not isinstance(node, MappingNode):
            self.report(node, f"{leaf(key)} must be a mapping, got {describe(node)}", key)
            return None
        try:
            SafeConstructor().flatten_mapping(node)
        except yaml.YAMLError as error:
            self.report(node, f"bad merge key: {error}", key)
            return None
        found: list[tuple[str, Node, Node]] = []
        names: set[str] = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag == NULL_TAG:
                self.report(key_node, f"a key in {leaf(key)} must be plain text, got {describe(key_node)}", key)
                continue
            name = key_node.value
            path = child(key, name)
            if name in names:
                self.report(key_node, f"duplicate key {name!r}", path)
            elif known is not None and name not in known:
                self.report(key_node, _unknown_key(name, known), path)
            else:
                names.add(name)
                found.append((name, key_node, value_node))
        for name in required:
            if name not in names:
                self.report(node, f"missing required key {name!r}", child(key, name))
        return found

    def mapping(
        self, node: Node, key: str, known: Sequence[str] | None = None, required: Sequence[str] = ()
    ) -> dict[str, Node] | None:
        """The value nodes of a mapping by key name, in file order (see `pairs`)."""
        found = self.pairs(node, key, known, required)
        return None if found is None else {name: value for name, _, value in found}

    def sequence(self, node: Node | None, key: str) -> list[Node] | None:
        """The item nodes of a list (an explicit null reads as an empty list)."""
        if node is None:
            return None
        if is_null(node):
            return []
        if not isinstance(node, SequenceNode):
            self.report(node, f"{leaf(key)} must be a list, got {describe(node)}", key)
            return None
        return list(node.value)

    def text(self, node: Node | None, key: str, required: bool = True, default: str | None = None) -> str | None:
        """Free text (any scalar, read as written); empty is a problem when `required`."""
        if node is None:
            return default
        if not isinstance(node, ScalarNode):
            self.report(node, f"{leaf(key)} must be text, got {describe(node)}", key)
            return None
        value = "" if node.tag == NULL_TAG else node.value.strip()
        if required and not value:
            self.report(node, f"{leaf(key)} must not be empty", key)
            return None
        return value

    def integer(
        self, node: Node | None, key: str, low: int | None = None, high: int | None = None, default: int | None = None
    ) -> int | None:
        """An integer, optionally within [low, high]."""
        if node is None:
            return default
        value = None
        if isinstance(node, ScalarNode) and node.tag == INT_TAG:
            value = SafeConstructor().construct_yaml_int(node)
        if value is None or (low is not None and value < low) or (high is not None and value > high):
            self.report(node, f"{leaf(key)} must be {_integer_kind(low, high)}, got {describe(node)}", key)
            return None
        return value

    def choice(self, node: Node | None, key: str, choices: Sequence[str], default: str | None = None) -> str | None:
        """One of `choices`, written as is."""
        value = self.text(node, key, default=default)
        if value is None or value in choices:
            return value
        self.report(node, f"{leaf(key)} must be one of {', '.join(choices)}, got {describe(node)}", key)
        return None

    def duration(self, node: Node | None, key: str, default: float | None = None) -> float | None:
        """A positive duration such as "10m", in seconds."""
        return self._parse(node, key, timefmt.parse_duration, "a duration such as 10m", default)

    def datetime(self, node: Node | None, key: str) -> datetime | None:
        """A date-time `YYYY-MM-DD HH:MM[:SS]`."""
        return self._parse(node, key, timefmt.parse_datetime, "a date-time YYYY-MM-DD HH:MM", None)

    def clock(self, node: Node | None, key: str) -> int | None:
        """A clock time "HH:MM" in minutes since midnight, read from the raw text (so 06:00 works unquoted)."""
        return self._parse(node, key, timefmt.parse_clock, "a clock time HH:MM", None)

    def construct(self, node: Node, key: str) -> Any:
        """The plain Python value of a node, for free-form settings."""
        try:
            return SafeConstructor().construct_document(node)
        except yaml.YAMLError as error:
            self.report(node, f"{leaf(key)} cannot be read: {error}", key)
            return None

    def _parse(self, node: Node | None, key: str, parse: Any, expected: str, default: Any) -> Any:
        """Parse a scalar's raw text with a timefmt function, reporting its ValueError."""
        if node is None:
            return default
        if not isinstance(node, ScalarNode) or node.tag == NULL_TAG:
            self.report(node, f"{leaf(key)} must be {expected}, got {describe(node)}", key)
            return None
        try:
            return parse(node.value)
        except ValueError as error:
            self.report(node, f"{leaf(key)}: {error}", key)
            return None


def _unknown_key(name: str, known: Sequence[str]) -> str:
    """The message for an unknown key, suggesting the closest known one."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown key {name!r} (did you mean {close[0]!r}?)"
    return f"unknown key {name!r} (known keys: {', '.join(known)})"


def _integer_kind(low: int | None, high: int | None) -> str:
    """How to say which integers are allowed."""
    if low is not None and high is not None:
        return f"an integer from {low} to {high}"
    if low == 1:
        return "a positive integer"
    if low == 0:
        return "a non-negative integer"
    return "an integer"
