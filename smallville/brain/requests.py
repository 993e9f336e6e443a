"""Typed questions an agent asks its brain, and their typed answers.

Every request is a frozen dataclass that round-trips through a dict; the sha256 of its
canonical JSON is its identity (`request_key`), used to record and replay answers and to
seed the offline brain. Answers are frozen dataclasses too, checked on construction.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from functools import cache, cached_property
from typing import Any, ClassVar


class Message:
    """Shared behaviour of requests and answers: dict round-trip and a stable key."""

    kind: ClassVar[str] = ""
    registry: ClassVar[dict[str, type]] = {}
    simulated: ClassVar[bool] = True  # asked by a simulation, so a run's record may hold it
    framed: ClassVar[bool] = False  # carries the agent's context, so a `Frame` may lay it out

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        Message.registry[cls.kind] = cls

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **{name: _plain(value) for name, value in _shallow(self).items() if name != "kind"}}

    @cached_property
    def canonical_key(self) -> str:
        """`request_key`, worked out once per message: the engine (a `recall` event names it),
        the recorder and the offline brain each ask it of the same request."""
        text = json.dumps(self, default=_shallow, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        values = {f.name: _tupled(data[f.name]) for f in fields(cls) if f.name in data}
        return cls(**values)


def _plain(value: Any) -> Any:
    """Nested messages and tuples as JSON-ready dicts and lists."""
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def _tupled(value: Any) -> Any:
    """JSON back to what the frozen dataclasses hold: tuples, and nested messages by kind."""
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    if isinstance(value, dict) and value.get("kind") in Message.registry:
        return Message.registry[value["kind"]].from_dict(value)
    return value


def request_key(request: Message) -> str:
    """Identity of a request: sha256 of its canonical JSON, 16 hex digits (worked out once per
    request: `Message.canonical_key`)."""
    return request.canonical_key


def _shallow(message: Message) -> dict[str, Any]:
    """`message.to_dict()` one level deep: json encodes tuples as lists itself, and comes back
    here for a nested message, so the whole is the same JSON as `to_dict`'s. A request with no
    `frame` leaves it out, so it keeps the key it had before frames existed."""
    out = {"kind": message.kind, **{name: getattr(message, name) for name in _field_names(type(message))}}
    if out.get("frame", "") is None:
        del out["frame"]
    return out


@cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


# ---- requests -------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame(Message):
    """How a request that carries the agent's context lays it out, and what only the layout
    needs: `style` (`four_part`, seed 003's: who you are, what you recall, the current
    situation, what others around did) and `others`, what the agent sees the people around
    it doing now ("Ann Lee is reading")."""

    kind: ClassVar[str] = "frame"
    style: str
    others: tuple[str, ...] = ()


def frame_of(request: Message) -> Frame | None:
    """The frame `request`'s prompt is laid out in; None: the plain layout."""
    return request.frame if request.framed else None  # type: ignore[attr-defined]


def unframed(request: Message) -> Message:
    """`request` as asked with no frame: what the question is, however it is laid out."""
    if frame_of(request) is None:
        return request
    return replace(request, frame=None)  # type: ignore[type-var]


KIND_WORDS = {
    "observation": "seen",
    "chat": "said",
    "conversation": "conversation",
    "plan": "plan",
    "thought": "thought",
    "reflection": "insight",
    "seed": "background",
}
"""A memory's kind as a prompt names it."""

Recalled = tuple[tuple[str, str], ...]
"""Memories as a prompt shows them: (when, text), `when` relative to the request's moment
("today 09:15", "yesterday 18:30", "Mon 13 Feb 10:02", or "background" for what the agent
knew from the start: `smallville.sim.recall`)."""


@dataclass(frozen=True)
class RateImportance(Message):
    """How poignant is each of these memories, 1 (mundane) to 10 (life-changing)?"""

    kind: ClassVar[str] = "rate_importance"
    agent: str
    name: str
    texts: tuple[str, ...]
    kinds: tuple[str, ...] = ()  # each memory's kind: observation, chat, plan, thought, ...
    identity: str = ""  # who rates: "Ann Lee (34): kind, curious. Currently: ..."

    @property
    def listed(self) -> tuple[tuple[str, str], ...]:
        """Each memory as the prompt lists it: (its kind in a word, its text)."""
        kinds = self.kinds or ("memory",) * len(self.texts)
        return tuple((KIND_WORDS.get(k, k), t) for k, t in zip(kinds, self.texts))


@dataclass(frozen=True)
class TagMemories(Message):
    """Where does each of these memories come from, and what does it make the agent feel?
    (the salience memory model's rating: `smallville.memory.models.salience`)"""

    kind: ClassVar[str] = "tag_memories"
    agent: str
    name: str
    kinds: tuple[str, ...]  # each memory's kind: observation, chat, plan, thought, ...
    texts: tuple[str, ...]
    sources: tuple[str, ...]  # the names a source may take
    emotions: tuple[str, ...]  # the names an emotion may take


@dataclass(frozen=True)
class Summarize(Message):
    """The agent summary description (the paper's section 4.3 preamble): who the agent is,
    what it is busy with, how it feels about its recent progress, each from the memories one
    query retrieved. One request for the paper's three (their answers are independent). The
    day's plan comes with it, as the released code keeps it beside the agent's identity: a
    query does not reliably recall it."""

    kind: ClassVar[str] = "summarize"
    agent: str
    name: str
    persona: str  # the agent file's description beyond `identity`: backstory, lifestyle
    core: Recalled  # memories on its core characteristics
    occupation: Recalled  # ... on its current daily occupation
    progress: Recalled  # ... on its feeling about its recent progress
    now: str = ""  # "Monday, February 13, 2023, 07:00"
    identity: str = ""  # the fixed line the summary follows: name, age, traits, currently
    plan: str = ""  # the day's plan in brief, once made ("Ann Lee's plan for ...: ...")


@dataclass(frozen=True)
class PlanDay(Message):
    """Plan a day: broad strokes (5 to 8) from the agent's summary and yesterday, then
    those strokes in blocks of at most an hour, given the routine and what is remembered.
    `start` (a minute of the day) > 0 re-plans the rest of a day from then on, for `reason`.
    The plan is to cover the day from `asked`, the minute it is asked (`repair.py` fills
    what it leaves out from the routine)."""

    kind: ClassVar[str] = "plan_day"
    framed: ClassVar[bool] = True
    agent: str
    name: str
    persona: str  # the agent summary description
    date: str  # "Monday, February 13, 2023"
    routine: tuple[tuple[int, str, str], ...]  # (minute of day, what, where)
    memories: Recalled
    places: tuple[str, ...]  # the places the agent knows
    yesterday: str = ""  # the previous day's plan, in brief
    start: int = 0
    reason: str = ""
    current: tuple[tuple[int, int, str, str], ...] = ()  # a re-plan: the blocks it replaces
    asked: int = 0  # the minute of the day it is asked
    frame: Frame | None = None  # the layout of its prompt: None, the plain one

    @property
    def plan_from(self) -> int:
        """The minute the plan is to cover the day from: a re-plan's start, else when asked
        (a request that does not say when: the routine's first step)."""
        return self.start or self.asked or min((at for at, _, _ in self.routine), default=7 * 60)


@dataclass(frozen=True)
class Decompose(Message):
    """Break one block of the plan into actions of 5 to 15 minutes, each with the object it
    uses, if any: one in the room the character is in, or one in another room of the
    place (`elsewhere`), which takes it there: the room is chosen action by action."""

    kind: ClassVar[str] = "decompose"
    framed: ClassVar[bool] = True
    agent: str
    name: str
    activity: str
    where: str
    start: int  # minute of day
    end: int
    objects: tuple[str, ...]  # objects in the room the character is in
    memories: Recalled
    reason: str = ""  # why re-planning, when it is a re-plan
    elsewhere: tuple[str, ...] = ()  # objects in the place's other rooms: `object_label`
    identity: str = ""  # "Ann Lee (34): kind, curious. Currently: ..."
    now: str = ""  # "Monday, February 13, 2023, 08:03"
    before: tuple[tuple[int, int, str], ...] = ()  # the plan's block before this one: (start, end, activity)
    after: tuple[tuple[int, int, str], ...] = ()  # ... and the one after it
    frame: Frame | None = None  # the layout of its prompt: None, the plain one

    @property
    def minutes(self) -> int:
        """How long the block (what is left of it) lasts."""
        return self.end - self.start


def object_label(name: str, room: str) -> str:
    """An object of another room as `Decompose.elsewhere` offers it: "bed (Eddy Lin's bedroom)"."""
    return f"{name} ({room})"


def object_of(label: str) -> tuple[str, str]:
    """The name and room of an object as `Decompose` offers it (room "": the one the
    character is in)."""
    name, _, room = label.removesuffix(")").partition(" (")
    return name, room


@dataclass(frozen=True)
class React(Message):
    """Something new was perceived: carry on, talk to someone, wait, or re-plan? With the
    paper's context: the agent's summary, the time, its status, and what it remembers of
    who or what it observed and of what they are doing (two queries; the model sums them up)."""

    kind: ClassVar[str] = "react"
    framed: ClassVar[bool] = True
    agent: str
    name: str
    activity: str
    observations: tuple[str, ...]
    people: tuple[tuple[str, str, str, str], ...]  # (id, name, activity, last talk) of those free to
    # talk; last talk: "yesterday 18:30: Ann talked
    # with ..." or "never talked"
    relationships: tuple[tuple[str, str], ...]  # (id, how the agent sees them)
    memories: Recalled  # on the observed: who or what they are to the agent
    summary: str = ""  # the agent summary description
    now: str = ""  # "Monday, February 13, 2023, 10:30"
    doing: Recalled = ()  # memories on what the observed are doing
    where: str = ""  # the area the agent is in
    frame: Frame | None = None  # the layout of its prompt: None, the plain one


@dataclass(frozen=True)
class Speak(Message):
    """Say the next line of a conversation."""

    kind: ClassVar[str] = "speak"
    framed: ClassVar[bool] = True
    agent: str
    name: str
    listener: str
    listener_name: str
    relationship: str  # the speaker's view of the listener
    history: tuple[tuple[str, str], ...]  # (speaker name, line) so far
    memories: tuple[tuple[str, str, int, str], ...]  # (when, text, importance, kind) the speaker recalls;
    # the prompt shows when and text
    earlier: tuple[str, ...]  # lines of earlier talks between the two (the offline
    # brain's; the prompt shows `last_talk` instead)
    summary: str = ""  # the speaker's summary description
    now: str = ""  # "Monday, February 13, 2023, 10:30"
    where: str = ""  # the area they talk in
    doing: str = ""  # what the speaker was doing when the talk began
    listener_doing: str = ""  # ... and the listener
    last_talk: str = ""  # their last conversation, dated: "yesterday 18:30: ..."
    frame: Frame | None = None  # the layout of its prompt: None, the plain one


@dataclass(frozen=True)
class AfterTalk(Message):
    """A conversation is over: what one side keeps of it. The summary becomes a memory, the
    planning thought and the memo (what to keep in mind: "I told Maria I'd come at 5")
    become thoughts, and the view of the other is written again from memory (the paper's
    conversation memory and `reflect.py`'s planning thought and memo, in one request)."""

    kind: ClassVar[str] = "after_talk"
    framed: ClassVar[bool] = True
    agent: str
    name: str
    other: str
    other_name: str
    view: str  # the view of the other before the talk
    lines: tuple[tuple[str, str], ...]  # (speaker name, line)
    memories: Recalled  # what the agent remembers of the other
    now: str = ""  # "Monday, February 13, 2023, 10:30"
    where: str = ""  # the area they talked in
    frame: Frame | None = None  # the layout of its prompt: None, the plain one


@dataclass(frozen=True)
class ReflectQuestions(Message):
    """Which high-level questions do these recent memories raise?"""

    kind: ClassVar[str] = "reflect_questions"
    agent: str
    name: str
    memories: Recalled
    count: int = 3


@dataclass(frozen=True)
class Insights(Message):
    """What follows from this evidence? Each insight cites the evidence it rests on; the
    insights the agent already holds (`known`, its latest) are not to be given again."""

    kind: ClassVar[str] = "insights"
    agent: str
    name: str
    question: str
    evidence: Recalled
    known: tuple[str, ...] = ()


@dataclass(frozen=True)
class Interview(Message):
    """Answer a question put to the agent, as the agent, from what it remembers."""

    kind: ClassVar[str] = "interview"
    simulated: ClassVar[bool] = False  # asked of a run from outside: never in its record
    agent: str
    name: str
    persona: str
    question: str
    memories: tuple[tuple[int, str, str], ...]  # (memory id, when, text), most relevant first
    now: str = ""  # "Tuesday, February 14, 2023, 20:00"


@dataclass(frozen=True)
class Judge(Message):
    """Rank anonymised answers of versions of one agent to one question by how believable
    they are, and flag claims an answer makes that its version's memories do not hold."""

    kind: ClassVar[str] = "judge"
    agent: str
    name: str
    persona: str
    question: str
    answers: tuple[tuple[str, str], ...]  # (label, answer), in the order shown
    lived: tuple[tuple[str, str], ...]  # (label, memory text): what that version's run holds


# ---- answers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary(Message):
    kind: ClassVar[str] = "summary"
    core: str
    occupation: str
    progress: str

    def parts(self) -> list[str]:
        """Its parts that say something, in order."""
        return [p.strip() for p in (self.core, self.occupation, self.progress) if p.strip()]


@dataclass(frozen=True)
class TalkNotes(Message):
    kind: ClassVar[str] = "talk_notes"
    summary: str  # "conversing with Maria about the party"
    thought: str  # for planning: "I should get the cafe ready for the party"
    memo: str  # what to keep in mind: "I told Maria I'd come at 5"
    view: str  # the relationship, seen anew
    topic: str = ""  # what the talk was about, in a few words


@dataclass(frozen=True)
class Importance(Message):
    kind: ClassVar[str] = "importance"
    scores: tuple[int, ...]

    def __post_init__(self) -> None:
        for score in self.scores:
            if not isinstance(score, int) or not 1 <= score <= 10:
                raise ValueError(f"importance {score!r} is not an integer 1..10")


@dataclass(frozen=True)
class Tag(Message):
    kind: ClassVar[str] = "tag"
    source: str
    emotion: str


@dataclass(frozen=True)
class Tags(Message):
    kind: ClassVar[str] = "tags"
    tags: tuple[Tag, ...]


@dataclass(frozen=True)
class Block(Message):
    kind: ClassVar[str] = "block"
    start: int  # minute of the plan's day; may pass 1440 (after midnight)
    end: int  # a model's block may end before it starts: repair.py drops it
    activity: str
    where: str
    sleep: bool = False  # the agent sleeps through it (whatever the activity's words)


@dataclass(frozen=True)
class DayPlan(Message):
    kind: ClassVar[str] = "day_plan"
    blocks: tuple[Block, ...]
    broad: tuple[str, ...] = ()  # the day in 5 to 8 broad strokes


@dataclass(frozen=True)
class Step(Message):
    kind: ClassVar[str] = "step"
    minutes: int  # 5..15; a model's may be out of range: repair.py clamps it
    description: str
    object: str | None = None


@dataclass(frozen=True)
class Actions(Message):
    kind: ClassVar[str] = "actions"
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Reaction(Message):
    kind: ClassVar[str] = "reaction"
    action: str  # "continue" | "talk" | "wait" | "replan"
    target: str | None = None  # whom to talk to
    reason: str = ""
    minutes: int = 0  # how long to wait
    thought: str = ""  # what the model made of the moment before deciding

    def __post_init__(self) -> None:
        if self.action not in ("continue", "talk", "wait", "replan"):
            raise ValueError(f"unknown reaction {self.action!r}")


@dataclass(frozen=True)
class Utterance(Message):
    kind: ClassVar[str] = "utterance"
    text: str
    end: bool = False
    topic: str = ""  # what the conversation is about, in a few words ("" : unchanged)


@dataclass(frozen=True)
class Questions(Message):
    kind: ClassVar[str] = "questions"
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Insight(Message):
    kind: ClassVar[str] = "insight"
    text: str
    because: tuple[int, ...] = field(default=())  # indexes into the request's evidence


@dataclass(frozen=True)
class InsightList(Message):
    kind: ClassVar[str] = "insight_list"
    insights: tuple[Insight, ...]


@dataclass(frozen=True)
class Reply(Message):
    kind: ClassVar[str] = "reply"
    text: str
    cites: tuple[int, ...] = ()  # ids of the memories the answer rests on


@dataclass(frozen=True)
class Flag(Message):
    kind: ClassVar[str] = "flag"
    answer: str  # the label of the answer
    claim: str  # what it claims that its memories do not hold


@dataclass(frozen=True)
class Verdict(Message):
    kind: ClassVar[str] = "verdict"
    ranking: tuple[str, ...]  # labels, most believable first; () = no judgement
    embellished: tuple[Flag, ...] = ()
