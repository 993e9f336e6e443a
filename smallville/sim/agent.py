"""An agent's state: who they are, where they are going, and what they remember.

All of it is data: `get_state()` gives it as JSON (the memory stream is saved on its
own), and `set_state()` puts it back, so a checkpoint can bring an agent back to life in
the middle of whatever it was doing (`Doing`).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import NamedTuple

from smallville.brain.text import mentions_sleep
from smallville.memory import MemoryStream
from smallville.memory.models import Mind


class Phase(str, Enum):
    """What an agent is doing, in one vocabulary for the engine, its states and its readers.

    An agent's `status`, what others see of it, is one of idle, acting, walking, sleeping and
    talking; the wait its process is in (`Doing.phase`) is one of waiting (idle or acting,
    open to a conversation), walking, sleeping, talking (leading a conversation, between its
    lines) and listening (drawn into one). A status knows which may follow it (`follows`):
    a sleeper only wakes, and a talk ends idle."""

    IDLE = "idle"
    ACTING = "acting"
    WALKING = "walking"
    SLEEPING = "sleeping"
    TALKING = "talking"
    WAITING = "waiting"
    LISTENING = "listening"

    def __str__(self) -> str:
        return self.value

    def follows(self, before: Phase) -> bool:
        """Whether an agent's status may become this one from `before`."""
        return self in _NEXT[before]


_NEXT: dict[Phase, frozenset[Phase]] = {
    Phase.IDLE: frozenset({Phase.IDLE, Phase.ACTING, Phase.WALKING, Phase.SLEEPING, Phase.TALKING}),
    Phase.ACTING: frozenset({Phase.IDLE, Phase.ACTING, Phase.WALKING, Phase.SLEEPING, Phase.TALKING}),
    Phase.WALKING: frozenset({Phase.IDLE, Phase.WALKING, Phase.ACTING, Phase.SLEEPING}),
    Phase.SLEEPING: frozenset({Phase.IDLE, Phase.SLEEPING}),
    Phase.TALKING: frozenset({Phase.IDLE, Phase.TALKING}),
}
STATUSES = frozenset(_NEXT)
WAITS = frozenset({Phase.WAITING, Phase.WALKING, Phase.SLEEPING, Phase.TALKING, Phase.LISTENING})


class PlanBlock(NamedTuple):
    """A block of the day plan in absolute simulated seconds; `sleep`: the agent sleeps
    through it."""

    start: float
    end: float
    activity: str
    where: str
    sleep: bool = False

    @classmethod
    def of_state(cls, data: list) -> PlanBlock:
        """A block as a state holds it; one saved before blocks said whether they are sleep
        is sleep when its activity says so."""
        return cls(*data) if len(data) > 4 else cls(*data, sleep=mentions_sleep(data[2]))


class Action(NamedTuple):
    """One 5-15 minute action in absolute simulated seconds, with the object it uses (if
    any), the room it happens in ("": wherever the agent is) and the request it came of."""

    start: float
    end: float
    description: str
    object: str | None
    area: str = ""
    req: int | None = None  # the request (the agent's number) whose answer it is, if any


@dataclass(frozen=True)
class Doing:
    """What an agent is in the middle of while simulated time passes, and what comes after.

    `phase` is one of `WAITS` (`Phase`). `until` is when it next wakes (None while listening:
    the conversation's end wakes it) and `order` the engine's count of waits when it began: agents that wake at the same
    time go on in that order. A walk says what follows it (`then`: "live", "use" the object
    `thing`, or "sleep" in the bed `thing`), and so does a wait (`then`: "attend", the
    action goes on, looking around again, or "live"); `where` is the area a sleep began in; `talk`
    names the conversation."""

    phase: Phase
    until: float | None = None
    order: int = 0
    tile: tuple[int, int] | None = None
    then: str = "live"
    thing: int | None = None  # index into world.things
    where: str = ""
    talk: str | None = None

    def __post_init__(self) -> None:
        if self.phase not in WAITS:
            raise ValueError(f"an agent cannot be waiting as {self.phase!r}")
        object.__setattr__(self, "phase", Phase(self.phase))

    def to_dict(self) -> dict:
        # its fields are all plain values (a tile a tuple): no deep copy (asdict) needed
        data = {**vars(self), "phase": self.phase.value}
        if self.tile is not None:
            data["tile"] = list(self.tile)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Doing:
        return cls(**{**data, "tile": tuple(data["tile"]) if data.get("tile") else None})


@dataclass
class Conversation:
    """A conversation under way: `a` began it with `b`; `lines` are (speaker name, text)
    so far, `turn` counts them, and `ending` says why it will end after the pause that
    follows the last line (`goodbye`, `repeat`), or None. `done` (a SimPy event, not state)
    succeeds when it is over."""

    id: str
    a: str
    b: str
    lines: list[tuple[str, str]] = field(default_factory=list)
    turn: int = 0
    ending: str | None = None
    done: object = None
    doing: tuple[str, str] = ("", "")  # what `a` and `b` were doing when it began

    def get_state(self) -> dict:
        return {
            "id": self.id,
            "a": self.a,
            "b": self.b,
            "lines": [list(x) for x in self.lines],
            "turn": self.turn,
            "ending": self.ending,
            "doing": list(self.doing),
        }

    @classmethod
    def from_state(cls, state: dict, done) -> Conversation:
        return cls(
            state["id"],
            state["a"],
            state["b"],
            [tuple(x) for x in state["lines"]],
            state["turn"],
            state["ending"],
            done,
            tuple(state.get("doing", ("", ""))),
        )


@dataclass
class Agent:
    """Everything the engine tracks about one person; behaviour lives in `life`."""

    id: str
    spec: object  # smallville.scenario.AgentSpec
    _stream: MemoryStream | Callable[[], MemoryStream]  # or what reads it, on first use (a restore)
    rng: random.Random
    plan: list[PlanBlock] = field(default_factory=list)
    plan_day: int = -1  # day index (0 = the scenario's first date) of `plan`
    block: PlanBlock | None = None  # always one of `plan`'s blocks, or None
    queue: deque = field(default_factory=deque)
    action: Action | None = None  # the action under way (or last done)
    activity: str = "settling in"
    status: Phase = Phase.IDLE  # one of `STATUSES`: what others see the agent doing
    doing: Doing | None = None
    holding: int | None = None  # the object (index into world.things) in use
    free_to_talk: bool = False
    process: object = None
    since_reflection: float = 0.0
    since_count: int = 0  # memories counted into since_reflection (`reflection.min_memories`)
    relationships: dict[str, str] = field(default_factory=dict)
    talks: dict[str, int] = field(default_factory=dict)
    last_talk: dict[str, float] = field(default_factory=dict)
    talked: dict[str, str] = field(default_factory=dict)  # other -> how its last talk with them went, in a sentence
    earlier_lines: dict[str, list[str]] = field(default_factory=dict)
    seen: dict[str, str] = field(default_factory=dict)
    knows: set[str] = field(default_factory=set)
    reason: str = ""  # why the next decomposition is a re-plan
    alerts: list[str] = field(default_factory=list)  # world events seen since the last look
    working: object = None  # the salience memory model's state (`memory.models.Mind`), if it is used
    summary: str = ""  # the agent summary description (life.describe)
    yesterday: str = ""  # the last day's plan, in broad strokes
    day_before: str = ""  # the plan of the day before that (a re-plan's yesterday)
    places: set[str] = field(default_factory=set)  # the places (sectors) it has seen or been told of

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def stream(self) -> MemoryStream:
        if not isinstance(self._stream, MemoryStream):
            self._stream = self._stream()
        return self._stream

    @stream.setter
    def stream(self, stream: MemoryStream | Callable[[], MemoryStream]) -> None:
        self._stream = stream

    def persona(self) -> str:
        """A short description of the person for the brain."""
        s = self.spec
        parts = [f"{s.name}" + (f", {s.age}" if s.age else ""), s.traits, s.backstory, s.currently, s.lifestyle]
        return ". ".join(p.strip().rstrip(".") for p in parts if p and p.strip()) + "."

    def identity(self) -> str:
        """The fixed line every prompt about the person keeps as it is: name, age and innate
        traits, then what occupies them (`currently`): "Ann Lee (30): curious, kind.
        Currently: baking for the fair." (the paper keeps these out of the model's summary)."""
        s = self.spec
        line = s.name + (f" ({s.age})" if s.age else "")
        line += f": {_sentence(s.traits)}" if _sentence(s.traits) else "."
        return line + (f" Currently: {_sentence(s.currently)}" if _sentence(s.currently) else "")

    def background(self) -> str:
        """The rest of the person's description: backstory and lifestyle."""
        return " ".join(_sentence(p) for p in (self.spec.backstory, self.spec.lifestyle) if _sentence(p))

    def known_places(self) -> tuple[str, ...]:
        return tuple(sorted(self.places))

    def block_at(self, t: float) -> PlanBlock | None:
        return next((b for b in self.plan if b.start <= t < b.end), None)

    def next_block(self, t: float) -> PlanBlock | None:
        return next((b for b in self.plan if b.start > t), None)

    def become(self, status: Phase, activity: str | None = None) -> None:
        """Go on as `status` (doing `activity`, if given); a move no agent can make (a sleeper
        who starts talking) is an engine error, never a quiet change."""
        if not status.follows(self.status):
            raise RuntimeError(f"agent {self.id} cannot go from {self.status} to {status}")
        self.status = status
        if activity is not None:
            self.activity = activity

    # ---- state ----------------------------------------------------------------------

    def get_state(self) -> dict:
        """Everything but the memory stream, as JSON (`memories`: how many it holds)."""
        rng = self.rng.getstate()
        state = {
            "plan": [list(b) for b in self.plan],
            "plan_day": self.plan_day,
            "block": next((i for i, b in enumerate(self.plan) if b is self.block), None),
            "queue": [list(a) for a in self.queue],
            "action": list(self.action) if self.action else None,
            "activity": self.activity,
            "status": self.status.value,
            "doing": self.doing.to_dict() if self.doing else None,
            "holding": self.holding,
            "free_to_talk": self.free_to_talk,
            "since_reflection": self.since_reflection,
            "since_count": self.since_count,
            "relationships": dict(sorted(self.relationships.items())),
            "talks": dict(sorted(self.talks.items())),
            "last_talk": dict(sorted(self.last_talk.items())),
            "earlier_lines": {k: list(v) for k, v in sorted(self.earlier_lines.items())},
            "seen": dict(sorted(self.seen.items())),
            "knows": sorted(self.knows),
            "reason": self.reason,
            "alerts": list(self.alerts),
            "mind": {
                "places": sorted(self.places),
                "summary": self.summary,
                "yesterday": self.yesterday,
                "day_before": self.day_before,
                "talked": dict(sorted(self.talked.items())),
            },
            "memories": len(self.stream),
            "rng": [rng[0], list(rng[1]), rng[2]],
        }
        if self.working is not None:
            state.update(self.working.get_state())
        return state

    def set_state(self, state: dict) -> None:
        """Put back what `get_state` gave (the stream is restored separately)."""
        self.plan = [PlanBlock.of_state(b) for b in state["plan"]]
        self.plan_day = state["plan_day"]
        self.block = self.plan[state["block"]] if state["block"] is not None else None
        self.queue = deque(Action(*a) for a in state["queue"])  # states before rooms: no `area`
        self.action = Action(*state["action"]) if state["action"] else None
        self.activity, self.status = state["activity"], Phase(state["status"])
        self.doing = Doing.from_dict(state["doing"]) if state["doing"] else None
        self.holding = state["holding"]
        self.free_to_talk, self.since_reflection = state["free_to_talk"], state["since_reflection"]
        self.since_count = state.get("since_count", 0)  # states before `reflection.min_memories`: 0
        self.relationships = dict(state["relationships"])
        self.talks = dict(state["talks"])
        self.last_talk = dict(state["last_talk"])
        self.earlier_lines = {k: list(v) for k, v in state["earlier_lines"].items()}
        self.seen = dict(state["seen"])
        self.knows = set(state["knows"])
        self.reason, self.alerts = state["reason"], list(state["alerts"])
        mind = state.get("mind", {})  # states written before it: nothing known yet
        self.summary, self.yesterday = mind.get("summary", ""), mind.get("yesterday", "")
        self.day_before = mind.get("day_before", "")
        self.places = set(mind.get("places", ()))
        self.talked = dict(mind.get("talked", {}))
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
        if "working" in state:
            self.working = Mind.from_state(state)


def _sentence(text: str | None) -> str:
    """A description's part as a sentence: stripped, with one full stop ("" if none)."""
    text = (text or "").strip().rstrip(".")
    return text[0].upper() + text[1:] + "." if text else ""
