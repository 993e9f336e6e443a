"""Brains answer the typed requests agents make; see `requests` for the vocabulary.

`make_brain` assembles the brain a run uses from its settings: the offline brain, or the
LLM brain wrapped as `WithFallbacks(Retrying([Caching](RatingMemo([Budgeted](LLMBrain)))))`.
Recording and replay (`record`) wrap whatever this returns.
"""

from __future__ import annotations

from pathlib import Path

from smallville.brain.base import Brain
from smallville.brain.config import LLMConfig
from smallville.brain.ledger import Ledger
from smallville.errors import BrainError


def make_brain(spec: "str | LLMConfig", seed: int, *, ledger: Ledger | None = None,
               cache: str | Path | None = None, spent_before=None) -> Brain:
    """The brain named on the command line: `offline` (the default) or a litellm model
    name (`openai/gpt-4o-mini`, `ollama/llama3.1`, ...) with its settings."""
    config = spec if isinstance(spec, LLMConfig) else LLMConfig(model=spec)
    ledger = ledger if ledger is not None else Ledger()
    if config.is_offline:
        from smallville.brain.offline import OfflineBrain

        brain = OfflineBrain(seed)
        if cache is not None:
            from smallville.brain.record import Caching

            return Caching(brain, cache, ledger)
        return brain
    from smallville.brain.llm import LLMBrain, import_litellm
    from smallville.brain.wrappers import RatingMemo, Retrying, WithFallbacks

    try:
        import_litellm().get_llm_provider(config.model, api_base=config.api_base)
    except Exception:
        raise BrainError(f"unknown brain {config.model!r}: use offline, or a litellm model name such as "
                         "openai/gpt-4o-mini or ollama/llama3.1") from None
    inner = LLMBrain(config, ledger)
    if config.budget:
        from smallville.brain.budget import Budget, Budgeted

        budget = Budget(config.budget, ledger, spent_before)
        if "usd" in budget.limits:
            inner.price(1, 1)                       # no price for the model: say so now, not mid-run
        inner = Budgeted(inner, budget)
    if config.reuse_ratings:
        inner = RatingMemo(inner, ledger)
    if cache is not None:
        from smallville.brain.record import Caching

        inner = Caching(inner, cache, ledger)
    return WithFallbacks(Retrying(inner, config.retries, config.backoff, ledger), ledger)


__all__ = ["Brain", "LLMConfig", "Ledger", "make_brain"]
