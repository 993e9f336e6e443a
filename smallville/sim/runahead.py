"""Run-ahead: more model calls in flight, with the outcome of the in-order simulation.

The simulation itself stays in order: every batch is answered in (agent, seq) order at
its instant, exactly as without run-ahead. What changes is when the answers are fetched.
At the start of every tick, when everyone is between steps, the dispatcher takes the
simulation's state (`Snapshot`: `Simulation.get_state` and a mark of each memory stream).
When a batch needs an answer that has not come, a copy of the simulation is built from the
latest snapshot (`Copy`) and run on ahead, a slice at a time, while the original waits. In
the copy, an agent whose answer is missing stops where it is, and so does every agent that
could have met it since: one in an arena it could have reached (agents see, talk to and
share objects with those in their own arena only, and go only where their plan says until
a new day is planned). Every other agent's requests are exactly the ones the in-order run
will make, so each is sent to the model as soon as the copy makes it, up to `2 x
concurrency` in flight (the copy pauses there). Once the copy has gone as far as it can and
more answers have come, the next copy starts from the latest snapshot.

A copy shares nothing with the original: its world and agents are its own, its memory
streams are branched from the original's at the snapshot (`MemoryStream.branch`), its log
only counts events, and it asks through a dispatcher of its own (`_Asking`) that answers
from what has been fetched (or, for what the original took since the snapshot, kept). A
wrong guess by the copy can only waste a call, never change the run: the in-order run takes
each answer by (request key, occurrence) and asks the model itself for any it lacks.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from smallville.brain import requests as rq
from smallville.brain.base import Answers, Fallback
from smallville.brain.wrappers import safe_answer
from smallville.memory.stream import Mark
from smallville.sim.dispatch import Dispatcher
from smallville.sim.log import Counting

Key = tuple[str, int]          # (request key, occurrence of that key in the run)
SLICE = 512                    # events a copy runs before the original looks at its answers again
PATIENCE = 900.0               # simulated seconds a copy goes on without finding a request to send
FAILURES = 3                   # copies that fail before run-ahead gives up for the run


class Ahead:
    """The answers fetched ahead of the clock, the calls still in flight, and the answers the
    in-order run took since the snapshot the live copy was made from."""

    def __init__(self, brain, *, concurrency: int = 16, lookahead: float = 3600.0) -> None:
        self.brain = brain                  # answers one request: `answer_one(request)`
        self.lookahead = lookahead          # simulated seconds a copy may run past the clock
        self.concurrency = concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="smallville-ahead")
        self.done: dict[Key, Any] = {}      # (answer, error or None), or the exception the call raised
        self.flight: dict[Key, Future] = {}
        self.used: Counter[str] = Counter()  # occurrences of each key the in-order run has taken
        self.stats = Counter()
        self.taken: list[Key] = []          # keys the in-order run took since `base`, in order
        self.base = 0                       # how many it had taken before taken[0]
        self.kept: dict[Key, Any] = {}      # their answers
        self.since: Counter[str] = Counter()   # and how often each key is among them

    # ---- the in-order side ----------------------------------------------------------

    def keys(self, requests: Sequence[rq.Message]) -> list[Key]:
        seen: Counter[str] = Counter()
        out = []
        for request in requests:
            key = rq.request_key(request)
            out.append((key, self.used[key] + seen[key]))
            seen[key] += 1
        return out

    def submit(self, key: Key, request: rq.Message) -> None:
        if key not in self.done and key not in self.flight and key not in self.kept:
            self.flight[key] = self.pool.submit(self.brain.answer_one, request)
            self.stats["sent"] += 1

    def collect(self) -> int:
        landed = 0
        for key in [k for k, f in self.flight.items() if f.done()]:
            future = self.flight.pop(key)
            if future.cancelled():
                continue
            self.done[key] = future.exception() or future.result()
            landed += 1
        self.stats["landed"] += landed
        return landed

    def take(self, requests: Sequence[rq.Message]) -> tuple[list[rq.Message], list[Fallback]]:
        """The answers of a batch, in order, waiting for any not yet here."""
        keys = self.keys(requests)
        for key, request in zip(keys, requests):
            self.submit(key, request)
        answers, fallbacks = [], []
        for i, (key, request) in enumerate(zip(keys, requests)):
            if key not in self.done:
                self.done[key] = _outcome(self.flight.pop(key))
            result = self.kept[key] = self.done.pop(key)
            self.taken.append(key)
            self.since[key[0]] += 1
            self.used[key[0]] += 1
            if isinstance(result, BaseException):
                raise result
            answer, error = result
            if error is not None:
                fallbacks.append(Fallback(i, request.kind, key[0], error))
            answers.append(answer)
        return answers, fallbacks

    # ---- the copies' side -----------------------------------------------------------

    @property
    def count_taken(self) -> int:
        """How many answers the in-order run has taken so far."""
        return self.base + len(self.taken)

    def rebase(self, count: int) -> None:
        """Keep only the answers taken after the first `count` (a new copy's snapshot)."""
        drop = count - self.base
        if drop <= 0:
            return
        for key in self.taken[:drop]:
            del self.kept[key]
            self.since[key[0]] -= 1
        del self.taken[:drop]
        self.base = count
        self.since = +self.since

    def used_before(self, key: str) -> int:
        """Occurrences of `key` the in-order run had taken at the base snapshot."""
        return self.used[key] - self.since[key]

    def fetched(self, key: Key):
        """The outcome fetched for `key`, or None."""
        result = self.done.get(key)
        return self.kept.get(key) if result is None else result

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)    # calls under way finish and are counted
        self.collect()
        self.stats["unused"] = len(self.done)
        self.stats["unused_fallbacks"] = sum(1 for r in self.done.values() if isinstance(r, tuple) and r[1] is not None)


def _outcome(future: Future):
    try:
        return future.result()
    except BaseException as exc:  # re-raised by `take` in the simulation's thread
        return exc


class Prefetched:
    """A brain that answers from what `Ahead` fetched (waiting for what is on its way)."""

    def __init__(self, ahead: Ahead) -> None:
        self.ahead = ahead
        self.inner = ahead.brain
        self.name = ahead.brain.name

    def describe(self) -> dict:
        return {**self.inner.describe(), "run_ahead": self.ahead.lookahead}

    def learn(self, request: rq.Message, answer: rq.Message) -> None:
        if hasattr(self.inner, "learn"):
            self.inner.learn(request, answer)

    def preflight(self) -> str | None:
        if hasattr(self.inner, "preflight"):
            return self.inner.preflight()
        return None

    def answer(self, requests: Sequence[rq.Message]) -> Answers:
        return Answers(*self.ahead.take(requests))


@dataclass(frozen=True)
class Snapshot:
    """The simulation at the start of a tick: its state, each stream's mark, and how many
    answers the in-order run had taken."""

    t: float
    state: dict
    marks: dict[str, Mark]
    taken: int


class RunAheadDispatcher(Dispatcher):
    """A dispatcher that, while it waits for the answers of a batch, runs a copy of the
    simulation ahead to find what else the run will ask, and fetches it too."""

    def __init__(self, sim, ahead: Ahead, base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)                        # a restored run's counters go on
        self.sim = sim
        self.ahead = ahead
        self.town = Town(sim.world.grid)
        self.snapshot: Snapshot | None = None
        self.copy: Copy | None = None
        self.explored = -1              # answers landed when the last copy was made
        if ahead.lookahead > 0:
            self._note()                # made between steps (before the start, or restored)
            sim.at_each_tick(self._note)

    def close(self) -> None:
        self.copy = None

    def _note(self) -> None:
        """The start of a tick: note the state the next copy will start from."""
        if self.ahead.lookahead <= 0:
            return
        sim = self.sim
        self.snapshot = Snapshot(sim.env.now, sim.get_state(),
                                 {a: agent.stream.mark() for a, agent in sim.agents.items()},
                                 self.ahead.count_taken)
        if self.copy is None or self.copy.finished:
            self.ahead.rebase(self.snapshot.taken)

    def _flush(self, event: Any) -> None:
        batch = sorted(self._pending, key=lambda p: (p[0], p[1]))
        asked, _ = self.guard(batch, count=False)       # what the in-order flush will ask
        ahead = self.ahead
        keys = ahead.keys([batch[i][2] for i in asked])
        for key, i in zip(keys, asked):
            ahead.submit(key, batch[i][2])
        while True:
            ahead.collect()
            if all(k in ahead.done for k in keys):
                break
            if not self._explore():
                wait(list(ahead.flight.values()), return_when=FIRST_COMPLETED)
        super()._flush(event)

    def _explore(self) -> bool:
        """Run a copy on for a slice: the live one, or a new one from the latest snapshot if
        the live one has gone as far as it can and answers came since it was made, or it
        fell behind the snapshot. False when there is nothing to run."""
        ahead, copy, snapshot = self.ahead, self.copy, self.snapshot
        if ahead.lookahead <= 0 or snapshot is None:
            return False
        began = time.perf_counter()
        try:
            return self._run_copy(ahead, copy, snapshot)
        finally:
            ahead.stats["copies_ms"] += int(1000 * (time.perf_counter() - began))

    def _run_copy(self, ahead: Ahead, copy: Copy | None, snapshot: Snapshot) -> bool:
        stale = copy is None or copy.now < snapshot.t or (copy.finished and ahead.stats["landed"] != self.explored)
        if stale and copy is not None and len(ahead.flight) >= ahead.concurrency:
            return False                # enough calls in flight: a new copy would only add to the queue
        if stale:
            self.explored = ahead.stats["landed"]
            ahead.rebase(snapshot.taken)
            try:
                copy = self.copy = Copy(self, snapshot)
            except Exception:
                return self._failed()
            ahead.stats["copies"] += 1
        if copy.finished or len(ahead.flight) >= copy.cap:
            return False
        try:
            copy.run(SLICE)
        except Exception:
            return self._failed()
        return True

    def _failed(self) -> bool:
        """A copy broke: something in this run breaks copies, so after a few, stop making them."""
        self.copy = None
        self.ahead.stats["failed_copies"] += 1
        if self.ahead.stats["failed_copies"] >= FAILURES:
            self.ahead.lookahead = 0
        return False


class Town:
    """The map as run-ahead reads it: each tile's arena, the arenas of each place, and
    which tiles can be walked."""

    def __init__(self, grid) -> None:
        self.grid = grid
        self.walkable = np.zeros((grid.height, grid.width), dtype=bool)
        for x, y in grid.walkable_tiles():
            self.walkable[y, x] = True
        names = grid.arenas()
        self.arena_ids = np.full(self.walkable.shape, -1, dtype=np.int64)   # each tile's arena, -1 for walls
        self.arena_at: dict[tuple[int, int], int] = {}
        for i, name in enumerate(names):
            for x, y in grid.tiles_in(name):
                self.arena_ids[y, x] = i
                self.arena_at[x, y] = i
        self.places: dict[str, set[int]] = {}
        for place in names + sorted({n.split(" / ")[0] for n in names}):
            self.arenas_of(place)
        self.cones: dict[tuple, set[int]] = {}

    def arenas_of(self, place: str) -> set[int]:
        """The arenas of a place (an arena, or a sector and all its arenas)."""
        if place not in self.places:
            self.places[place] = {int(self.arena_ids[y, x]) for x, y in self.grid.tiles_in(place)} - {-1}
        return self.places[place]

    def within(self, tiles: tuple, steps: int) -> set[int]:
        """The arenas at most `steps` 4-neighbour steps from `tiles` over walkable ground."""
        if (tiles, steps) not in self.cones:
            seen = np.zeros(self.walkable.shape, dtype=bool)
            for x, y in tiles:
                seen[y, x] = True
            for _ in range(steps):
                grown = seen.copy()
                grown[1:, :] |= seen[:-1, :]
                grown[:-1, :] |= seen[1:, :]
                grown[:, 1:] |= seen[:, :-1]
                grown[:, :-1] |= seen[:, 1:]
                grown &= self.walkable
                if (grown == seen).all():
                    break
                seen = grown
            self.cones[tiles, steps] = set(np.unique(self.arena_ids[seen]).tolist())
        return self.cones[tiles, steps]


class Reach:
    """The arenas that stopped agents could be in by now (`at`; None: any arena).

    An agent perceives, talks to and shares objects with others in its own arena only.
    The engine moves an agent only to its plan block's place at the block's start, or
    within the arena it is in (to an object, to a bed), so until its plan runs out a
    stopped agent stays within its arena and the places of its blocks begun since.
    An agent stopped with no plan left (about to plan a new day) could go anywhere,
    as fast as it walks: one tile per `tile_time`. One whose plan runs out while
    stopped is taken to be anywhere. Time only goes forward, so what is reached stays
    reached: each stop is looked at once, and each later block once, when it begins."""

    def __init__(self, town: "Town", tile_time: float) -> None:
        self.town, self.tile_time = town, tile_time
        self.known: set[int] = set()                 # reached for good
        self.blocks: list[tuple[float, int, str]] = []   # (start, n, place) of blocks yet to begin
        self.expires = np.inf                        # the first time a stopped agent's plan runs out
        self.roaming: list[tuple[float, tuple]] = []     # (time, tiles) of agents stopped with no plan left
        self._made: tuple = (None, None)             # (key, set) of the last `at`

    def add(self, t: float, tiles: tuple, arena: str, plan: list[tuple[float, str]], ends: float) -> None:
        """A stop at time `t`, on or heading to `tiles`, in `arena`, with the rest of its plan
        (block starts and places) running out at `ends`."""
        if ends <= t:
            self.roaming.append((t, tiles))
            self._made = (None, None)
            return
        self.expires = min(self.expires, ends)
        self.known |= self.town.arenas_of(arena)
        self.known.update(self.town.arena_at.get(tile, -1) for tile in tiles)
        for start, where in plan:
            if where:
                heapq.heappush(self.blocks, (start, len(self.blocks), where))
        self._made = (None, None)

    def at(self, now: float) -> set[int] | None:
        if now >= self.expires:
            return None
        while self.blocks and self.blocks[0][0] <= now:
            self.known |= self.town.arenas_of(heapq.heappop(self.blocks)[2])
            self._made = (None, None)
        steps = tuple(int((now - t) // self.tile_time) for t, _ in self.roaming)
        if self._made[0] != (len(self.known), steps):
            made = set(self.known)
            for (_, tiles), n in zip(self.roaming, steps):
                made |= self.town.within(tiles, n)
            self._made = ((len(self.known), steps), made)
        return self._made[1]


class Copy:
    """The simulation as it was at a snapshot, run ahead in this process (see the module
    docstring). `finished` once every agent has stopped, or it reached its horizon, or it went
`PATIENCE` simulated seconds without finding a request to send (every agent still going
is then where earlier copies have been: a later copy, from a later snapshot, goes on)."""

    def __init__(self, dispatch: RunAheadDispatcher, snapshot: Snapshot) -> None:
        from smallville.sim.engine import Simulation

        original = dispatch.sim
        self.dispatch, self.ahead, self.town = dispatch, dispatch.ahead, dispatch.town
        self.sim = Simulation(original.scenario, original.brain, original.embedder, config=original.config,
                              log=Counting(original.scenario.start), world=original.world.copy())
        streams = {a: original.agents[a].stream.branch(mark) for a, mark in snapshot.marks.items()}
        self.sim.set_state(snapshot.state, streams)
        self.sim.start()                        # a snapshot from before the start begins the town
        self.asking = _Asking(self, self.sim.dispatch)
        self.sim.use_dispatcher(self.asking)
        self.env = self.sim.env
        self.used: Counter[str] = Counter()     # occurrences of each key the copy took since the snapshot
        self.stopped: dict[str, float] = {}     # agent -> when it stopped
        self.reach = Reach(self.town, self.sim.world.tile_time)
        self.finished = False
        self.found = self.env.now               # when it last found a request to send
        self._scanned: tuple = ()               # (time, stops) when every agent was last looked at
        self.cap = 2 * self.ahead.concurrency
        self.horizon = min(getattr(original, "until", np.inf), dispatch.env.now + self.ahead.lookahead)
        self.env.process(self._watch())

    @property
    def now(self) -> float:
        return self.env.now

    def run(self, events: int) -> None:
        """Run on for at most `events` events of the copy's clock."""
        env = self.env
        for _ in range(events):
            if self.finished or len(self.ahead.flight) >= self.cap:
                return
            if env.peek() >= min(self.horizon, self.found + PATIENCE):
                self.finished = True
                return
            env.step()

    # ---- answering in the copy ------------------------------------------------------

    def answer(self, batch) -> None:
        """Answer a batch of the copy from what has been fetched. A batch's requests were all
        made before any of its answers is applied, so every request of an agent that could
        not have met a stopped agent before the batch is the in-order run's: each is sent,
        even when a missing answer in the same batch stops its agent."""
        ahead = self.ahead
        _, refused = self.asking.guard(batch)
        certain = []
        for i, (agent, _, request, event) in enumerate(batch):
            if i in refused:                       # past the runaway guard's ceiling: the safe default
                event.succeed(safe_answer(request))
                continue
            name = rq.request_key(request)
            key = (name, ahead.used_before(name) + self.used[name])
            self.used[name] += 1
            if agent not in self.stopped:
                self._spread(agent)
            if agent not in self.stopped:
                certain.append((agent, key, request, event))
        missing = []
        for agent, key, request, event in certain:
            result = ahead.fetched(key)
            if result is None or isinstance(result, BaseException):
                if result is None:
                    ahead.submit(key, request)
                    self.found = self.env.now
                    ahead.stats["most_ahead_s"] = max(ahead.stats["most_ahead_s"],
                                                      int(self.env.now - self.dispatch.env.now))
                missing.append(agent)
            else:
                event.succeed(self.asking.fit(agent, request, result[0]))
        for agent in missing:
            self._mark(agent)
        if missing:
            self._spread()

    # ---- who can no longer be trusted -----------------------------------------------

    def _mark(self, agent: str) -> None:
        """From now on `agent` may act otherwise than the copy has it act: note where it
        can be, now and later (see `Reach`)."""
        a = self.sim.agents[agent]
        now = self.env.now
        plan = [(b.start, b.where) for b in a.plan if b.end > now]
        ends = a.plan[-1].end if a.plan else now
        self.stopped[agent] = now
        self.reach.add(now, self._tiles(agent), self.sim.world.area_of(agent), plan, ends)

    def _tiles(self, agent: str) -> tuple:
        here = self.sim.world.position(agent)
        doing = self.sim.agents[agent].doing
        heading = doing.tile if doing is not None and doing.phase == "walking" else None
        return (here,) if heading is None or heading == here else (here, heading)

    def _within(self, agent: str, reach: set[int] | None) -> bool:
        """Whether `agent` is in (or walking to) an arena of `reach` (None: all)."""
        if reach is None:
            return True
        arena_at = self.town.arena_at
        if arena_at.get(self.sim.world.position(agent), -1) in reach:
            return True
        doing = self.sim.agents[agent].doing
        return doing is not None and doing.phase == "walking" and arena_at.get(doing.tile, -1) in reach

    def _spread(self, asking: str | None = None) -> None:
        """Stop every agent that a stopped agent could have met by now (`Reach`). Once the
        agents have been looked at for this instant and these stops, only `asking` (the
        agent whose request is being answered) is looked at again."""
        now = self.env.now
        if asking is not None and self._scanned == (now, len(self.stopped)):
            if not self._within(asking, self.reach.at(now)):
                return
            self._mark(asking)
        while True:
            reach = self.reach.at(now)
            caught = [agent for agent in self.sim.agents if agent not in self.stopped and self._within(agent, reach)]
            if not caught:
                break
            for agent in caught:
                self._mark(agent)
        self._scanned = (now, len(self.stopped))
        if len(self.stopped) == len(self.sim.agents):
            self.finished = True

    def _watch(self):
        while True:
            yield self.env.timeout(self.sim.tick)
            self._spread()


class _Asking(Dispatcher):
    """The copy's dispatcher: it hands each batch to the copy, which answers what has been
    fetched and stops the agents whose answers have not."""

    def __init__(self, copy: Copy, base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)
        self.copy = copy

    def _flush(self, _event) -> None:
        batch = sorted(self._pending, key=lambda p: (p[0], p[1]))
        self._pending = []
        self.copy.answer(batch)
