"""Spending limits that hold: model calls, tokens and dollars.

A `Budget` knows its limits and what was spent before (a resumed run's earlier sessions)
and reads this session's spend from the ledger. `Budgeted` sits right around the LLM brain,
so only calls that really go to the model count (a reused rating, a cached or recorded
answer costs nothing). Before a batch goes out it checks the worst the batch could cost:
one call per request, each with its prompt's tokens (counted with the model's tokenizer)
plus `max_tokens` of completion. If that could pass a limit, no call of the batch goes out
and `BudgetExhausted` stops the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from smallville.brain import requests as rq
from smallville.brain.base import Wrapper, override
from smallville.errors import BudgetExhausted, SmallvilleError

if TYPE_CHECKING:
    from smallville.brain.llm import LLMBrain

LIMITS = BudgetExhausted.FLAGS  # the limits there are, by the flag that sets each


@dataclass
class Spend:
    requests: float = 0
    tokens: float = 0
    usd: float = 0.0

    def to_dict(self) -> dict:
        return {"requests": int(self.requests), "tokens": int(self.tokens), "usd": round(self.usd, 6)}

    @classmethod
    def from_dict(cls, data: dict | None) -> Spend:
        data = data or {}
        return cls(data.get("requests", 0), data.get("tokens", 0), data.get("usd", 0.0))


class Budget:
    """Limits (None: no limit) and the spend so far: `before` plus the ledger's."""

    def __init__(self, limits: dict | None, ledger, before: Spend | None = None) -> None:
        self.limits = {k: v for k, v in (limits or {}).items() if v is not None}
        unknown = set(self.limits) - set(LIMITS)
        if unknown:
            raise SmallvilleError(f"unknown budget limit {sorted(unknown)[0]!r} (known: {', '.join(LIMITS)})")
        for name, value in self.limits.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise SmallvilleError(f"{LIMITS[name]} {value!r}: must be a number >= 0")
        self.ledger = ledger
        self.before = before or Spend()
        self._lock = threading.Lock()
        self._reserved = Spend()

    def __bool__(self) -> bool:
        return bool(self.limits)

    def spent(self) -> Spend:
        total = self.ledger.total()
        return Spend(
            self.before.requests + total["calls"],
            self.before.tokens + total["prompt_tokens"] + total["completion_tokens"],
            self.before.usd + total["cost"],
        )

    def reserve(self, worst: Spend) -> None:
        """Admit a batch that could cost `worst`, or raise `BudgetExhausted`."""
        with self._lock:
            spent = self.spent()
            for name, limit in self.limits.items():
                now = getattr(spent, name) + getattr(self._reserved, name)
                if now + getattr(worst, name) > limit + 1e-12:
                    raise BudgetExhausted(name, limit, getattr(spent, name), getattr(worst, name))
            self._add(worst, 1)

    def release(self, worst: Spend) -> None:
        with self._lock:
            self._add(worst, -1)

    def _add(self, s: Spend, sign: int) -> None:
        r = self._reserved
        r.requests += sign * s.requests
        r.tokens += sign * s.tokens
        r.usd += sign * s.usd

    def to_dict(self) -> dict:
        return {"limits": dict(self.limits), "spent": self.spent().to_dict()}


class Budgeted(Wrapper):
    """The LLM brain behind a budget (see the module docstring)."""

    inner: LLMBrain

    def __init__(self, inner: LLMBrain, budget: Budget) -> None:
        super().__init__(inner)
        self.budget = budget

    @override
    def preflight(self, gate: Callable[[list[dict]], AbstractContextManager] | None = None) -> str | None:
        """The model's preflight, each of its calls admitted by the budget like any other."""
        from smallville.brain.llm import PROBE_TOKENS

        return self.inner.preflight(
            gate=lambda messages: self._admitted(1, lambda: [(self.inner.count_tokens(messages), PROBE_TOKENS, None)])
        )

    @override
    def answer(self, requests: Sequence[rq.Message]):
        if not requests:
            return []
        with self._admitted(
            len(requests),
            lambda: [(self.inner.prompt_tokens(r), self.inner.max_tokens_for(r), r.kind) for r in requests],
        ):
            return self.inner.answer(requests)

    @contextmanager
    def _admitted(self, calls: int, sizes):
        """Calls that may go out once the budget has room for the most they could cost:
        `sizes()` (counted only if a limit needs them) gives each call's prompt tokens, its
        `max_tokens` and its kind (a kind's model has its own price)."""
        worst = Spend(calls)
        limits = self.budget.limits
        if "tokens" in limits or "usd" in limits:
            each = sizes()
            usd = sum(self.inner.price(p, c, kind) for p, c, kind in each) if "usd" in limits else 0.0
            worst = Spend(calls, sum(p + c for p, c, _ in each), usd)
        self.budget.reserve(worst)
        try:
            yield
        finally:
            self.budget.release(worst)
