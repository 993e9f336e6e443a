"""OpenAI's strict subset of JSON Schema, checked as its API checks a `response_format`
schema sent with `strict: true` before any model sees it: the test server's `strict` mode.

From OpenAI's Structured Outputs guide ("Supported schemas"): the root is an object, not
`anyOf`; every object says `additionalProperties: false` and lists every property in
`required` (an optional field is a union with null); only these keywords: type, properties,
required, additionalProperties, items, enum, const, anyOf, $defs/definitions/$ref,
description, title, and the constraints pattern, format, multipleOf, minimum, maximum,
exclusiveMinimum, exclusiveMaximum, minItems, maxItems (allOf, not, if/then/else and
dependentRequired/dependentSchemas are named as unsupported; any other key is refused too);
at most 10 levels of nesting, 5,000 object properties, 1,000 enum values in all, a string
enum of more than 250 values within 15,000 characters, and 120,000 characters of property
names, definition names, enum and const values. The messages follow the API's
("Invalid schema for response_format 'NAME': In context=(...), ...").
"""

from __future__ import annotations

from dataclasses import dataclass

SUPPORTED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$defs",
        "definitions",
        "$ref",
        "description",
        "title",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
MAX_DEPTH, MAX_PROPERTIES, MAX_ENUM = 10, 5000, 1000
BIG_ENUM, BIG_ENUM_CHARS, MAX_CHARS = 250, 15000, 120000


class Refused(ValueError):
    """A schema outside the strict subset; the message is the API's, without its prefix."""


@dataclass
class _Tally:
    properties: int = 0
    enums: int = 0
    chars: int = 0


def problem(schema: dict, name: str, max_enum: int = MAX_ENUM) -> str | None:
    """None if the API takes `schema` in strict mode; else the message of its HTTP 400.
    `max_enum`: the enum values a schema may have in all (a provider of its own limit)."""
    try:
        check(schema, max_enum)
    except Refused as exc:
        return f"Invalid schema for response_format '{name}': {exc}"
    return None


def check(schema: dict, max_enum: int = MAX_ENUM) -> None:
    """Raise `Refused` for the first thing about `schema` outside the strict subset."""
    if not isinstance(schema, dict) or schema.get("type") != "object" or "anyOf" in schema:
        got = schema.get("type") if isinstance(schema, dict) else type(schema).__name__
        raise Refused(f"schema must be a JSON Schema of 'type: \"object\"', got 'type: \"{got}\"'.")
    tally = _Tally()
    _walk(schema, (), 1, tally)
    for limit, value, what in (
        (MAX_PROPERTIES, tally.properties, "object properties"),
        (max_enum, tally.enums, "enum values"),
        (MAX_CHARS, tally.chars, "characters of property names, enum and const values"),
    ):
        if value > limit:
            raise Refused(
                f"Expected at most {limit} {what} in total within a single schema when using structured "
                f"outputs, but received {value}. Consider reducing the size of the schema, or use "
                "'strict: false' to opt out of structured outputs."
            )


def _walk(node, path: tuple, depth: int, tally: _Tally) -> None:
    where = f"In context={path!r}, "
    if not isinstance(node, dict):
        raise Refused(f"{where}schema must be a JSON Schema object.")
    for key in node:
        if key not in SUPPORTED:
            raise Refused(f"{where}'{key}' is not permitted.")
    _enum(node, where, tally)
    kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
    if "object" in kinds or "properties" in node:
        _object(node, path, depth, tally)
    if "items" in node:
        _walk(node["items"], path + ("items",), depth, tally)
    for i, option in enumerate(node.get("anyOf", ())):
        _walk(option, path + ("anyOf", i), depth, tally)
    for group in ("$defs", "definitions"):
        for name, definition in node.get(group, {}).items():
            tally.chars += len(name)
            _walk(definition, path + (group, name), depth, tally)


def _object(node: dict, path: tuple, depth: int, tally: _Tally) -> None:
    """An object `depth` objects deep (the root is 1)."""
    where = f"In context={path!r}, "
    if depth > MAX_DEPTH:
        raise Refused(
            f"{where}objects are nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} are "
            "supported when using structured outputs."
        )
    if node.get("additionalProperties") is not False:
        raise Refused(f"{where}'additionalProperties' is required to be supplied and to be false.")
    properties = node.get("properties", {})
    missing = [key for key in properties if key not in node.get("required", ())]
    if missing:
        raise Refused(
            f"{where}'required' is required to be supplied and to be an array including every key in "
            f"properties. Missing '{missing[0]}'."
        )
    tally.properties += len(properties)
    for key, sub in properties.items():
        tally.chars += len(key)
        _walk(sub, path + ("properties", key), depth + 1, tally)


def _enum(node: dict, where: str, tally: _Tally) -> None:
    values = node.get("enum", ())
    tally.enums += len(values)
    strings = [v for v in values if isinstance(v, str)]
    tally.chars += sum(map(len, strings)) + (len(node["const"]) if isinstance(node.get("const"), str) else 0)
    if len(strings) > BIG_ENUM and sum(map(len, strings)) > BIG_ENUM_CHARS:
        raise Refused(
            f"{where}Expected at most {BIG_ENUM_CHARS} characters in total for a string enum of more than "
            f"{BIG_ENUM} values, but received {sum(map(len, strings))}."
        )
