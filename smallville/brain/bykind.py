"""A model per request kind: the many cheap questions (importance ratings are about 60% of a
town's calls) to a small model, the few that shape behaviour (plans, reactions, dialogue) to
a strong one. `kinds: {rate_importance: {model: ..., api_base: ...}}` in the brain settings
names a kind's model (any litellm model, or a list of deployments); `ByKind` sends each
request to the LLM brain of its kind's model (one per model, each with its own preflight,
structured-output mode, throttle and calls) and the rest to the settings' own model."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager as ContextManager

from smallville.brain import requests as rq
from smallville.brain.base import Brain, Failed, override
from smallville.brain.config import LLMConfig
from smallville.brain.ledger import Ledger
from smallville.brain.llm import Attempt, LLMBrain

CHECKS = ("structured_check", "reasoning_check")  # what a preflight finds, as a brain describes it


def notes_of(described: dict) -> list[str]:
    """The lines a brain's description holds from its preflights: the structured-output mode
    chosen (and why), the room for reasoning found; for a kind's own model, named."""

    def notes(checks: dict) -> list[str]:
        return [note for note in ((checks.get(check) or {}).get("note") for check in CHECKS) if note]

    return notes(described) + [
        f"{name}: {note}" for name, checks in (described.get("checks") or {}).items() for note in notes(checks)
    ]


def model_brain(config: LLMConfig, ledger: Ledger, *, child: bool = False) -> LLMBrain | ByKind:
    """The brain that sends requests to the models of `config`: an LLM brain when every kind
    goes to one model, else a `ByKind`."""
    return ByKind(config, ledger, child=child) if config.model_kinds() else LLMBrain(config, ledger, child=child)


class ByKind(Brain):
    """Answers each request with the LLM brain of its kind's model (see the module docstring);
    a batch's requests for different models go out at once."""

    def __init__(self, config: LLMConfig, ledger: Ledger, *, child: bool = False) -> None:
        self.config = config
        self._pool: ThreadPoolExecutor | None = None
        self.brains: dict[str, LLMBrain] = {}  # by the settings' identity (config.identity)
        self.routes: dict[str, LLMBrain] = {}  # request kind -> the brain of its own model
        try:
            self.default = self._brain(config.endpoint(), ledger, child)
            for kind in config.model_kinds():
                self.routes[kind] = self._brain(config.endpoint(kind), ledger, child)
        except BaseException:
            self.close()
            raise
        self.name = self.default.name
        self._pool = ThreadPoolExecutor(max_workers=len(self.brains), thread_name_prefix="smallville-kinds")

    def _brain(self, endpoint: LLMConfig, ledger: Ledger, child: bool) -> LLMBrain:
        """The brain of one model, made once however many kinds it answers."""
        key = endpoint.identity()
        if key not in self.brains:
            self.brains[key] = LLMBrain(endpoint, ledger, child=child, name=self._unique(endpoint))
        return self.brains[key]

    def _unique(self, endpoint: LLMConfig) -> str:
        """The model's name in the usage; the same model at another address is told apart."""
        taken = {b.name for b in self.brains.values()}
        name = endpoint.label
        if name in taken and endpoint.api_base:
            name = f"{name}@{endpoint.api_base}"
        while name in taken:
            name += "'"
        return name

    def brain_for(self, kind: str) -> LLMBrain:
        return self.routes.get(kind, self.default)

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message | Failed]:
        groups: dict[int, list[int]] = {}
        for i, request in enumerate(requests):
            groups.setdefault(id(self.brain_for(request.kind)), []).append(i)
        if len(groups) <= 1:
            return self.brain_for(requests[0].kind).answer(requests) if requests else []
        out: list = [None] * len(requests)
        sent = [
            (idx, self._pool.submit(self.brain_for(requests[idx[0]].kind).answer, [requests[i] for i in idx]))
            for idx in groups.values()
        ]
        for idx, future in sent:
            for i, answer in zip(idx, future.result()):
                out[i] = answer
        return out

    def attempt(self, request: rq.Message) -> Attempt:
        """`request` sent once to its kind's model (check-model's)."""
        return self.brain_for(request.kind).attempt(request)

    def prompt_tokens(self, request: rq.Message) -> int:
        return self.brain_for(request.kind).prompt_tokens(request)

    def max_tokens_for(self, request: rq.Message) -> int:
        return self.brain_for(request.kind).max_tokens_for(request)

    def count_tokens(self, messages: list[dict]) -> int:
        return self.default.count_tokens(messages)

    def price(self, prompt: int, completion: int, kind: str | None = None) -> float:
        """USD for so many tokens of `kind`'s model; with no kind, of the dearest model (each
        must have a price: a `BrainError` says which has none)."""
        if kind is not None:
            return self.brain_for(kind).price(prompt, completion)
        return max(brain.price(prompt, completion) for brain in self.brains.values())

    @override
    def preflight(self, gate: Callable[[list[dict]], ContextManager] | None = None) -> str | None:
        """Each model's preflight; the lines to print, each naming its model."""
        lines = [(brain.name, brain.preflight(gate)) for brain in self.brains.values()]
        said = [f"{name}: {line}" for name, line in lines if line]
        return "\n".join(said) or None

    @override
    def describe(self) -> dict:
        """The whole settings, with what each kind's model's preflight found (its structured
        mode, its room for reasoning), and which model answers which kinds (`models`)."""
        out = self.default.describe()
        kinds = copy.deepcopy(self.config.kinds)
        for kind, brain in self.routes.items():
            kinds[kind]["structured"] = brain.config.structured
            if brain.reasoning and "reasoning_tokens" not in kinds[kind]:
                kinds[kind]["reasoning_tokens"] = brain.reasoning
        out["kinds"] = kinds
        out["models"] = {
            brain.name: sorted(k for k, b in self.routes.items() if b is brain) for brain in self.brains.values()
        }
        out["models"][self.default.name] = ["*"] + out["models"][self.default.name]
        checks = {
            brain.name: {k: v for k, v in brain.describe().items() if k in CHECKS}
            for brain in self.brains.values()
            if brain is not self.default
        }
        out["checks"] = {name: check for name, check in checks.items() if check}
        return out

    @override
    def close(self) -> None:
        for brain in self.brains.values():
            brain.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
