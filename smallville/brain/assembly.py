"""The one place a run's brain is put together, for run, resume, fork, inspect, estimate
and experiments alike.

    [Replaying(record) ->] WithFallbacks(Retrying([Caching](RatingMemo([Budgeted](model)))))

`model` is the LLM brain (or, for `estimate`, a meter that counts what the model would be
sent); the offline brain stands alone (behind a cache, if one is given). Recording wraps
whatever this returns (the run's `answers.jsonl`); a run going on may fetch its answers
ahead of the clock (`sim.runahead.fetching_ahead`, which sets the stack's `ahead`). A fork's
seed is given here, like any run's: nothing is pushed down the chain afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from smallville.brain.base import Brain
from smallville.brain.config import LLMConfig
from smallville.brain.ledger import Ledger


@dataclass
class Stack:
    """A brain put together: `brain` is what the engine asks; `ahead` is run-ahead's
    fetcher when there is one (its dispatcher needs it). `close` ends what the stack
    started: run-ahead's calls, the model's thread pool, the cache's file."""

    brain: Brain
    settings: LLMConfig
    ledger: Ledger
    ahead: object = None
    closers: list = field(default_factory=list)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        while self.closers:
            self.closers.pop()()


def settings_of(brain: dict | None, more: dict | None = None, spent=None) -> LLMConfig:
    """The brain settings a run's manifest recorded (its `brain`). `more` ({"usd", "requests",
    "tokens"}) raises the budget by that much on top of `spent` (a `Spend`: what the run has
    spent)."""
    recorded = dict(brain or {})
    if recorded.get("name", recorded.get("model")) == "offline":
        return LLMConfig()
    known = set(LLMConfig.__dataclass_fields__)
    config = LLMConfig().merged({k: v for k, v in recorded.items() if k in known}, "the run's manifest")
    return with_budget(config, more, spent)


def with_budget(config: LLMConfig, more: dict | None, spent=None) -> LLMConfig:
    """`config` whose budget allows `more` ({"usd", "requests", "tokens"}) on top of `spent`."""
    more = {k: v for k, v in (more or {}).items() if v is not None}
    if not more:
        return config
    return replace(
        config, budget={**config.budget, **{k: (getattr(spent, k) if spent else 0) + v for k, v in more.items()}}
    )


def assemble(
    settings: LLMConfig,
    seed: int,
    *,
    ledger: Ledger | None = None,
    cache: str | Path | None = None,
    spent=None,
    replay: tuple[str | Path, int] | None = None,
    live: bool = True,
    model=None,
    agents: int | None = None,
) -> Stack:
    """The brain of `settings` answering with `seed`. `spent` (a `Spend`) counts against
    the budget. With `replay` (a run folder and a byte offset of its record) answers come
    from that record from the offset on; what it lacks goes to the live brain, or with
    `live=False` is an error. `model` stands in for the LLM brain. `agents`:
    the size of the town (a big one makes its model calls from a child process)."""
    ledger = ledger if ledger is not None else Ledger()
    closers: list = []
    brain = _live(settings, seed, ledger, cache, spent, model, closers, agents) if live else None
    if replay is not None:
        from smallville.brain.record import Replaying

        brain = Replaying(replay[0], fallthrough=brain, start=replay[1])
    return Stack(brain, settings, ledger, None, closers)


def _live(
    settings: LLMConfig, seed: int, ledger: Ledger, cache, spent, model, closers: list, agents: int | None
) -> Brain:
    if settings.is_offline and model is None:
        from smallville.brain.offline import OfflineBrain

        brain = OfflineBrain(seed)
        if cache is not None:
            from smallville.brain.record import Caching

            brain = Caching(brain, cache, ledger)
            closers.append(brain.close)
        return brain
    from smallville.brain.wrappers import RatingMemo, Retrying, WithFallbacks

    if model is None:
        from smallville.brain.bykind import model_brain

        model = model_brain(settings, ledger, child=settings.calls_in_child(agents))
        closers.append(model.close)
    inner = model
    if settings.budget:
        from smallville.brain.budget import Budget, Budgeted

        budget = Budget(settings.budget, ledger, spent)
        if "usd" in budget.limits:
            inner.price(1, 1)  # no price for the model: say so now, not mid-run
        inner = Budgeted(inner, budget)
    if settings.reuse_ratings:
        inner = RatingMemo(inner, ledger)
    if cache is not None:
        from smallville.brain.record import Caching

        inner = Caching(inner, cache, ledger)
        closers.append(inner.close)
    return WithFallbacks(Retrying(inner, settings.retries, settings.backoff, ledger), ledger)
