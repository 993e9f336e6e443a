"""`smallville run --set memory.KEY=VALUE`: a setting of the scenario's `memory:` block given on
the command line, put into the scenario's YAML before it is read, so it is checked as if it
were written there and a problem with it is located in the option itself."""

from __future__ import annotations

import io

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode

from smallville.scenario.model import Problem
from smallville.scenario.yamlpos import OVERRIDE

PREFIX = "memory."


def apply_override(top: MappingNode, option: str, problems: list[Problem]) -> None:
    """Put `option` ("memory.KEY=VALUE", KEY perhaps a section's "reflection.threshold") into
    the scenario's top mapping, replacing what the file says there; a malformed option is
    recorded in `problems`."""
    label = f"{OVERRIDE}{option}"
    path, equals, text = option.partition("=")
    if not equals or not path.startswith(PREFIX) or not path[len(PREFIX) :]:
        problems.append(Problem(label, 1, 1, "--set takes memory.KEY=VALUE, e.g. --set memory.decay=0.99"))
        return
    value = _compose(label, " " * (len(path) + 1) + text, problems)
    if value is None:
        return
    names = path.split(".")
    node = top
    for depth, name in enumerate(names):
        last = depth == len(names) - 1
        found = next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == name), None)
        if last or not isinstance(found, MappingNode):
            node.value = [(k, v) for k, v in node.value if not (isinstance(k, ScalarNode) and k.value == name)]
            found = value if last else MappingNode("tag:yaml.org,2002:map", [], value.start_mark, value.end_mark)
            key = ScalarNode("tag:yaml.org,2002:str", name, value.start_mark, value.end_mark)
            node.value.append((key, found))
        node = found


def _compose(label: str, text: str, problems: list[Problem]) -> Node | None:
    """The YAML node of an option's value, its marks naming the option."""
    stream = io.StringIO(text)
    stream.name = label
    try:
        node = yaml.compose(stream, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        problems.append(
            Problem(label, 1, (mark.column + 1) if mark else 1, f"YAML syntax error: {error.problem or error.context}")
        )
        return None
    if node is None:
        problems.append(Problem(label, 1, len(text) + 1, "--set needs a value after ="))
    return node
