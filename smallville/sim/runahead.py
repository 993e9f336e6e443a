"""Run-ahead: more model calls in flight, with the outcome of the in-order simulation.

The simulation itself stays in order: every batch is answered in (agent, seq) order at
its instant, exactly as without run-ahead. What changes is when the answers are fetched.
When a batch needs an answer that has not come yet, the engine forks the process and
lets the copy run on ahead while the original waits. In the copy, an agent whose answer
is missing stops where it is, and so does every agent that could have met it since: one in
an arena it could have reached (agents see, talk to and share objects with those in their
own arena only, and go only where their plan says until a new day is planned).
Every other agent's requests are exactly the ones the in-order run will make, so the
copy sends them home through a pipe and exits; the original asks the model for them at
once, up to `concurrency` at a time, and forks again as answers come in.

The copy never writes a file: its descriptors are pointed at /dev/null and its log at
nowhere, it asks through a dispatcher of its own (`_Asking`), drives the clock itself from
the fork point, reports what it needs as JSON and leaves with `os._exit`, so nothing of the
original run is touched. Where an agent is heading it reads from the agent's state (`Doing`). A wrong guess by the copy can only waste a call, never change the run:
the in-order run takes each answer by (request key, occurrence) and asks the model itself
for any it lacks.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import sys
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Sequence

import numpy as np
import simpy

from smallville.brain import requests as rq
from smallville.brain.base import Answers, Fallback
from smallville.brain.wrappers import safe_answer
from smallville.sim.dispatch import Dispatcher
from smallville.sim.log import Nowhere

Key = tuple[str, int]          # (request key, occurrence of that key in the run)
COPY_PATIENCE = 30.0           # wall seconds a copy may take before it is killed


def can_fork() -> bool:
    return hasattr(os, "fork")


class Ahead:
    """The answers fetched ahead of the clock, and the calls still in flight."""

    def __init__(self, brain, *, concurrency: int = 16, lookahead: float = 3600.0) -> None:
        self.brain = brain                  # answers one request: `answer_one(request)`
        self.lookahead = lookahead          # simulated seconds a copy may run past the clock
        self.concurrency = concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="smallville-ahead")
        self.done: dict[Key, Any] = {}      # (answer, error or None), or the exception the call raised
        self.flight: dict[Key, Future] = {}
        self.used: Counter[str] = Counter()  # occurrences of each key the in-order run has taken
        self.stats = Counter()
        self.alive: set[int] = set()        # pids of copies still running

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
        if key not in self.done and key not in self.flight:
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
            result = self.done.pop(key)
            self.used[key[0]] += 1
            if isinstance(result, BaseException):
                raise result
            answer, error = result
            if error is not None:
                fallbacks.append(Fallback(i, request.kind, key[0], error))
            answers.append(answer)
        return answers, fallbacks

    def close(self) -> None:
        for pid in list(self.alive):                  # copies still running: not needed any more
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
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


class RunAheadDispatcher(Dispatcher):
    """A dispatcher that, before answering a batch whose answers are not all here, lets
    copies of the simulation find what else the run will ask and fetches it too."""

    def __init__(self, sim, ahead: Ahead, base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)                        # a restored run's counters go on
        self.sim = sim
        self.ahead = ahead
        self.walkable = walkable_mask(sim.world.grid)
        self.copies: list[Future] = []
        self.explored = -1              # answers landed when the last copy was made
        self.max_copies = max(1, (os.cpu_count() or 2) - 1)     # copies at once: leave a core to the original
        self.readers = ThreadPoolExecutor(max_workers=self.max_copies, thread_name_prefix="smallville-copy")
        grid = sim.world.grid
        names = grid.arenas()
        self.arena_ids = np.full(self.walkable.shape, -1, dtype=np.int64)   # each tile's arena, -1 for walls
        for i, name in enumerate(names):
            for x, y in grid.tiles_in(name):
                self.arena_ids[y, x] = i
        self.place_arenas: dict[str, set[int]] = {}
        for place in names + sorted({n.split(" / ")[0] for n in names}):
            self.place_arenas[place] = self.arenas_of(place)

    def close(self) -> None:
        self.readers.shutdown(wait=True)

    def arenas_of(self, place: str) -> set[int]:
        """The arenas of a place (an arena, or a sector and all its arenas)."""
        ids = {int(self.arena_ids[y, x]) for x, y in self.sim.world.grid.tiles_in(place)}
        return ids - {-1}

    def _flush(self, event: Any) -> None:
        batch = sorted(self._pending, key=lambda p: (p[0], p[1]))
        asked, _ = self.guard(batch, count=False)       # what the in-order flush will ask
        batch = [batch[i] for i in asked]
        ahead = self.ahead
        keys = ahead.keys([p[2] for p in batch])
        for key, p in zip(keys, batch):
            ahead.submit(key, p[2])
        while True:
            ahead.collect()
            self._harvest()
            ready = all(k in ahead.done for k in keys)
            if ahead.lookahead > 0 and ahead.stats["landed"] != self.explored and not (ready and self.copies) \
                    and len(self.copies) < self.max_copies:
                self.explored = ahead.stats["landed"]      # answers came since the last copy: look further
                self.copies.append(self._explore(batch))
                continue
            if ready:
                break
            wait(list(ahead.flight.values()) + self.copies, return_when=FIRST_COMPLETED)
        super()._flush(event)

    def _explore(self, batch) -> Future:
        """Fork a copy to run ahead from this batch; its report comes as a future."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:                                        # the copy: never returns
            os.close(read)
            _Copy(self, write).run(batch)
        os.close(write)
        self.ahead.stats["forks"] += 1
        self.ahead.alive.add(pid)
        return self.readers.submit(_report, pid, read, self.ahead.alive)

    def _harvest(self) -> None:
        for copy in [c for c in self.copies if c.done()]:
            self.copies.remove(copy)
            needed = copy.result()
            if needed is None:
                self.ahead.stats["failed_forks"] += 1
                if self.ahead.stats["failed_forks"] >= 3:     # something in this process breaks copies: stop
                    self.ahead.lookahead = 0
                continue
            for key, request, ahead_s in needed:
                self.ahead.submit(key, request)
                self.ahead.stats["most_ahead_s"] = max(self.ahead.stats["most_ahead_s"], int(ahead_s))


def _report(pid: int, fd: int, alive: set[int], patience: float = COPY_PATIENCE):
    """What a copy found it will need, or None if it died or took longer than `patience`
    seconds (then it is killed: a copy must never hold up the run or its exit)."""
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], patience)
            if not ready:
                os.kill(pid, signal.SIGKILL)
                chunks = []
                break
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
        os.waitpid(pid, 0)
        alive.discard(pid)
    try:
        return [((key, occurrence), rq.Message.registry[request["kind"]].from_dict(request), ahead_s)
                for (key, occurrence), request, ahead_s in json.loads(b"".join(chunks))]
    except Exception:
        return None


class _Copy:
    """The simulation run ahead in a forked process (see the module docstring)."""

    def __init__(self, dispatch: RunAheadDispatcher, out: int) -> None:
        self.dispatch, self.sim, self.ahead, self.out = dispatch, dispatch.sim, dispatch.ahead, out
        self.env = self.sim.env
        self.needed: list[tuple[Key, rq.Message, float]] = []   # and how far ahead of the original
        self.stopped: dict[str, tuple] = {}     # agent -> (time, tiles, arena, plan, plan's end) at its stop
        self.asking: Dispatcher | None = None   # the copy's own dispatcher
        world = self.sim.world
        self.vision, self.tile_time, self.tick = world.vision, world.tile_time, self.sim.tick
        self._walkable = dispatch.walkable
        self._cones: dict[tuple, set[int]] = {}
        self.cap = 2 * self.ahead.concurrency
        self.began = self.env.now
        self.horizon = min(getattr(self.sim, "until", np.inf), self.env.now + self.ahead.lookahead)

    def run(self, batch) -> None:
        try:
            gc.disable()                    # the copy is short-lived: no collections, fewer pages copied
            faiss = sys.modules.get("faiss")
            if faiss is not None:           # OpenMP's thread pool does not survive a fork
                faiss.omp_set_num_threads(1)
            self._seal()
            self.sim.dispatch = self.asking = _Asking(self, self.dispatch)
            self.env.process(self._watch())
            self._answer(batch)
            while self.env.peek() < self.horizon:
                try:
                    self.env.step()
                except simpy.core.StopSimulation:     # the original's `run(until=...)` mark: go on
                    continue
        except BaseException:
            pass
        self._leave()

    def _seal(self) -> None:
        """Point every descriptor but the pipe at /dev/null: the copy cannot write a file
        of the run, nor print."""
        null = os.open(os.devnull, os.O_RDWR)
        for name in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else map(str, range(3)):
            fd = int(name)
            if fd not in (self.out, null):
                try:
                    os.dup2(null, fd)
                except OSError:
                    pass
        self.sim.log.out = Nowhere()

    def _leave(self) -> None:
        data = json.dumps([[list(key), request.to_dict(), ahead_s] for key, request, ahead_s in self.needed]).encode()
        view = memoryview(data)
        while view:
            view = view[os.write(self.out, view):]
        os._exit(0)

    # ---- answering in the copy ------------------------------------------------------

    def _answer(self, batch) -> None:
        ahead = self.ahead
        _, refused = self.asking.guard(batch)
        for i, (agent, _, request, event) in enumerate(batch):
            if i in refused:                       # past the runaway guard's ceiling: the safe default
                event.succeed(safe_answer(request))
                continue
            key = rq.request_key(request)
            key = (key, ahead.used[key])
            ahead.used[key[0]] += 1
            if agent not in self.stopped:
                self._spread()
            if agent in self.stopped:
                continue
            result = ahead.done.get(key)
            if result is None or isinstance(result, BaseException):
                if result is None and key not in ahead.flight:
                    self.needed.append((key, request, self.env.now - self.began))
                self._stop(agent)
                continue
            event.succeed(self.asking.fit(agent, request, result[0]))
        if len(self.needed) >= self.cap:
            self._leave()

    # ---- who can no longer be trusted -----------------------------------------------

    def _stop(self, agent: str) -> None:
        self._mark(agent)
        self._spread()

    def _mark(self, agent: str) -> None:
        """From now on `agent` may act otherwise than the copy has it act: note where it
        can be, now and later (see `_reach`)."""
        a = self.sim.agents[agent]
        world = self.sim.world
        plan = tuple((b.start, b.end, b.where) for b in a.plan if b.end > self.env.now)
        ends = a.plan[-1].end if a.plan else self.env.now
        self.stopped[agent] = (self.env.now, self._tiles(agent), world.area_of(agent), plan, ends)

    def _tiles(self, agent: str) -> tuple:
        here = self.sim.world.position(agent)
        doing = self.sim.agents[agent].doing
        heading = doing.tile if doing is not None and doing.phase == "walking" else None
        return (here,) if heading is None or heading == here else (here, heading)

    def _spread(self) -> None:
        """Stop every agent that a stopped agent could have met by now (`_reach`)."""
        arena_of = self.dispatch.arena_ids
        while True:
            reach = self._reach()
            caught = [agent for agent in self.sim.agents if agent not in self.stopped
                      and (reach is None or any(arena_of[y, x] in reach for x, y in self._tiles(agent)))]
            if not caught:
                break
            for agent in caught:
                self._mark(agent)
        if len(self.stopped) == len(self.sim.agents):
            self._leave()

    def _reach(self) -> set[int] | None:
        """The arenas a stopped agent could be in by now; None for all of them.

        An agent perceives, talks to and shares objects with others in its own arena only.
        The engine moves an agent only to its plan block's place at the block's start, or
        within the arena it is in (to an object, to a bed), so until its plan runs out a
        stopped agent stays within its arena and the places of its blocks begun since.
        An agent stopped with no plan left (about to plan a new day) could go anywhere,
        as fast as it walks: one tile per `tile_time`. One whose plan runs out while
        stopped is taken to be anywhere."""
        now = self.env.now
        places = self.dispatch.place_arenas
        reach: set[int] = set()
        for t, tiles, arena, plan, ends in self.stopped.values():
            if now >= ends:
                if ends > t:
                    return None
                steps = int((now - t) // self.tile_time)
                if (tiles, steps) not in self._cones:
                    walked = _walk(self._walkable, tiles, steps)
                    self._cones[tiles, steps] = set(np.unique(self.dispatch.arena_ids[walked]).tolist())
                reach |= self._cones[tiles, steps]
                continue
            for place in [arena] + [where for start, _, where in plan if where and start <= now]:
                if place not in places:
                    places[place] = self.dispatch.arenas_of(place)
                reach |= places[place]
            reach.update(int(self.dispatch.arena_ids[y, x]) for x, y in tiles)
        return reach

    def _watch(self):
        while True:
            yield self.env.timeout(self.tick)
            self._spread()


def walkable_mask(grid) -> np.ndarray:
    mask = np.zeros((grid.height, grid.width), dtype=bool)
    for x, y in grid.walkable_tiles():
        mask[y, x] = True
    return mask


def _walk(walkable: np.ndarray, tiles, steps: int) -> np.ndarray:
    """Tiles at most `steps` 4-neighbour steps from `tiles` over walkable ground."""
    seen = np.zeros(walkable.shape, dtype=bool)
    for x, y in tiles:
        seen[y, x] = True
    for _ in range(steps):
        grown = seen.copy()
        grown[1:, :] |= seen[:-1, :]
        grown[:-1, :] |= seen[1:, :]
        grown[:, 1:] |= seen[:, :-1]
        grown[:, :-1] |= seen[:, 1:]
        grown &= walkable
        if (grown == seen).all():
            break
        seen = grown
    return seen


class _Asking(Dispatcher):
    """The copy's dispatcher: it hands each batch to the copy, which answers what has been
    fetched and stops the agents whose answers have not."""

    def __init__(self, copy: "_Copy", base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)
        self.copy = copy

    def _flush(self, _event) -> None:
        batch = sorted(self._pending, key=lambda p: (p[0], p[1]))
        self._pending = []
        self.copy._answer(batch)
