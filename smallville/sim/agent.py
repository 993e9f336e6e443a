"""An agent's state: who they are, where they are going, and what they remember."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from smallville.memory import MemoryStream


@dataclass(frozen=True)
class PlanBlock:
    """A block of the day plan in absolute simulated seconds."""

    start: float
    end: float
    activity: str
    where: str


@dataclass(frozen=True)
class Action:
    """One 5-15 minute action in absolute simulated seconds."""

    start: float
    end: float
    description: str
    object: str | None


@dataclass
class Agent:
    """Everything the engine tracks about one person; behaviour lives in `life`."""

    id: str
    spec: object                        # smallville.scenario.AgentSpec
    stream: MemoryStream
    rng: random.Random
    plan: list[PlanBlock] = field(default_factory=list)
    plan_day: int = -1                  # day index (0 = the scenario's first date) of `plan`
    block: PlanBlock | None = None
    queue: deque = field(default_factory=deque)
    activity: str = "settling in"
    status: str = "idle"                # idle | acting | walking | sleeping | talking
    free_to_talk: bool = False
    process: object = None
    since_reflection: float = 0.0
    relationships: dict[str, str] = field(default_factory=dict)
    talks: dict[str, int] = field(default_factory=dict)
    last_talk: dict[str, float] = field(default_factory=dict)
    earlier_lines: dict[str, list[str]] = field(default_factory=dict)
    seen: dict[str, str] = field(default_factory=dict)
    knows: set[str] = field(default_factory=set)
    reason: str = ""                    # why the next decomposition is a re-plan
    alerts: list[str] = field(default_factory=list)   # world events seen since the last look

    @property
    def name(self) -> str:
        return self.spec.name

    def persona(self) -> str:
        """A short description of the person for the brain."""
        s = self.spec
        parts = [f"{s.name}" + (f", {s.age}" if s.age else ""), s.traits, s.backstory, s.currently, s.lifestyle]
        return ". ".join(p.strip().rstrip(".") for p in parts if p and p.strip()) + "."

    def block_at(self, t: float) -> PlanBlock | None:
        return next((b for b in self.plan if b.start <= t < b.end), None)

    def next_block(self, t: float) -> PlanBlock | None:
        return next((b for b in self.plan if b.start > t), None)
