"""Gathers the brain requests agents make at one simulated instant and answers them together.

A request is a SimPy event. The first request at an instant schedules a flush behind every
event already queued for that instant, so all agents that wake at a tick ask first; the
flush then answers the whole batch and succeeds the events sorted by (agent id, sequence),
so agents resume in a fixed order whatever the brain did inside. Fallbacks the brain took
(the `Answers`' fallbacks) go to `on_fallback(agent, fallback)` first, in batch order. Every answer
is then made fit for its request (`brain/repair.py`); what a repair did goes to
`on_repair(agent, request, notes)`. By request kind, it counts the requests, and of their
answers those that fell back, those the runaway guard gave (`over_ceiling`) and those that
needed a repair: `outcomes` says how well the brain served the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import simpy

from smallville.brain.base import Brain, Fallback, fallbacks_of
from smallville.brain.kinds import repaired, safe_answer
from smallville.brain.requests import Message


class Dispatcher:
    """The one way agents reach the brain."""

    def __init__(
        self, env: simpy.Environment, brain: Brain, on_fallback: Callable[[str, Fallback], None] | None = None
    ) -> None:
        self.env = env
        self.brain = brain
        self.on_fallback = on_fallback
        self._pending: list[tuple[str, int, Message, simpy.Event]] = []
        self._seq: Counter[str] = Counter()
        self.batches = 0
        self.requests: Counter[str] = Counter()
        self.ceiling: int | None = None  # runaway guard: requests per agent per simulated hour
        self.on_refused: Callable[[str, Message, int], None] | None = None
        self.on_repair: Callable[[str, Message, tuple[str, ...]], None] | None = None
        self._asked: Counter[tuple[str, int]] = Counter()
        self.fallbacks: Counter[str] = Counter()  # by request kind: answers that are safe defaults
        self.over_ceiling: Counter[str] = Counter()  # ... given by the runaway guard, never asked
        self.repaired: Counter[str] = Counter()  # ... the brain's own, repaired to fit
        self._canned: dict[str, frozenset[str]] | None = None

    def ask(self, agent: str, request: Message) -> simpy.Event:
        """An event that succeeds with the brain's answer, at the same simulated time."""
        event = self.env.event()
        self._seq[agent] += 1
        if not self._pending:
            self.env.timeout(0).callbacks.append(self._flush)
        self._pending.append((agent, self._seq[agent], request, event))
        return event

    def sequence(self, agent: str) -> int:
        """How many requests `agent` has made: the number of its latest."""
        return self._seq[agent]

    def _flush(self, _: Any) -> None:
        batch = sorted(self._pending, key=lambda p: (p[0], p[1]))
        self._pending = []
        self.answer_batch(batch)

    def answer_batch(self, batch: list[tuple[str, int, Message, simpy.Event]]) -> None:
        """Answer a gathered batch, (agent, sequence, request, event) in order, and succeed its
        events: the brain is asked what the runaway guard lets through. The seam where a
        dispatcher does more first (run-ahead fetches ahead) or answers otherwise (run-ahead's
        copies answer from what was fetched)."""
        asked, refused = self.guard(batch)
        given = self.brain.answer([batch[i][2] for i in asked]) if asked else []
        answers = dict(zip(asked, given))
        self.batches += 1
        defaults = set(refused)
        for fallback in fallbacks_of(given):
            defaults.add(asked[fallback.index])
            self.fallbacks[fallback.kind] += 1
            if self.on_fallback is not None:
                self.on_fallback(batch[asked[fallback.index]][0], fallback)
        for i in refused:
            answers[i] = safe_answer(batch[i][2])
            self.over_ceiling[batch[i][2].kind] += 1
            if self.on_refused is not None:
                self.on_refused(batch[i][0], batch[i][2], self.ceiling)
        for i, (agent, _, request, event) in enumerate(batch):
            self.requests[request.kind] += 1
            event.succeed(self.fit(agent, request, answers[i], own=i not in defaults))

    def fit(self, agent: str, request: Message, answer: Message, own: bool = True) -> Message:
        """`answer` repaired for `request`, each repair reported to `on_repair` (and counted,
        if the answer is the brain's `own`, not a safe default)."""
        answer, notes = repaired(request, answer, self.canned()[request.kind])
        if notes and own:
            self.repaired[request.kind] += 1
        if notes and self.on_repair is not None:
            self.on_repair(agent, request, notes)
        return answer

    def outcomes(self) -> dict[str, dict[str, int]]:
        """By request kind: the requests, and how their answers came: `valid` as the brain
        gave them, `repaired` to fit, `fallbacks` (safe defaults: the brain failed), and
        `over_ceiling` (safe defaults of the runaway guard)."""
        out = {}
        for kind, n in sorted(self.requests.items()):
            rows = {
                "repaired": self.repaired[kind],
                "fallbacks": self.fallbacks[kind],
                "over_ceiling": self.over_ceiling[kind],
            }
            out[kind] = {"requests": n, "valid": n - sum(rows.values()), **rows}
        return out

    def canned(self) -> dict[str, frozenset[str]]:
        """Each request kind's template texts that a model may copy instead of answering
        (`Template.canned`): an answer of one is no answer (`repair`). Read once, on first use."""
        if self._canned is None:
            from smallville.brain.prompts import load_templates

            self._canned = {kind: template.canned() for kind, template in load_templates().items()}
        return self._canned

    def take_over(self, base: Dispatcher) -> None:
        """Go on where `base` stands: its runaway guard, its hooks and its counters."""
        self.ceiling, self.on_refused, self.on_repair = base.ceiling, base.on_refused, base.on_repair
        self._canned = self._canned or base._canned  # read when first used, not here
        self.requests, self.batches = Counter(base.requests), base.batches
        self._seq, self._asked = Counter(base._seq), Counter(base._asked)
        self.fallbacks, self.over_ceiling = Counter(base.fallbacks), Counter(base.over_ceiling)
        self.repaired = Counter(base.repaired)

    def share_canned(self, other: Dispatcher) -> None:
        """Use `other`'s canned texts: they are read once for a run, not once a run-ahead copy."""
        self._canned = other.canned()

    def close(self) -> None:
        """End what the dispatcher started (nothing here; run-ahead's has threads)."""

    def get_state(self) -> dict:
        """The counters, as JSON: requests by kind, batches, each agent's sequence number,
        what the runaway guard has counted this simulated hour, and by kind the answers
        that fell back, were the guard's or were repaired."""
        hour = int(self.env.now // 3600)
        return {
            "requests": dict(sorted(self.requests.items())),
            "batches": self.batches,
            "seq": dict(sorted(self._seq.items())),
            "asked": sorted([a, h, n] for (a, h), n in self._asked.items() if h >= hour),
            "fallbacks": dict(sorted(self.fallbacks.items())),
            "over_ceiling": dict(sorted(self.over_ceiling.items())),
            "repaired": dict(sorted(self.repaired.items())),
        }

    def set_state(self, state: dict) -> None:
        self.requests = Counter(state["requests"])
        self.batches = state["batches"]
        self._seq = Counter(state["seq"])
        self._asked = Counter({(a, h): n for a, h, n in state["asked"]})
        for name in ("fallbacks", "over_ceiling", "repaired"):  # (not in checkpoints of older runs)
            setattr(self, name, Counter(state.get(name, {})))

    def guard(self, batch, count: bool = True) -> tuple[list[int], list[int]]:
        """The runaway guard: positions in `batch` to ask the brain, and those past the
        agent's `ceiling` of requests in this simulated hour (they get the safe default and
        are never sent). `count=False` only looks."""
        if self.ceiling is None:
            return list(range(len(batch))), []
        hour = int(self.env.now // 3600)
        seen: Counter[tuple[str, int]] = Counter()
        asked, refused = [], []
        for i, (agent, *_rest) in enumerate(batch):
            seen[agent, hour] += 1
            (refused if self._asked[agent, hour] + seen[agent, hour] > self.ceiling else asked).append(i)
        if count:
            self._asked.update(seen)
        return asked, refused
