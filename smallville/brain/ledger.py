"""What a brain's requests cost: requests, model calls, retries, fallbacks, tokens, cost,
counted per request kind and per agent. Shared by the LLM brain and its wrappers.
`reasoning_tokens` are the part of `completion_tokens` a model spent reasoning; `cut` counts
the calls whose answer was cut off at `max_tokens`. Calls are also counted per model (a kind
may have its own), with the kinds each answered, and per deployment of a model of several
(deployments.py): each call went to one, so the deployments' figures add up to the calls'."""

from __future__ import annotations

import threading
from collections import defaultdict

FIGURES = (
    "requests",
    "calls",
    "retries",
    "fallbacks",
    "reused",
    "cached",
    "prompt_tokens",
    "completion_tokens",
    "reasoning_tokens",
    "cut",
    "cost",
)
CALL_FIGURES = ("calls", "failed", "prompt_tokens", "completion_tokens", "reasoning_tokens", "cut", "cost")
"""What is counted per model and per deployment: calls (`failed`: of them, those that got no reply)."""


class Ledger:
    """Thread-safe counters; `to_dict` is what the manifest's `usage` holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_kind: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(FIGURES, 0))
        self.by_agent: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(FIGURES, 0))
        self.by_model: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(CALL_FIGURES, 0))
        self.by_deployment: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(CALL_FIGURES, 0))
        self.answered_by: dict[str, set[str]] = defaultdict(set)  # request kind -> the models it was sent to
        self.cost_known = True
        self.busy_s = 0.0  # summed duration of model calls
        self.batch_s = 0.0  # wall time spent answering batches that made calls
        self.batches = 0
        self.span = [float("inf"), float("-inf")]  # first call's start, last call's end
        self.throttles: dict = {}  # the LLM brains' (by model), whose limits the usage reports

    def add(
        self,
        kind: str,
        agent: str | None,
        *,
        model: str | None = None,
        deployment: str | None = None,
        failed: int = 0,
        **figures: float,
    ) -> None:
        """Count `figures` for a request kind and the agent who asked (None: no agent,
        as for the preflight's calls); a call's also for the `model` it went to and its
        `deployment` (`failed`: it got no reply)."""
        with self._lock:
            for name, value in figures.items():
                self.by_kind[kind][name] += value
                if agent is not None:
                    self.by_agent[agent][name] += value
            if model is not None:
                self.answered_by[kind].add(model)
            for table, key in ((self.by_model, model), (self.by_deployment, deployment)):
                if key is not None:
                    for name, value in {**figures, "failed": failed}.items():
                        if name in CALL_FIGURES:
                            table[key][name] += value

    def add_time(self, busy: float = 0.0, batch: float = 0.0, began: float | None = None) -> None:
        with self._lock:
            self.busy_s += busy
            if began is not None:
                self.span = [min(self.span[0], began), max(self.span[1], began + busy)]
            if batch:
                self.batch_s += batch
                self.batches += 1

    def in_flight(self) -> float:
        """Model calls in flight on average, from the first call's start to the last one's end."""
        span = self.span[1] - self.span[0]
        return round(self.busy_s / span, 2) if span > 0 else 0.0

    def total(self) -> dict[str, float]:
        out = dict.fromkeys(FIGURES, 0)
        for row in self.by_kind.values():
            for name, value in row.items():
                out[name] += value
        return out

    def absorb(self, usage: dict) -> None:
        """Add the counts of another session's usage (a manifest's `usage`, `to_dict`'s
        form) to these: a resumed run's usage adds up."""
        with self._lock:
            for mine, theirs, names in (
                (self.by_kind, usage.get("by_kind", {}), FIGURES),
                (self.by_agent, usage.get("by_agent", {}), FIGURES),
                (self.by_model, usage.get("by_model", {}), CALL_FIGURES),
                (self.by_deployment, usage.get("by_deployment", {}), CALL_FIGURES),
            ):
                for key, row in theirs.items():
                    for name, value in row.items():
                        if name in names:
                            mine[key][name] += value
            for kind, models in usage.get("answered_by", {}).items():
                self.answered_by[kind].update(models)
            self.batches += usage.get("rounds", 0)
            self.cost_known = self.cost_known and usage.get("cost_known", True)

    def to_dict(self, agents: int = 0, hours: float = 0.0) -> dict:
        """Totals, by kind, by agent, and (given the town's size and simulated hours) calls
        and tokens per agent per game hour by kind."""

        def clean(row: dict) -> dict:
            return {k: (round(v, 6) if k == "cost" else int(v)) for k, v in row.items()}

        out = {
            "total": clean(self.total()),
            "cost_known": self.cost_known,
            "by_kind": {k: clean(v) for k, v in sorted(self.by_kind.items())},
            "by_agent": {k: clean(v) for k, v in sorted(self.by_agent.items())},
            "rounds": self.batches,  # batches (retry rounds included) that went to the model
            "in_flight": self.in_flight(),
        }
        for name, table in (("by_model", self.by_model), ("by_deployment", self.by_deployment)):
            if table:
                out[name] = {k: clean(v) for k, v in sorted(table.items())}
        if self.answered_by:
            out["answered_by"] = {k: sorted(v) for k, v in sorted(self.answered_by.items())}
        if len(self.throttles) == 1:
            out["concurrency"] = next(iter(self.throttles.values())).describe()
        elif self.throttles:
            out["concurrency"] = {label: t.describe() for label, t in sorted(self.throttles.items())}
        if agents and hours:
            scale = 1.0 / (agents * hours)
            out["per_agent_hour"] = {
                k: {
                    "requests": round(v["requests"] * scale, 3),
                    "calls": round(v["calls"] * scale, 3),
                    "tokens": round((v["prompt_tokens"] + v["completion_tokens"]) * scale, 1),
                }
                for k, v in sorted(self.by_kind.items())
            }
        return out
