"""Run-ahead's copies: part of the town as it was at a snapshot, run on in this process to
find the requests the in-order run will make (see `smallville.sim.runahead`).

The town is cut into groups (`groups`): people who cannot meet anyone outside their group
before the copy's horizon. An agent perceives, talks to and shares objects with others in
its own arena only, and the engine moves an agent only to its plan block's place at the
block's start, or within the place (sector) it is in (an action's room, an object, a bed);
so until its plan runs out an agent stays within its place and the places of its blocks
begun since. Two agents
whose places can never meet before the horizon cannot change each other's requests, and a
copy of each group runs alone: an answer that comes for one group's agent sends only that
group's copy back to the snapshot, not the town. One whose plan runs out before the horizon
(about to plan a new day) could go anywhere, and joins everyone.

In a copy, an agent whose answer is missing stops where it is, and so does every agent of
the group that could have met it since (`Reach`); one whose rating is missing goes on a
while (`Copy`). Every other agent's requests are the ones the in-order run will make.
"""

from __future__ import annotations

import heapq
import time
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from smallville.brain import requests as rq
from smallville.brain.kinds import safe_answer
from smallville.brain.wrappers import RATINGS
from smallville.sim.agent import Phase
from smallville.sim.dispatch import Dispatcher
from smallville.sim.log import Counting

if TYPE_CHECKING:
    import simpy

    from smallville.sim.engine import Simulation
    from smallville.sim.runahead import Key, RunAheadDispatcher, Snapshot

PATIENCE = 900.0  # simulated seconds a copy goes on without finding a request to send


class ArenaMap:
    """The map as run-ahead reads it: each tile's arena, the arenas of each place, and
    which tiles can be walked."""

    def __init__(self, grid) -> None:
        self.grid = grid
        self.walkable = np.zeros((grid.height, grid.width), dtype=bool)
        for x, y in grid.walkable_tiles():
            self.walkable[y, x] = True
        names = grid.arenas()
        self.arena_ids = np.full(self.walkable.shape, -1, dtype=np.int64)  # each tile's arena, -1 for walls
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

    def sector_of(self, where: str) -> set[int]:
        """The arenas of the sector `where` lies in: where an agent sent there may go."""
        return self.arenas_of(where.split(" / ")[0])

    def sector_at(self, tile: tuple[int, int]) -> set[int]:
        """The arenas of the sector of a tile (none for a wall)."""
        area = self.grid.area_at(tile)
        return self.sector_of(area) if area else set()

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


def groups(state: dict, arena_map: ArenaMap, until: float) -> list[frozenset[str]]:
    """The town of `state` cut into groups that cannot meet before `until` (see the module
    docstring), sorted by their first agent."""
    t0 = state["t"]
    parent: dict[str, str] = {}

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    holder: dict[int, str] = {}  # arena -> an agent who can be there
    for agent_id, agent in sorted(state["agents"].items()):
        parent[agent_id] = agent_id
        plan = agent["plan"]
        if not plan or plan[-1][1] < until:  # a new day to plan before `until`: anywhere
            return [frozenset(state["agents"])]
        arenas = set(arena_map.sector_at(tuple(state["positions"][agent_id])))
        doing = agent["doing"]
        if doing and doing["phase"] == Phase.WALKING and doing.get("tile"):
            arenas |= arena_map.sector_at(tuple(doing["tile"]))
        for start, end, _, where, *_ in plan:
            if where and end > t0 and start <= until:
                arenas |= arena_map.sector_of(where)
        for arena in arenas - {-1}:
            other = holder.setdefault(arena, agent_id)
            if other != agent_id:
                parent[root(agent_id)] = root(other)
    members: dict[str, list[str]] = {}
    for agent_id in sorted(parent):
        members.setdefault(root(agent_id), []).append(agent_id)
    return sorted((frozenset(m) for m in members.values()), key=min)


class Reach:
    """The arenas that stopped agents could be in by now (`at`; None: any arena).

    Until its plan runs out a stopped agent stays within its place and the places of its
    blocks begun since (the module docstring says why). An agent stopped with no plan left
    (about to plan a new day) could go anywhere, as fast as it walks: one tile per
    `tile_time`. One whose plan runs out while stopped is taken to be anywhere. Time only
    goes forward, so what is reached stays reached: each stop is looked at once, and each
    later block once, when it begins."""

    def __init__(self, arena_map: ArenaMap, tile_time: float) -> None:
        self.arena_map, self.tile_time = arena_map, tile_time
        self.known: set[int] = set()  # reached for good
        self.blocks: list[tuple[float, int, str]] = []  # (start, n, place) of blocks yet to begin
        self.expires = np.inf  # the first time a stopped agent's plan runs out
        self.roaming: list[tuple[float, tuple]] = []  # (time, tiles) of agents stopped with no plan left
        self._made: tuple = (None, None)  # (key, set) of the last `at`

    def add(self, t: float, tiles: tuple, arena: str, plan: list[tuple[float, str]], ends: float) -> None:
        """A stop at time `t`, on or heading to `tiles`, in `arena`, with the rest of its plan
        (block starts and places) running out at `ends`."""
        if ends <= t:
            self.roaming.append((t, tiles))
            self._made = (None, None)
            return
        self.expires = min(self.expires, ends)
        self.known |= self.arena_map.sector_of(arena)
        for tile in tiles:
            self.known |= self.arena_map.sector_at(tile)
        for start, where in plan:
            if where:
                heapq.heappush(self.blocks, (start, len(self.blocks), where))
        self._made = (None, None)

    def at(self, now: float) -> set[int] | None:
        if now >= self.expires:
            return None
        while self.blocks and self.blocks[0][0] <= now:
            self.known |= self.arena_map.sector_of(heapq.heappop(self.blocks)[2])
            self._made = (None, None)
        steps = tuple(int((now - t) // self.tile_time) for t, _ in self.roaming)
        if self._made[0] != (len(self.known), steps):
            made = set(self.known)
            for (_, tiles), n in zip(self.roaming, steps):
                made |= self.arena_map.within(tiles, n)
            self._made = ((len(self.known), steps), made)
        return self._made[1]


class Copy:
    """One group of the town as it was at a snapshot, run ahead in this process (see the
    module docstring). `finished` once every agent has stopped, or it reached its horizon,
    or it went `PATIENCE` simulated seconds without finding a request to send (every agent
    still going is then where earlier copies have been: a later copy, from a later
    snapshot, goes on).

    An agent whose rating has not come goes on (`guessing`) rather than stop, rated as the
    memory model guesses (`guess`): at the top. A rating's request holds only the texts to
    rate (and their kinds), the same whatever the agent retrieves, and a rating changes
    nothing others can see of the agent until it asks for something else:

    - the paper's importance (rated 10): only what the agent retrieves when it next asks,
      and whether it reflects. Rated at the top, its importance since its last reflection
      is at least the true one, so it asks to reflect no later than it would: it cannot act
      on past a reflection it would have made.
    - the salience model's tags (the source and the emotion of the highest weights): only
      whether the memory is consolidated, so what the agent retrieves, the places it has
      been told of (which only its plan requests are given) and what it reflects on as it
      falls asleep. The draw is taken whatever the tag, from a generator nothing else draws
      from, so where the agent walks and every later draw are the run's. At the highest I a
      memory is consolidated whenever it truly would be, so the agent holds (long-term or in
      its working memory) every memory it truly would: if the run asks for insights as it
      falls asleep (asked when the day left any memory), the copy asks too.

    So it stops at its next request other than a rating, or a rating of a text it is
    guessing (a text an agent has had rated is not asked again: `RatingMemo`). Others in
    its arena are not stopped by it."""

    sim: Simulation  # the rest is there once the copy is built (`build`)
    asking: _Asking
    env: simpy.Environment
    reach: Reach

    def __init__(self, dispatch: RunAheadDispatcher, snapshot: Snapshot, group: frozenset[str], horizon: float) -> None:
        """A copy to be: it is built when it first runs, since a copy made at a tick is often
        replaced by one from a later snapshot before its turn comes."""
        self.dispatch, self.ahead, self.arena_map = dispatch, dispatch.ahead, dispatch.arena_map
        self.snapshot, self.group, self.horizon = snapshot, group, horizon
        self.built = False
        self.finished = False
        self.finished_at = 0.0  # when it finished, by the wall clock
        self.waiting = False  # it finished with every agent stopped for answers
        self.blocked: set[Key] = set()  # the answers its stopped agents wait for

    def build(self) -> None:
        """The group's part of the town at the snapshot, with streams branched from the original's."""
        from smallville.sim.engine import Simulation

        original, snapshot, group = self.dispatch.sim, self.snapshot, self.group
        embedder = self.dispatch.copies_embedder()
        streams = {a: original.agents[a].stream.branch(snapshot.marks[a], embedder) for a in sorted(group)}
        self.sim = Simulation(
            original.scenario,
            original.brain,
            embedder,
            config=original.config,
            log=Counting(original.scenario.start),
            world=self.dispatch.spare_world(),
            streams=streams,
        )
        self.sim.set_state(_part(snapshot.state, group), streams)
        self.sim.start()  # a snapshot from before the start begins the town
        self.asking = _Asking(self, self.sim.dispatch)
        self.sim.use_dispatcher(self.asking)
        self.env = self.sim.env
        self.used: Counter[str] = Counter()  # occurrences of each key the copy took since the snapshot
        self.stopped: dict[str, float] = {}  # agent -> when it stopped
        self.guessing: dict[str, set[str]] = {}  # agents going on with guessed ratings, and their texts
        self.guessed: dict[str, list[Key]] = {}  # ... and the keys of those ratings
        self.reach = Reach(self.arena_map, self.sim.world.tile_time)
        self.found = self.env.now  # when it last found a request to send
        self._scanned: tuple = ()  # (time, stops) when every agent was last looked at
        self.env.process(self._watch())
        self.built = True

    @property
    def now(self) -> float:
        return self.env.now if self.built else self.snapshot.t

    def unblocked(self) -> bool:
        """Whether an answer one of its stopped agents waits for has come: only then can a
        copy made again get further than this one did."""
        return any(self.ahead.fetched(key) is not None for key in self.blocked)

    def unblocked_ahead(self) -> bool:
        """Whether one of the answers it waits for has come and the in-order run has not taken it."""
        return any(key in self.ahead.done for key in self.blocked)

    def all_unblocked(self) -> bool:
        return all(self.ahead.fetched(key) is not None for key in self.blocked)

    def run(self, events: int, cap: int) -> None:
        """Run on for at most `events` events of the copy's clock, pausing once `cap` calls
        are in flight."""
        if not self.built:
            self.build()
        env = self.env
        for _ in range(events):
            if self.finished or len(self.ahead.flight) >= cap:
                return
            if env.peek() >= min(self.horizon, self.found + PATIENCE):
                self._finish(waiting=False)
                return
            env.step()

    def _finish(self, waiting: bool) -> None:
        """Gone as far as it can: every agent stopped for answers (`waiting`), or at the
        horizon, or out of patience."""
        self.finished, self.finished_at, self.waiting = True, time.perf_counter(), waiting

    # ---- answering in the copy ------------------------------------------------------

    def answer(self, batch) -> None:
        """Answer a batch of the copy from what has been fetched. A batch's requests were all
        made before any of its answers is applied, so every request of an agent that could
        not have met a stopped agent before the batch is the in-order run's: each is sent,
        even when a missing answer in the same batch stops its agent. A missing rating does
        not stop its agent: it goes on rated at the top (see `Copy`)."""
        ahead = self.ahead
        _, refused = self.asking.guard(batch)
        certain, unsure = [], []
        for i, (agent, _, request, event) in enumerate(batch):
            if i in refused:  # past the runaway guard's ceiling: the safe default
                event.succeed(safe_answer(request))
                continue
            name = rq.request_key(request)
            key = (name, ahead.used_at(name, self.snapshot.taken) + self.used[name])
            self.used[name] += 1
            if agent not in self.stopped:
                self._spread(agent)
            if agent in self.stopped:
                continue
            if agent in self.guessing and (
                not isinstance(request, RATINGS) or not self.guessing[agent].isdisjoint(request.texts)
            ):
                unsure.append(agent)  # it may rest on a guessed rating: not the run's
                self.blocked.update(self.guessed[agent])
            else:
                certain.append((agent, key, request, event))
        missing = []
        for agent, key, request, event in certain:
            result = ahead.fetched(key)
            if result is None or isinstance(result, BaseException):
                if result is None:
                    ahead.submit(key, request)
                    self.found = self.env.now
                    ahead.stats["most_ahead_s"] = max(
                        ahead.stats["most_ahead_s"], int(self.env.now - self.dispatch.env.now)
                    )
                    if isinstance(request, RATINGS):
                        self.guessing.setdefault(agent, set()).update(request.texts)
                        self.guessed.setdefault(agent, []).append(key)
                        ahead.stats["guessed_tags" if isinstance(request, rq.TagMemories) else "guessed_ratings"] += 1
                        event.succeed(self.sim.memory.guess(request))
                        continue
                    self.blocked.add(key)
                missing.append(agent)
            else:
                event.succeed(self.asking.fit(agent, request, result[0]))
        for agent in missing + unsure:
            if agent not in self.stopped:
                self._mark(agent)
        if missing or unsure:
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
        heading = doing.tile if doing is not None and doing.phase == Phase.WALKING else None
        return (here,) if heading is None or heading == here else (here, heading)

    def _within(self, agent: str, reach: set[int] | None) -> bool:
        """Whether `agent` is in (or walking to) an arena of `reach` (None: all)."""
        if reach is None:
            return True
        arena_at = self.arena_map.arena_at
        if arena_at.get(self.sim.world.position(agent), -1) in reach:
            return True
        doing = self.sim.agents[agent].doing
        return doing is not None and doing.phase == Phase.WALKING and arena_at.get(doing.tile, -1) in reach

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
            self._finish(waiting=True)

    def _watch(self):
        while True:
            yield self.env.timeout(self.sim.tick)
            if self.stopped:
                self._spread()


def _part(state: dict, group: frozenset[str]) -> dict:
    """The part of a simulation's state that concerns `group` (its conversations are among
    its own people: people who talk share an arena)."""
    dispatch = state["dispatch"]
    return {
        **state,
        "agents": {a: s for a, s in state["agents"].items() if a in group},
        "dispatch": {
            **dispatch,
            "seq": {a: n for a, n in dispatch["seq"].items() if a in group},
            "asked": [entry for entry in dispatch["asked"] if entry[0] in group],
        },
        "positions": {a: p for a, p in state["positions"].items() if a in group},
        "conversations": [c for c in state["conversations"] if c["a"] in group and c["b"] in group],
    }


class _Asking(Dispatcher):
    """The copy's dispatcher: it hands each batch to the copy, which answers what has been
    fetched and stops the agents whose answers have not."""

    def __init__(self, copy: Copy, base: Dispatcher) -> None:
        super().__init__(base.env, base.brain, base.on_fallback)
        self.take_over(base)
        self.share_canned(copy.dispatch)
        self.copy = copy

    def answer_batch(self, batch: list) -> None:
        """The copy answers what has been fetched and stops the agents whose answers have not."""
        self.copy.answer(batch)
