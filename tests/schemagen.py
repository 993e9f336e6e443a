"""Random valid instances of a JSON schema: what a constrained decoder (vLLM's guided
decoding, llama.cpp's grammar, OpenAI's strict mode) may legally answer. Covers the
keywords smallville's answer schemas use: type (one or a list), enum, properties,
required, additionalProperties, items, minItems/maxItems, minimum/maximum."""

from __future__ import annotations

import random
from typing import Any

WORDS = ("the", "cafe", "party", "reading", "walk", "quietly", "Isabella", "tomorrow", "x", "", "7", "ok")


def instance(schema: dict, rng: random.Random, prefer: dict | None = None) -> Any:
    """One random value that `schema` accepts. `prefer` maps property names to a value
    (or a list of values to draw from) used wherever the property's schema allows it."""
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return {k: _preferred(s, rng, prefer, k) for k, s in props.items() if k in required or rng.random() < 0.5}
    if kind == "array":
        low = schema.get("minItems", 0)
        high = schema.get("maxItems", low + 4)
        return [instance(schema.get("items", {}), rng, prefer) for _ in range(rng.randint(low, max(low, high)))]
    if kind == "integer":
        return rng.randint(schema.get("minimum", -1000), schema.get("maximum", 3000))
    if kind == "number":
        return rng.uniform(schema.get("minimum", -1000.0), schema.get("maximum", 3000.0))
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))


def _preferred(schema: dict, rng: random.Random, prefer: dict | None, name: str) -> Any:
    """The preferred value of property `name`, if `schema` allows one, else a random one
    (`...` prefers any value of the property's enum but null)."""
    if prefer and name in prefer:
        wanted = prefer[name]
        if wanted is ...:
            wanted = [v for v in schema.get("enum", ()) if v is not None]
        options = [v for v in (wanted if isinstance(wanted, (list, range)) else [wanted]) if _allows(schema, v)]
        if options:
            return rng.choice(options)
    return instance(schema, rng, prefer)


def _allows(schema: dict, value: Any) -> bool:
    if "enum" in schema:
        return value in schema["enum"]
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    if isinstance(value, bool):
        return "boolean" in kinds
    if isinstance(value, int):
        return "integer" in kinds and schema.get("minimum", value) <= value <= schema.get("maximum", value)
    return isinstance(value, str) and "string" in kinds
