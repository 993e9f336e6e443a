"""The agent panel and interviews: an agent at a time of a run, from the run's state restored
in memory (`Run.state_at`), as `smallville inspect` and `smallville interview` do.

On a big town both use the nearest saved state at or before the time asked (a checkpoint's, or
the town's start) when going on from it would cost too much (`smallville.run.shown`), and say so."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from datetime import timedelta
from pathlib import Path

from smallville import mind
from smallville.run import Run
from smallville.run.shown import EXACT_WORK, Shown, shown, state

__all__ = ["EXACT_WORK", "Minds", "recent_memories"]

RECENT = 10  # recent memories shown (observations aside)


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
    `exact_work`: the most agent-seconds a panel or an interview simulates on from a saved
    state (`smallville.run.shown`)."""

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
        """The agent's panel as of `t` seconds, or of the saved state before (`shown`): `t` is
        the state's time, `asked` the time asked, `state` which one, and `note` says when they
        differ."""
        with self.lock:
            run = self.run(path)
            choice = shown(run, t, self.exact_work)
            key = (path, choice.t, choice.saved, agent_id)
            if key in self.panels:
                self.panels.move_to_end(key)
            else:
                sim = self._state(run, choice)
                self.panels[key] = {**mind.inspect_agent(sim, agent_id), "recent": recent_memories(sim, agent_id)}
                while len(self.panels) > self.most:
                    self.panels.popitem(last=False)
            return {**self.panels[key], **choice.fields(run)}

    def _state(self, run: Run, choice: Shown):
        key = (run.path, choice.t, choice.saved)
        if key in self.states:
            self.states.move_to_end(key)
            return self.states[key]
        sim = state(run, choice)
        self.states[key] = sim
        while len(self.states) > self.keep:
            self.states.popitem(last=False)[1].close()
        return sim

    def interview(self, path: Path, t: float, agent_id: str, question: str, exact: bool = False) -> dict:
        """As `smallville interview`: a state of its own (the saved one before `t` on a big town,
        unless `exact`), restored for the question, closed after."""
        run = self.run(path)
        choice = shown(run, t, math.inf if exact else self.exact_work)
        with state(run, choice) as sim:
            out = mind.interview(sim, agent_id, question)
        return {**out, **choice.fields(run)}

    def close(self) -> None:
        with self.lock:
            while self.states:
                self.states.popitem()[1].close()
