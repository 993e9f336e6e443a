"""The agent panel and interviews: an agent at a time of a run, from the run's state restored
in memory (`Run.state_at`), as `smallville inspect` and `smallville interview` do."""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import timedelta
from pathlib import Path

from smallville import mind
from smallville.run import Run

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
    inspected once per state, and the panel is kept, so asking again shows the same."""

    def __init__(self, keep: int = 4, panels: int = 512) -> None:
        self.keep, self.most = keep, panels
        self.lock = threading.Lock()
        self.states: OrderedDict = OrderedDict()
        self.panels: OrderedDict = OrderedDict()

    def panel(self, path: Path, t: float, agent_id: str) -> dict:
        key = (path, t, agent_id)
        with self.lock:
            if key in self.panels:
                self.panels.move_to_end(key)
                return self.panels[key]
            sim = self._state(path, t)
            out = mind.inspect_agent(sim, agent_id)
            out["recent"] = recent_memories(sim, agent_id)
            out["t"] = t
            self.panels[key] = out
            while len(self.panels) > self.most:
                self.panels.popitem(last=False)
            return out

    def _state(self, path: Path, t: float):
        if (path, t) in self.states:
            self.states.move_to_end((path, t))
            return self.states[(path, t)]
        sim = Run.open(path).state_at(t)
        self.states[(path, t)] = sim
        while len(self.states) > self.keep:
            self.states.popitem(last=False)[1].close()
        return sim

    @staticmethod
    def interview(path: Path, t: float, agent_id: str, question: str) -> dict:
        """As `smallville interview`: a state of its own, restored for the question, closed after."""
        with Run.open(path).state_at(t) as sim:
            out = mind.interview(sim, agent_id, question)
        out["t"] = t
        return out

    def close(self) -> None:
        with self.lock:
            while self.states:
                self.states.popitem()[1].close()
