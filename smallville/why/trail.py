"""A run's event log indexed for asking "why": each agent's memories by id, the `recall` of
each request by its number, conversations and their lines, where each agent was.

`Trail.read(run_dir)` reads `events.jsonl` once (a fork's holds its parent's history too);
everything else here looks things up in memory. Nothing is simulated and no model is asked.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path

from smallville import events as ev
from smallville.errors import NotRecorded

WHERE_KINDS = (ev.SPAWN, ev.MOVE, ev.ACTION, ev.SLEEP, ev.WAKE)
"""The events that say which area an agent is in (a walk's, where it is going)."""


@dataclass
class Trail:
    """The log, and indices into it. `line` numbers are 1-based, as in `events.jsonl`."""

    log: list[dict]
    memories: dict[tuple[str, int], int] = field(default_factory=dict)  # (agent, id) -> line
    recalls: dict[tuple[str, int], int] = field(default_factory=dict)  # (agent, request number) -> line
    talks: list[int] = field(default_factory=list)  # talk_start lines
    says: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)  # (speaker, to, text) -> lines
    learned: dict[tuple[str, str], int] = field(default_factory=dict)  # (agent, probe) -> line
    places: dict[str, tuple[list[int], list[str]]] = field(default_factory=dict)  # agent -> (lines, areas)

    @classmethod
    def read(cls, run_dir: str | Path) -> Trail:
        """The trail of the run in `run_dir` (a torn last line is left out)."""
        with open(Path(run_dir) / "events.jsonl", encoding="utf-8") as f:
            log = [json.loads(line) for line in f if line.endswith("\n")]
        return cls.of(log)

    @classmethod
    def of(cls, log: list[dict]) -> Trail:
        trail = cls(log)
        for n, e in enumerate(log, 1):
            trail.index(n, e)
        return trail

    def index(self, n: int, e: dict) -> None:
        kind, agent, data = e["kind"], e["agent"], e["data"]
        if kind == ev.MEMORY and data.get("id") is not None:
            self.memories[agent, data["id"]] = n
        elif kind == ev.RECALL:
            self.recalls[agent, data["req"]] = n
        elif kind == ev.TALK_START:
            self.talks.append(n)
        elif kind == ev.SAY:
            self.says.setdefault((agent, data["to"], data["text"]), []).append(n)
        elif kind == ev.LEARNED:
            self.learned.setdefault((agent, data["probe"]), n)
        if kind in WHERE_KINDS:
            lines, areas = self.places.setdefault(agent, ([], []))
            lines.append(n)
            areas.append(data["area"])

    def __getitem__(self, line: int) -> dict:
        return self.log[line - 1]

    @property
    def records_recall(self) -> bool:
        """Whether the run recorded what its requests recalled (runs of older versions did not)."""
        return bool(self.recalls) or any("req" in e["data"] for e in self.log if e["kind"] in ev.DECISIONS)

    def require_recall(self) -> None:
        """NotRecorded, for a run written before recall was recorded."""
        if not self.records_recall:
            raise NotRecorded(
                "this run was written before smallville recorded what each request recalled: "
                "`why` cannot say what its decisions rested on (`why --probe` still can)"
            )

    def memory(self, agent: str, mid: int) -> dict | None:
        line = self.memories.get((agent, mid))
        return self[line] if line else None

    def recall(self, agent: str, req: int | None) -> dict | None:
        line = self.recalls.get((agent, req)) if req is not None else None
        return self[line] if line else None

    def area(self, agent: str, line: int) -> str | None:
        """Where the agent was at `line` of the log (the area its last move, action, ... names)."""
        lines, areas = self.places.get(agent, ([], []))
        i = bisect.bisect_right(lines, line) - 1
        return areas[i] if i >= 0 else None

    def said(self, speaker: str, listener: str, text: str, before: int) -> int | None:
        """The line of the `say` event of a line said, the last before `before`."""
        lines = [n for n in self.says.get((speaker, listener, text), []) if n < before]
        return lines[-1] if lines else None

    def talk_of(self, a: str, b: str, before: int) -> int | None:
        """The line of the `talk_start` of the conversation between `a` and `b` under way at `before`."""
        i = bisect.bisect_left(self.talks, before) - 1
        while i >= 0:
            e = self[self.talks[i]]
            if {e["agent"], e["data"]["with"]} == {a, b}:
                return self.talks[i]
            i -= 1
        return None

    def decision_at(self, agent: str, t: float, kind: str | None = None) -> int | None:
        """The line of the agent's last decision at or before simulated second `t`: an event
        that names its request, or a `learned` (memories, which follow the decision that made
        them, are reached by their line); `kind`: the last of that kind (a line said, a plan)."""
        best = None
        for n, e in enumerate(self.log, 1):
            if e["t"] > t:
                break
            if e["agent"] != agent or e["kind"] == ev.MEMORY or kind not in (None, e["kind"]):
                continue
            if "req" in e["data"] or e["kind"] == ev.LEARNED:
                best = n
        return best
