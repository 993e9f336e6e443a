"""The simulation root: one object owns the clock, the world, the agents, the brain and the log."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from functools import partial

import simpy

from smallville import events
from smallville.brain.base import Brain
from smallville.brain.requests import Message, request_key
from smallville.memory import INDEXES, MemoryStream
from smallville.memory.models import memory_model
from smallville.memory.scoring import Helpers
from smallville.scenario.memorymodel import WEIGHT_PRESETS, MemoryModel, resolve_weights
from smallville.sim import life, recall
from smallville.sim.agent import Agent, Conversation, Doing, Phase
from smallville.sim.dispatch import Dispatcher
from smallville.sim.frame import framed
from smallville.sim.log import EventLog
from smallville.sim.recalls import RecallNotes
from smallville.timefmt import moment
from smallville.world import World
from smallville.world.grid import normalize_area, room_open_to


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the architecture; the defaults follow the paper."""

    weights: tuple[float, float, float] | str | None = None  # recency, importance, relevance, or a preset's
    # name (paper, original); None: the scenario's
    # None below: the memory model's (`memory.decay`, `memory.reflection`; the paper's by default)
    decay: float | None = None  # recency decay per game hour
    reflection_threshold: float | None = None
    reflection_questions: int | None = None
    reflection_window: int | None = None
    evidence_k: int = 10
    retrieve_k: int = 5
    plan_k: int = 10
    react_k: int = 5
    talk_k: int = 15
    max_turns: int = 8
    earlier_lines: int = 40
    talk_cooldown: float = 2 * 3600.0
    perceive_every: float = 5 * 60.0  # seconds between looks around during an action
    # ablations (experiments): each part of the architecture can be switched off
    retrieval: bool = True  # off: requests carry no memories (nothing is recalled)
    reflection: bool = True  # off: agents never reflect
    planning: bool = True  # off: the day follows the routine, one action per block, no re-planning
    sharing: bool = True  # off: speakers are given no memories, so they pass on no news
    index: str | None = None  # memory index, "exact" or "hnsw"; None: the scenario's (`memory.index`)
    memory: MemoryModel | str | dict | None = None  # the memory model (paper, salience) and its settings;
    # None: the scenario's (`memory.model`)

    def __post_init__(self) -> None:
        if self.index is not None and self.index not in INDEXES:
            raise ValueError(f"index must be one of {', '.join(INDEXES)}, got {self.index!r}")
        if self.weights is not None:
            object.__setattr__(self, "weights", resolve_weights(self.weights))
        if self.memory is not None:
            object.__setattr__(self, "memory", MemoryModel.of(self.memory))
            if self.index == "hnsw" and self.memory.normalize == "fixed":
                raise ValueError("normalize: fixed needs the exact index, not hnsw")

    def to_dict(self) -> dict:
        return {
            k: (list(v) if isinstance(v, tuple) else v.to_dict() if isinstance(v, MemoryModel) else v)
            for k, v in self.__dict__.items()
        }

    @classmethod
    def from_dict(cls, data: dict | None) -> SimConfig:
        """The config a manifest recorded (keys this version lacks are ignored)."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in (data or {}).items() if k in known})


def resolved(config: SimConfig, scenario) -> SimConfig:
    """`config` with the knobs it leaves to the memory model (None) taken from it: the
    weights (else the scenario's `memory.weights`, else the paper's), the decay and the
    reflection's threshold, questions and window."""
    memory, reflection = config.memory, config.memory.reflection
    weights = config.weights or memory.weights or scenario.memory_weights or WEIGHT_PRESETS["paper"]
    pick = {
        "decay": memory.decay,
        "reflection_threshold": reflection.threshold,
        "reflection_questions": reflection.questions,
        "reflection_window": reflection.window,
    }
    return replace(config, weights=weights, **{k: v for k, v in pick.items() if getattr(config, k) is None})


STATE_SCHEMA = 2


class FirstAtItsTime(simpy.events.Event):
    """An event `delay` seconds from now that goes before every ordinary event (timeouts,
    requests) of its instant."""

    def __init__(self, env: simpy.Environment, delay: float) -> None:
        super().__init__(env)
        self._ok, self._value = True, None
        env.schedule(self, simpy.events.URGENT, delay)


class Simulation:
    """A scenario brought to life: call `run(until)` to advance simulated time. With
    `streams` (agent id -> memory stream) it holds only those agents, with those streams:
    part of a town, as run-ahead's copies are."""

    def __init__(
        self,
        scenario,
        brain: Brain,
        embedder,
        *,
        seed: int | None = None,
        config: SimConfig | None = None,
        log: EventLog | None = None,
        world: World | None = None,
        streams: dict[str, MemoryStream] | None = None,
    ) -> None:
        self.scenario = scenario
        self.config = config or SimConfig()
        if self.config.index is None:
            self.config = replace(self.config, index=scenario.memory_index)
        if self.config.memory is None:
            self.config = replace(self.config, memory=scenario.memory_model)
        self.config = resolved(self.config, scenario)
        self.memory = memory_model(self.config.memory)  # how agents store, recall and reflect
        self.seed = scenario.seed if seed is None else seed
        self.env = simpy.Environment()
        self.world = world or World.from_map(scenario.map)  # `world`: a copy of another's (`World.copy`)
        self.tick = scenario.tick
        self.log = log or EventLog(scenario.start)
        self.dispatch = Dispatcher(
            self.env,
            brain,
            on_fallback=lambda agent, fb: self.emit(
                events.BRAIN_FALLBACK, agent, kind=fb.kind, key=fb.key, error=fb.error
            ),
        )
        self.dispatch.on_repair = lambda agent, request, notes: self.emit(
            events.BRAIN_REPAIR, agent, kind=request.kind, key=request_key(request), repairs=list(notes)
        )
        self.brain = brain
        self.embedder = embedder
        self.recalls = RecallNotes()  # what each agent retrieved for the request it is about to make
        self._because: int | None = None  # the request a memory being stored came of (`store`)
        self.counts: Counter[str] = Counter()
        self.places = self.world.grid.places
        self.object_names = frozenset(t.name for t in self.world.things)  # what "X is idle" may be about
        self._start_of_day = scenario.start.hour * 3600 + scenario.start.minute * 60 + scenario.start.second
        self.agents: dict[str, Agent] = {}
        self.helpers = Helpers()  # its streams' search threads, ended by `close`
        self._closers: list = []
        for spec in sorted(scenario.agents, key=lambda s: s.id):
            if streams is not None and spec.id not in streams:
                continue  # part of a town (run-ahead's copies): only those given
            stream = (
                streams[spec.id]
                if streams is not None
                else MemoryStream(
                    dim=embedder.dim,
                    weights=self.config.weights,
                    decay=self.config.decay,
                    embedder=embedder,
                    index=self.config.index,
                    helpers=self.helpers,
                    normalize=self.config.memory.normalize,
                )
            )
            agent = Agent(spec.id, spec, stream, random.Random(f"{self.seed}:agent:{spec.id}"))
            agent.relationships = dict(spec.relationships)
            agent.places = self.first_places(spec)
            self.agents[spec.id] = agent
            self.world.place(spec.id, self.pick_tile(agent, spec.start_at or spec.home))
        self.probe_start: dict[str, list[str]] = {}
        self.conversations: dict[str, Conversation] = {}
        self.waits = 0  # waits begun so far: ties in wake-up time go in this order
        self.pending_events: dict[int, int] = {}  # scenario event (index) -> order of its wait
        self.checkpointed = None  # what the last checkpoint written or restored holds (checkpoint.Saved)
        self._started = False

    # ---- running --------------------------------------------------------------------

    def run(self, until: float, step: float = 900.0, on_step=None, stops: tuple[float, ...] = ()) -> None:
        """Advance to simulated second `until`, calling `on_step(now)` at every multiple of
        `step` and at each of `stops` on the way."""
        self.until = until
        self.start()
        t = self.env.now
        while t < until:
            t = min([until, (t // step + 1) * step] + [s for s in stops if s > t])
            self.env.run(until=t)
            self.log.flush()
            if on_step:
                on_step(t)

    def on_close(self, closer) -> None:
        """Have `close` call `closer` too: what was built for this simulation alone, such as
        the brain stack of a state rebuilt for inspect (`Run.state_at`)."""
        self._closers.append(closer)

    def close(self) -> None:
        """End the threads it holds: its streams' search helpers and what `on_close` was
        given. It can still be read (a later search starts helpers again)."""
        while self._closers:
            self._closers.pop()()
        self.helpers.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        """Bring the town to life (seed memories, then everyone's day), unless it has been
        already; `run` does it."""
        if not self._started:
            self._started = True
            self.env.process(self._begin())

    def inject(self, agent_id: str, thought: str) -> None:
        """A thought put into an agent's head now (a researcher's intervention)."""
        self.emit(events.EVENT, agent_id, what=thought, whisper=True, injected=True)
        self.env.process(life.remember(self, self.agents[agent_id], [thought], "thought"))

    def reseed(self, seed: int) -> None:
        """Draw every agent's random choices from now on from `seed` (a fork with another
        seed; its brain is made with that seed too)."""
        self.seed = seed
        for agent in self.agents.values():
            agent.rng = random.Random(f"{seed}:agent:{agent.id}")

    def use_brain(self, brain: Brain) -> None:
        """Have `brain` answer from now on (a fork goes its own way from its parent's record)."""
        self.brain = self.dispatch.brain = brain

    def use_dispatcher(self, dispatch: Dispatcher) -> None:
        """Have `dispatch` gather and answer requests from now on; it goes on from where the
        current one stands (`Dispatcher.take_over`)."""
        self.dispatch = dispatch

    def at_each_tick(self, callback) -> None:
        """Call `callback()` at every tick of the clock from now on, before anything else
        happens at that instant: everyone is then between steps, as `get_state` needs."""
        self.env.process(self._ticks(callback))

    def _ticks(self, callback):
        while True:
            delay = (math.floor(self.env.now / self.tick + 1e-9) + 1) * self.tick - self.env.now
            yield FirstAtItsTime(self.env, delay)
            callback()

    def seeded(self) -> None:
        """Store everyone's seed memories and stop there, before anyone's day begins: the town
        at its start, as the first instant begins it, without the instant's planning (the view
        of a big town's first hour, `smallville.run.shown`)."""
        if not self._started:
            self._started = True
            self.env.run(until=self.env.process(self._seed_everyone()))

    def _seed_everyone(self):
        seeding = [self.env.process(self._seed(agent)) for agent in self.agents.values()]
        yield self.env.all_of(seeding)
        self.probe_start = self.probe_knowers()

    def _begin(self):
        yield from self._seed_everyone()
        for agent in self.agents.values():
            self.emit(
                events.SPAWN, agent.id, tile=list(self.world.position(agent.id)), area=self.world.area_of(agent.id)
            )
            self._live(agent)
        for i, event in enumerate(self.scenario.events):
            if event.at >= 0:
                self.env.process(self._world_event(i))

    def _seed(self, agent: Agent):
        """Store an agent's seed memories, oldest first, those without an importance rated
        together in one request."""
        seeds = sorted(
            list(agent.spec.memories) + list(self.scenario.memories.get(agent.id, ())), key=lambda m: m.at or 0.0
        )
        yield from life.remember(
            self,
            agent,
            [s.text for s in seeds],
            "seed",
            [s.importance for s in seeds],
            created=[s.at or 0.0 for s in seeds],
        )

    def _world_event(self, index: int, order: int | None = None):
        event = self.scenario.events[index]
        if order is None:
            self.waits += 1
            order = self.waits
        self.pending_events[index] = order
        yield self.env.timeout(event.at - self.env.now)
        del self.pending_events[index]
        if event.agent:
            if event.agent not in self.agents:  # part of a town: a whisper to someone not in it
                return
            self.emit(events.EVENT, event.agent, what=event.what, whisper=True)
            yield from life.remember(self, self.agents[event.agent], [event.what], "thought")
            return
        present = [a for a in self.world.agents_in(event.where) if self.agents[a].status != Phase.SLEEPING]
        self.emit(events.EVENT, None, what=event.what, where=event.where, present=present)
        for agent_id in present:
            self.agents[agent_id].alerts.append(event.what)
        yield self.env.all_of(
            [self.env.process(life.remember(self, self.agents[a], [event.what], "observation")) for a in present]
        )

    # ---- services for agents ---------------------------------------------------------

    def wait(self, agent: Agent, doing: Doing, order: int | None = None) -> simpy.Event:
        """An event at `doing.until`, with `doing` recorded as what the agent is in the
        middle of. `order` is given only by a restored agent going on with its wait."""
        if order is None:
            self.waits += 1
            order = self.waits
        agent.doing = replace(doing, order=order)
        return self.env.timeout(doing.until - self.env.now)

    def begin_talk(self, a: Agent, b: Agent) -> Conversation:
        talk = Conversation(
            f"{self.env.now:g}:{a.id}:{b.id}", a.id, b.id, done=self.env.event(), doing=(a.activity, b.activity)
        )
        self.conversations[talk.id] = talk
        return talk

    def end_talk(self, talk: Conversation) -> None:
        del self.conversations[talk.id]
        talk.done.succeed()

    def ask(self, agent: Agent, request: Message) -> simpy.Event:
        """The brain's answer to `request`, as an event; what the agent retrieved for it is
        logged first (a `recall` event naming the request's number, `asked`). The run's
        `memory.frame` lays out a request that carries the agent's context (`sim.frame`)."""
        request = framed(self, agent, request)
        event = self.dispatch.ask(agent.id, request)
        recalled = self.recalls.take(agent.id)
        if recalled:
            self.emit(
                events.RECALL,
                agent.id,
                req=self.asked(agent),
                request=request.kind,
                key=request_key(request),
                queries=recalled,
            )
        return event

    def asked(self, agent: Agent) -> int:
        """The number of the agent's latest request (1 for its first): what a decision's
        event names as the request it came of."""
        return self.dispatch.sequence(agent.id)

    def store(
        self,
        agent: Agent,
        text: str,
        kind: str,
        importance,
        links=(),
        created=None,
        said: events.Said | None = None,
        req: int | None = None,
    ) -> int | None:
        """Store one memory as the memory model does (`importance`: the rating it asked for):
        its id in the agent's stream, or None when the model did not keep it. `req`: the
        agent's request whose answer the memory is (a plan, a thought, an insight)."""
        self._because = req
        try:
            return self.memory.store(self, agent, text, kind, importance, links, created, said)
        finally:
            self._because = None

    def keep(
        self,
        agent: Agent,
        text: str,
        kind: str,
        importance: int,
        links=(),
        created=None,
        said: events.Said | None = None,
        **tags,
    ) -> int:
        """Add one memory to an agent's stream, and log it (a chat line with who `said` it to
        whom; `tags`: what the memory model adds to the event)."""
        at = self.env.now if created is None else created
        mid = agent.stream.add(text, importance=importance, created=at, kind=kind, links=tuple(links))
        self.count("memories")
        if kind == "reflection":
            self.count("reflections")
        if self.memory.counts_toward_reflection(kind):  # the paper: perceived events only
            agent.since_reflection += importance
            agent.since_count += 1
        self.emit(
            events.MEMORY,
            agent.id,
            id=mid,
            kind=kind,
            importance=importance,
            text=text,
            links=list(links) or None,
            **(asdict(said) if said else {}),
            **tags,
            req=self._because,
        )
        low = text.lower()
        agent.places.update(self.world.grid.mentions.found_in(low))  # places it is told of
        for probe in self.scenario.probes:
            if probe.name not in agent.knows and all(w in low for w in probe.match):
                agent.knows.add(probe.name)
                self.emit(events.LEARNED, agent.id, probe=probe.name, memory=mid)
        return mid

    def recalling(self, agent: Agent, queries) -> simpy.Event:
        """What an agent waits on before it retrieves `queries` (`retrieve`): it goes on after
        every other agent due at this instant has gone on to its own wait, so the embedder
        starts on all their queries (and on the memories they just stored) together, in
        another process, rather than on each as its agent searches. Always a wait, whatever
        the embedder, so the order of a run's events does not depend on it."""
        self.expect(agent, queries)
        return self.env.timeout(0)

    def expect(self, agent: Agent, queries=(), stored=()) -> None:
        """The `queries` the agent will retrieve with and the texts it will have `stored` soon:
        their embedding may start now."""
        self.memory.expect(self, agent, list(queries) if self.config.retrieval else [], list(stored))

    def retrieve(self, agent: Agent, query: str, k: int):
        if not self.config.retrieval:
            return []
        hits = self.memory.retrieve(self, agent, query, k)
        self.recalls.note(agent.id, [query], [hits])
        return hits

    def retrieve_many(self, agent: Agent, queries: list[str], k: int) -> list[list]:
        """`retrieve` for several queries of one moment: one hit list per query."""
        if not self.config.retrieval:
            return [[] for _ in queries]
        found = self.memory.retrieve_many(self, agent, queries, k)
        self.recalls.note(agent.id, queries, found)
        return found

    def dated(self, memories) -> tuple:
        """Memories as requests carry them, (when, text), dated as seen from now (`recall.dated`)."""
        return recall.dated(self, memories)

    def can_talk(self, a: Agent, b: Agent) -> bool:
        return (
            b.free_to_talk
            and a.id != b.id
            and self.env.now - a.last_talk.get(b.id, -math.inf) >= self.config.talk_cooldown
        )

    def pick_tile(self, agent: Agent, area: str):
        """A tile of `area` for the agent to go to; of a whole place, one in a room open to
        it (not someone else's), if the place has one."""
        grid = self.world.grid
        tiles = grid.tiles_in(area)
        if " / " not in area:
            rooms = grid.arenas_in(area)
            open_rooms = {r for r in rooms if room_open_to(r, agent.name)}
            if open_rooms and len(open_rooms) < len(rooms):
                tiles = [t for t in tiles if grid.area_at(t) in open_rooms]
        return agent.rng.choice(tiles) if tiles else self.world.position(agent.id)

    def first_places(self, spec) -> set[str]:
        """The places an agent knows at the start: those its file names (`places`), or by
        default its home, where it starts and the places of its routine."""
        named = getattr(spec, "places", ()) or (spec.home, spec.start_at or "", *(r.where or "" for r in spec.routine))
        return {self.place_of(where) for where in named} & set(self.places)

    def place_of(self, area: str) -> str:
        """The sector of an area path ("Hobbs Cafe / kitchen" -> "Hobbs Cafe")."""
        return normalize_area(area or "").split(" / ")[0]

    def known_area(self, where: str) -> str:
        """An area path the map has, or "" (stay put) for one it lacks."""
        where = normalize_area(where or "")
        return where if where and self.world.grid.tiles_in(where) else ""

    # ---- time -----------------------------------------------------------------------

    def align(self, t: float) -> float:
        """The first decision time on the tick grid at or after `t`."""
        return math.ceil(t / self.tick - 1e-9) * self.tick

    def day_of(self, t: float) -> int:
        return int((self._start_of_day + t) // 86400)

    def midnight(self, day: int) -> float:
        return day * 86400.0 - self._start_of_day

    def date_text(self, day: int) -> str:
        date = self.scenario.start.date() + timedelta(days=day)
        return f"{date:%A}, {date:%B} {date.day}, {date.year}"

    def clock(self, t: float) -> str:
        """`HH:MM` of a simulated time (`+1d HH:MM` past the first day's end is not needed
        for logs: the event's own time carries the date)."""
        return (self.scenario.start + timedelta(seconds=t)).strftime("%H:%M")

    def now_datetime(self) -> datetime:
        return self.scenario.start + timedelta(seconds=self.env.now)

    def datetime_at(self, t: float) -> datetime:
        return self.scenario.start + timedelta(seconds=t)

    def moment(self) -> str:
        """Now as prompts give it: "Monday, February 13, 2023, 10:30"."""
        return moment(self.now_datetime())

    # ---- state ----------------------------------------------------------------------

    def get_state(self) -> dict:
        """The whole simulation's state now, as JSON: the clock, the world, every agent
        (memory streams aside: `memories` says how many each holds), the conversations
        under way, the scenario events still to come, and the counters. Taken between
        steps, when no brain request is outstanding."""
        return {
            "schema": STATE_SCHEMA,
            "t": self.env.now,
            "started": self._started,
            "seed": self.seed,
            "counts": dict(sorted(self.counts.items())),
            "requests": dict(sorted(self.dispatch.requests.items())),
            "dispatch": self.dispatch.get_state(),
            "events": self.log.count,
            "waits": self.waits,
            "probe_start": self.probe_start,
            "positions": {a: list(self.world.position(a)) for a in self.agents},
            "objects": [[t.area, t.name, t.state, t.user] for t in self.world.things],
            "world_events": sorted([i, order] for i, order in self.pending_events.items()),
            "conversations": [c.get_state() for c in sorted(self.conversations.values(), key=lambda c: c.id)],
            "agents": {a.id: a.get_state() for a in self.agents.values()},
        }

    def _attached(self, stream: MemoryStream | Callable[[], MemoryStream]):
        """`stream` (or what reads it) searching with this simulation's helpers, and scaling its
        terms as the memory model says (a saved stream's files do not hold `normalize`)."""

        def attach(stream: MemoryStream) -> MemoryStream:
            stream.helpers = self.helpers
            stream.normalize = self.config.memory.normalize
            return stream

        return attach(stream) if isinstance(stream, MemoryStream) else (lambda: attach(stream()))

    def set_state(self, state: dict, streams: dict[str, MemoryStream | Callable[[], MemoryStream]]) -> None:
        """Bring a new simulation to the state `get_state` gave, with each agent's memory
        stream as it was then (or what reads it when it is first used); every agent goes on
        with what it was doing."""
        if state.get("schema") != STATE_SCHEMA:
            raise ValueError(f"state schema {state.get('schema')!r}, expected {STATE_SCHEMA}")
        if self._started:
            raise RuntimeError("set_state needs a simulation that has not started")
        self._started = state.get("started", True)  # a state taken before the start: `start` begins it
        self.env = simpy.Environment(initial_time=state["t"])
        self.dispatch.env = self.env
        self.seed = state["seed"]
        self.counts = Counter(state["counts"])
        self.dispatch.set_state(state["dispatch"])
        self.log.count = state["events"]
        self.waits = state["waits"]
        self.probe_start = {k: list(v) for k, v in state["probe_start"].items()}
        for thing, (_area, _name, thing_state, user) in zip(self.world.things, state["objects"]):
            thing.state, thing.user = thing_state, user
        for agent_id, tile in sorted(state["positions"].items()):
            self.world.place(agent_id, tuple(tile))
        for talk in state["conversations"]:
            self.conversations[talk["id"]] = Conversation.from_state(talk, self.env.event())
        starts = []  # (order, id, start): processes resume in the order they waited
        for agent_id, agent_state in state["agents"].items():
            agent = self.agents[agent_id]
            agent.stream = self._attached(streams[agent_id])
            agent.set_state(agent_state)
            doing = agent.doing
            starts.append(
                (doing.order if doing and doing.until is not None else math.inf, agent_id, partial(self._live, agent))
            )
        self.pending_events = {index: order for index, order in state["world_events"]}
        for index, order in state["world_events"]:
            starts.append((order, "", partial(self._world_event_process, index, order)))
        if self._started:
            for *_, start in sorted(starts, key=lambda s: s[:2]):
                start()

    def _live(self, agent: Agent) -> None:
        """Start an agent's life, or (restored, in the middle of something) go on with it."""
        agent.process = self.env.process(life.live(self, agent, restored=agent.doing is not None))

    def _world_event_process(self, index: int, order: int) -> None:
        self.env.process(self._world_event(index, order))

    # ---- output ---------------------------------------------------------------------

    def emit(self, kind: str, agent: str | None, /, **fields) -> None:
        """Log a `kind` event (one of `smallville.events`) now, its `data` built from `fields`."""
        self.log.emit(self.env.now, kind, agent, events.data(kind, **fields))

    def count(self, what: str) -> None:
        self.counts[what] += 1

    def probe_knowers(self) -> dict[str, list[str]]:
        return {p.name: sorted(a.id for a in self.agents.values() if p.name in a.knows) for p in self.scenario.probes}
