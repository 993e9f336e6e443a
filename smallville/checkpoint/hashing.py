"""The digest of a state: what `smallville verify` compares a re-simulated checkpoint with.

Schema 5 (now): the sha256 of the state's JSON (`sort_keys`) with each agent replaced by its
own digest, the sha256 of, one after the other: the agent's JSON without `plan` and `rng`
(`sort_keys`, compact), its plan's JSON (compact), `[version, gauss]` of its random
generator as JSON, and the generator's 625 numbers as little-endian uint32. So a checkpoint
hashes each agent on its own, reuses the encoding of a plan that did not change, and never
writes a generator's numbers as text (`parts.Writer.record`). Schemas 2 to 4: the sha256 of
the whole state's JSON (`sort_keys`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from array import array

__all__ = ["agent_digest", "digest"]

DIGEST_SCHEMA = 5  # the first checkpoint schema whose digest is this one


def text(value) -> str:
    """Compact JSON, as the parts are written."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _words(numbers: list[int]) -> bytes:
    """A generator's numbers as little-endian uint32, whatever the platform."""
    packed = array("I", numbers)
    if packed.itemsize != 4:
        raise ValueError(f"unsigned int is {packed.itemsize} bytes here, not 4")
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def agent_digest(agent: dict, plan: str | None = None) -> str:
    """The digest of an agent's state; `plan`: `text(agent["plan"])`, if known already."""
    version, numbers, gauss = agent["rng"]
    rest = json.dumps(
        {k: v for k, v in agent.items() if k != "plan" and k != "rng"},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    head = rest + (text(agent["plan"]) if plan is None else plan) + text([version, gauss])
    return hashlib.sha256(head.encode("utf-8") + _words(numbers)).hexdigest()


def digest(state: dict, schema: int = DIGEST_SCHEMA, agents: dict[str, str] | None = None) -> str:
    """The digest of a `Simulation.get_state()` as a checkpoint of `schema` has it; `agents`:
    each agent's `agent_digest`, if known already (schema 5 on)."""
    if schema < DIGEST_SCHEMA:
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
    if agents is None:
        agents = {a: agent_digest(s) for a, s in state["agents"].items()}
    return hashlib.sha256(json.dumps({**state, "agents": agents}, sort_keys=True).encode()).hexdigest()
