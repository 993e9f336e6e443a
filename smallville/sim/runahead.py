"""Run-ahead: more model calls in flight, with the outcome of the in-order simulation.

The simulation itself stays in order: every batch is answered in (agent, seq) order at
its instant, exactly as without run-ahead. What changes is when the answers are fetched.
At the start of every tick, when everyone is between steps, the dispatcher takes the
simulation's state (`Snapshot`: `Simulation.get_state` and a mark of each memory stream).
When a batch needs an answer that has not come, copies of the town are built from the latest
snapshot and run on ahead, a slice at a time, while the original waits: one copy for each
group of people who cannot meet anyone outside it before the copy's horizon
(`smallville.sim.copies`), each built when it first runs. In a copy, an agent whose answer is missing stops where it is,
and so does every agent that could have met it since; one whose rating (importance, or
the salience model's tags) is missing goes on until its next other request, since a rating
changes nothing others see (`Copy` says why that is safe). Every other agent's requests are
exactly the ones the in-order run will make, so each is sent to the model as soon as a copy
makes it, up to `2 x concurrency` in flight (copies pause there). Once a group's copy has
gone as far as it can and an answer its stopped people wait for has come, its next copy
starts from the latest snapshot (`_renew` says when, and why the run never waits with a copy
that could go further left undone); the other groups' copies go on.

A copy shares nothing with the original: its world and agents are its own, its memory
streams are branched from the original's at the snapshot (`MemoryStream.branch`), its log
only counts events, and it asks through a dispatcher of its own that answers from what has
been fetched (or, for what the original took since the snapshot, kept). A wrong guess by a
copy can only waste a call, never change the run: the in-order run takes each answer by
(request key, occurrence) and asks the model itself for any it lacks.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from smallville.brain import requests as rq
from smallville.brain.assembly import Stack
from smallville.brain.base import Answers, Brain, Fallback, Wrapper, override
from smallville.brain.record import Replaying
from smallville.memory.stream import Mark
from smallville.sim.copies import ArenaMap, Copy, groups
from smallville.sim.dispatch import Dispatcher

Key = tuple[str, int]  # (request key, occurrence of that key in the run)
SLICE = 512  # events a copy runs before the original looks at its answers again
FAILURES = 3  # copies that fail before run-ahead gives up for the run
WINDOW = 1800.0  # simulated seconds a copy may run past its snapshot (at most `lookahead`)
REFRESH = 300.0  # simulated seconds the clock moves on before a copy that stopped short is made again


class Ahead:
    """The answers fetched ahead of the clock, the calls still in flight, and the answers the
    in-order run took since the oldest snapshot a live copy was made from."""

    def __init__(self, brain: Brain, *, concurrency: int = 16, lookahead: float = 3600.0) -> None:
        self.brain = brain  # answers one request: `answer_one(request)`
        self.lookahead = lookahead  # simulated seconds a copy may run past the clock
        self.concurrency = concurrency
        self.pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="smallville-ahead")
        self.done: dict[Key, Any] = {}  # (answer, error or None), or the exception the call raised
        self.flight: dict[Key, Future] = {}
        self.sent_at: dict[Key, float] = {}  # when each call in flight was sent (wall clock)
        self.latency = 0.0  # how long a call takes (a moving average)
        self.stats = Counter()
        self.count = 0  # answers the in-order run has taken
        self.at: dict[str, list[int]] = {}  # each key's takes by the in-order run, by their number in the run
        self.kept: dict[Key, tuple[int, Any]] = {}  # taken answers (number, outcome), back to `base`
        self.base = 0

    # ---- the in-order side ----------------------------------------------------------

    def keys(self, requests: Sequence[rq.Message]) -> list[Key]:
        seen: Counter[str] = Counter()
        out = []
        for request in requests:
            key = rq.request_key(request)
            out.append((key, len(self.at.get(key, ())) + seen[key]))
            seen[key] += 1
        return out

    def submit(self, key: Key, request: rq.Message) -> bool:
        """Send `request` for `key`, unless it has been already; whether it was sent now."""
        if key in self.done or key in self.flight or key in self.kept:
            return False
        self.flight[key] = self.pool.submit(self.brain.answer_one, request)
        self.sent_at[key] = time.perf_counter()
        self.stats["sent"] += 1
        return True

    def collect(self) -> int:
        landed = 0
        for key in [k for k, f in self.flight.items() if f.done()]:
            future = self.flight.pop(key)
            if future.cancelled():
                continue
            self.done[key] = future.exception() or future.result()
            self._landed(key)
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
                self._landed(key)
            result = self.done.pop(key)
            self.kept[key] = (self.count, result)
            self.at.setdefault(key[0], []).append(self.count)
            self.count += 1
            if isinstance(result, BaseException):
                raise result
            answer, error = result
            if error is not None:
                fallbacks.append(Fallback(i, request.kind, key[0], error))
            answers.append(answer)
        return answers, fallbacks

    def _landed(self, key: Key) -> None:
        took = time.perf_counter() - self.sent_at.pop(key, time.perf_counter())
        self.latency = took if not self.latency else 0.9 * self.latency + 0.1 * took

    # ---- the copies' side -----------------------------------------------------------

    def rebase(self, count: int) -> None:
        """Keep only the answers taken from the `count`th on (no live copy needs older ones)."""
        if count > self.base:
            self.kept = {key: kept for key, kept in self.kept.items() if kept[0] >= count}
            self.base = count

    def used_at(self, key: str, count: int) -> int:
        """Occurrences of `key` among the first `count` answers the in-order run took."""
        return bisect_left(self.at.get(key, ()), count)

    def fetched(self, key: Key):
        """The outcome fetched for `key`, or None."""
        result = self.done.get(key)
        if result is None and key in self.kept:
            return self.kept[key][1]
        return result

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)  # calls under way finish and are counted
        self.collect()
        self.stats["unused"] = len(self.done)
        self.stats["unused_fallbacks"] = sum(1 for r in self.done.values() if isinstance(r, tuple) and r[1] is not None)


def _outcome(future: Future):
    try:
        return future.result()
    except BaseException as exc:  # re-raised by `take` in the simulation's thread
        return exc


class Prefetched(Wrapper):
    """A brain that answers from what `Ahead` fetched (waiting for what is on its way)."""

    def __init__(self, ahead: Ahead) -> None:
        super().__init__(ahead.brain)
        self.ahead = ahead

    @override
    def describe(self) -> dict:
        return {**self.inner.describe(), "run_ahead": self.ahead.lookahead}

    @override
    def answer(self, requests: Sequence[rq.Message]) -> Answers:
        return Answers(*self.ahead.take(requests))


@dataclass
class Snapshot:
    """The simulation at the start of a tick: its state, each stream's mark, how many
    answers the in-order run had taken, and (worked out when first needed) its groups."""

    t: float
    state: dict
    marks: dict[str, Mark]
    taken: int
    horizon: float
    groups: list[frozenset[str]] | None = field(default=None)


class RunAheadDispatcher(Dispatcher):
    """A dispatcher that, while it waits for the answers of a batch, runs copies of the
    town ahead to find what else the run will ask, and fetches it too."""

    def __init__(self, sim, ahead: Ahead, base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)  # a restored run's counters go on
        self.sim = sim
        self.ahead = ahead
        self.arena_map = ArenaMap(sim.world.grid)
        self.snapshot: Snapshot | None = None
        self.copies: list[Copy] = []  # live copies, of groups that do not overlap
        self.turn = 0  # the copy that runs next
        self.waiting_since = 0.0  # when the run began to wait for its present batch (wall clock)
        self.worlds: list = []  # worlds of copies gone, to be used again
        self._overlay = None  # what the copies embed with (`copies_embedder`)
        if ahead.lookahead > 0:
            self._note()  # made between steps (before the start, or restored)
            sim.at_each_tick(self._note)

    def close(self) -> None:
        self.copies = []

    def _note(self) -> None:
        """The start of a tick: note the state the next copies will start from."""
        if self.ahead.lookahead <= 0:
            return
        sim, cpu = self.sim, time.thread_time()
        now = sim.env.now
        horizon = min(getattr(sim, "until", float("inf")), now + min(self.ahead.lookahead, WINDOW))
        self.snapshot = Snapshot(
            now, sim.get_state(), {a: agent.stream.mark() for a, agent in sim.agents.items()}, self.ahead.count, horizon
        )
        self._rebase()
        self.ahead.stats["snapshots_cpu_us"] += int(1e6 * (time.thread_time() - cpu))

    def copies_embedder(self):
        """What the copies embed with: an `Overlay` of the run's cache, made once (the copies
        share what they embedded; the run's cache is left as if they never asked)."""
        if self._overlay is None:
            from smallville.embed import Overlay, TextCache

            embedder = self.sim.embedder
            self._overlay = Overlay(embedder) if isinstance(embedder, TextCache) else embedder
        return self._overlay

    def spare_world(self):
        """A world for a new copy, with no one in it (`set_state` puts its people and the
        objects as they were): one a copy that is gone had, or a new one."""
        world = self.worlds.pop() if self.worlds else self.sim.world.copy()
        world.clear()
        return world

    def _rebase(self) -> None:
        oldest = min([c.snapshot.taken for c in self.copies] + [self.snapshot.taken])
        self.ahead.rebase(oldest)

    def answer_batch(self, batch: list) -> None:
        """Fetch the batch's answers (running copies ahead meanwhile), then answer it in order."""
        asked, _ = self.guard(batch, count=False)  # what the in-order flush will ask
        ahead = self.ahead
        keys = ahead.keys([batch[i][2] for i in asked])
        self.waiting_since = time.perf_counter()
        for key, i in zip(keys, asked):
            ahead.submit(key, batch[i][2])
        while True:
            ahead.collect()
            if all(k in ahead.done for k in keys):
                break
            if not self._explore():
                wait(list(ahead.flight.values()), timeout=self._patience(), return_when=FIRST_COMPLETED)
        super().answer_batch(batch)

    def _explore(self) -> bool:
        """Run a copy on for a slice, after making the copies that are due (`_renew`): of
        every group no live copy holds. False when there is nothing to run. Counts the wall
        time and this thread's CPU time the copies took."""
        ahead, snapshot = self.ahead, self.snapshot
        if ahead.lookahead <= 0 or snapshot is None:
            return False
        began, cpu = time.perf_counter(), time.thread_time()
        try:
            self._renew(ahead, snapshot)
            return self._run_one(ahead)
        except Exception:
            return self._failed()
        finally:
            ahead.stats["copies_ms"] += int(1000 * (time.perf_counter() - began))
            ahead.stats["copies_cpu_us"] += int(1e6 * (time.thread_time() - cpu))

    def _renew(self, ahead: Ahead, snapshot: Snapshot) -> None:
        """Make a copy of every group no live copy holds, after dropping the copies that are
        due. A finished copy goes on (made again) only once it can get further than it did:
        an answer one of its stopped agents waits for came (all of them, which come back
        about together, or some a call's time ago). When the in-order run took those answers
        itself it is usually about to reach a later snapshot, a cheaper start; the copy waits
        for that while the run's present wait is under a call's time, then is made again
        from its own snapshot, since the run may wait on in that tick for other people's
        answers while the copy's people could go far ahead.

        Liveness: a copy that could get further than it did from its snapshot is running,
        or due once the run has waited a call's time (`_patience` wakes the wait); one that
        waits for no answer can get further only from a later snapshot, which comes only
        when the run goes on."""

        def due(copy: Copy) -> bool:
            """Still going but behind the snapshot; or gone as far as it could, and either an
            answer its stopped agents wait for came, or it waits for none (it stopped at its
            horizon, or out of patience) and the snapshot has moved on (`_renew` says why)."""
            if not copy.finished:
                return copy.now < snapshot.t
            if copy.unblocked():
                waited = time.perf_counter() - copy.finished_at
                if copy.unblocked_ahead() or snapshot.t > copy.snapshot.t:
                    return copy.all_unblocked() or waited > ahead.latency
                return time.perf_counter() - self.waiting_since > ahead.latency
            return not (copy.waiting and copy.blocked) and snapshot.t >= copy.snapshot.t + REFRESH

        gone = [c for c in self.copies if due(c)]
        if not gone and len(self.copies) and all(not c.finished for c in self.copies):
            return
        if len(ahead.flight) >= ahead.concurrency and self.copies:
            return  # enough calls in flight: new copies would only add to the queue
        self.copies = [c for c in self.copies if c not in gone]
        self.worlds.extend(c.sim.world for c in gone if c.built)
        held = {a for c in self.copies for a in c.group}
        if snapshot.groups is None:
            snapshot.groups = groups(snapshot.state, self.arena_map, snapshot.horizon)
        for group in snapshot.groups:
            if not group & held:
                self.copies.append(Copy(self, snapshot, group, snapshot.horizon))
                held |= group
        self._rebase()

    def _patience(self) -> float | None:
        """How long to wait for an answer before looking at the copies again: half a call's
        time while a finished copy has some answers it waits for (see `_renew`)."""
        if any(c.finished and c.unblocked() for c in self.copies):
            return max(0.01, self.ahead.latency / 2)
        return None

    def _run_one(self, ahead: Ahead) -> bool:
        """Run the next copy that can go on for a slice (each in turn)."""
        cap = 2 * ahead.concurrency
        live = [c for c in self.copies if not c.finished]
        if not live or len(ahead.flight) >= cap:
            return False
        copy = live[self.turn % len(live)]
        self.turn += 1
        if not copy.built:
            ahead.stats["copies"] += 1
        copy.run(SLICE, cap)
        return True

    def _failed(self) -> bool:
        """A copy broke: something in this run breaks copies, so after a few, stop making them."""
        self.copies = []
        self.ahead.stats["failed_copies"] += 1
        if self.ahead.stats["failed_copies"] >= FAILURES:
            self.ahead.lookahead = 0
        return False


def fetching_ahead(stack: Stack) -> Stack:
    """`stack` fetching its answers ahead of the clock when its settings say so (a model
    brain with `lookahead` > 0): its brain answers from what `Ahead` fetched, and the run
    answers through a `RunAheadDispatcher` (the session sets it up when `stack.ahead` is
    there). Never behind a replay: a replayed answer is already here."""
    settings = stack.settings
    if settings.is_offline or not settings.lookahead or isinstance(stack.brain, Replaying):
        return stack
    ahead = Ahead(stack.brain, concurrency=settings.concurrency_limit, lookahead=settings.lookahead)
    return replace(stack, brain=Prefetched(ahead), ahead=ahead)
