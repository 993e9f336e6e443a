"""Brains answer the typed requests agents make; see `requests` for the vocabulary.

`make_brain` is the brain a run would use for its settings, as `assembly.assemble` puts it
together (the one place that does): the offline brain, or the LLM brain wrapped as
`WithFallbacks(Retrying([Caching](RatingMemo([Budgeted](LLMBrain)))))`. Recording and
replay (`record`) wrap whatever a run uses.
"""

from __future__ import annotations

from pathlib import Path

from smallville.brain.base import Brain
from smallville.brain.config import LLMConfig
from smallville.brain.ledger import Ledger


def make_brain(
    spec: str | LLMConfig,
    seed: int,
    *,
    ledger: Ledger | None = None,
    cache: str | Path | None = None,
    spent_before=None,
) -> Brain:
    """The brain named on the command line: `offline` (the default) or a litellm model
    name (`openai/gpt-4o-mini`, `ollama/llama3.1`, ...) with its settings, answering in
    order (no run-ahead)."""
    from smallville.brain.assembly import assemble

    config = spec if isinstance(spec, LLMConfig) else LLMConfig(model=spec)
    return assemble(config, seed, ledger=ledger, cache=cache, spent=spent_before).brain


__all__ = ["Brain", "LLMConfig", "Ledger", "make_brain"]
