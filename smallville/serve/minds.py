"""The agent panel and interviews: an agent at a time of a run, from the run's state restored
in memory (`Run.state_at`), as `smallville inspect` and `smallville interview` do.

The panel of a big town shows the nearest checkpoint at or before the time asked when going
on from it to that time would cost too much (`shown_time`), and says so."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import timedelta
from pathlib import Path

from smallville import mind
from smallville.run import Run

RECENT = 10  # recent memories shown (observations aside)
# Going on from a checkpoint costs each agent its first instant (its stream loaded, the hour's
# block decomposed: as much as about 40 simulated minutes, measured on the_ville and a generated
# 1,000-agent town, about 2 us an agent-second on a 2-core machine), then each second to go.
FIRST = 2400.0
# The most agent-seconds a panel simulates before it shows the checkpoint's state instead (about
# 0.5 s): the_ville's 25 agents always go on (150,000 at most with hourly checkpoints).
EXACT_WORK = 250_000.0


def shown_time(run: Run, t: float, most: float = EXACT_WORK) -> float:
    """The time of the state the panel shows for `t`: `t` itself, or the nearest checkpoint's
    at or before it when going on from there to `t` would cost more than `most` agent-seconds
    (`FIRST` and the seconds to go, for each agent). Before any checkpoint there is no state to
    show instead; a time outside the run is left to `Run.state_at` to refuse."""
    if not 0 <= t <= run.reached():
        return t
    start = run.start_point(t)
    if start is None or start.t == t:
        return t
    return start.t if len(run.manifest.agents) * (FIRST + t - start.t) > most else t


def clock(run: Run, t: float) -> str:
    """Simulated second `t` of `run` as the clock shows it, `14:30`."""
    return (run.start + timedelta(seconds=t)).strftime("%H:%M")


def recent_memories(sim, agent_id: str, n: int = RECENT) -> list[dict]:
    """The agent's latest memories other than observations, newest first."""
    agent = sim.agents[agent_id]
    stream, out = agent.stream, []
    for i in range(len(stream) - 1, -1, -1):
        m = stream[i]
        if m.kind != "observation":
            out.append(
                {
                    "id": m.id,
                    "kind": m.kind,
                    "importance": int(m.importance),
                    "text": m.text,
                    "time": (sim.scenario.start + timedelta(seconds=m.created)).strftime("%Y-%m-%d %H:%M"),
                }
            )
            if len(out) == n:
                break
    return out


class Minds:
    """Restored states kept for the panel (the last `keep` times looked at) and the panels
    made from them. Inspecting retrieves, which marks memories accessed: each agent is
    inspected once per state, and the panel is kept, so asking again shows the same.
    `exact_work`: the most agent-seconds a panel simulates on from a checkpoint (`shown_time`)."""

    def __init__(self, keep: int = 4, panels: int = 512, exact_work: float = EXACT_WORK) -> None:
        self.keep, self.most, self.exact_work = keep, panels, exact_work
        self.lock, self.reading = threading.Lock(), threading.Lock()
        self.states: OrderedDict = OrderedDict()
        self.panels: OrderedDict = OrderedDict()
        self.scenarios: OrderedDict = OrderedDict()

    def run(self, path: Path) -> Run:
        """The run in `path`: its manifest read again (a live run's moves on), its scenario read
        once for the last `keep` runs looked at (a 1,000-agent town's takes most of a second)."""
        with self.reading:
            known = self.scenarios.get(path)
        run = Run.open(path, known)
        scenario = run.scenario
        with self.reading:
            self.scenarios[path] = scenario
            self.scenarios.move_to_end(path)
            while len(self.scenarios) > self.keep:
                self.scenarios.popitem(last=False)
        return run

    def panel(self, path: Path, t: float, agent_id: str) -> dict:
        """The agent's panel as of `t` seconds, or of the checkpoint before (`shown_time`):
        `t` is the state's time, `asked` the time asked, and `note` says when they differ."""
        with self.lock:
            run = self.run(path)
            at = shown_time(run, t, self.exact_work)
            key = (path, at, agent_id)
            if key in self.panels:
                self.panels.move_to_end(key)
            else:
                sim = self._state(run, at)
                self.panels[key] = {**mind.inspect_agent(sim, agent_id), "recent": recent_memories(sim, agent_id)}
                while len(self.panels) > self.most:
                    self.panels.popitem(last=False)
            out = {**self.panels[key], "t": at, "asked": t}
            if at != t:
                out["note"] = f"as of {clock(run, at)}, the last saved state; the clock is at {clock(run, t)}"
            return out

    def _state(self, run: Run, t: float):
        path = run.path
        if (path, t) in self.states:
            self.states.move_to_end((path, t))
            return self.states[(path, t)]
        sim = run.state_at(t)
        self.states[(path, t)] = sim
        while len(self.states) > self.keep:
            self.states.popitem(last=False)[1].close()
        return sim

    def interview(self, path: Path, t: float, agent_id: str, question: str) -> dict:
        """As `smallville interview`: a state of its own, restored for the question, closed after."""
        with self.run(path).state_at(t) as sim:
            out = mind.interview(sim, agent_id, question)
        out["t"] = t
        return out

    def close(self) -> None:
        with self.lock:
            while self.states:
                self.states.popitem()[1].close()
