"""The brain seam: anything that answers a batch of typed requests.

A brain that reaches a model may also answer a request with `Failed` (it could not get
a valid answer this time); wrappers retry those (`Retrying`) and replace what still fails
with a safe default (`WithFallbacks`), recording each as a `Fallback`. A brain that hands
answers to the engine never returns `Failed`; it returns `Answers`, the answers with the
fallbacks taken among them, which the dispatcher logs as `brain_fallback` events.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from smallville.brain.requests import Message

if sys.version_info >= (3, 12):
    from typing import override
else:  # (typing_extensions comes with pydantic, which litellm needs)
    from typing_extensions import override


class Brain:
    """Answers requests. `answer` takes every request of one tick and returns one answer
    per request, in the same order; the engine applies them in a fixed order. Every brain
    and every wrapper is one of these: what a brain may do beyond answering is declared
    here with a default, so no caller has to ask whether it can."""

    name: str = "brain"
    learns: bool = False  # whether `learn` keeps anything (a run's record is read for it)

    def answer(self, requests: Sequence[Message]) -> list:
        raise NotImplementedError

    def describe(self) -> dict:
        """Settings recorded in the run's manifest."""
        return {"name": self.name}

    def preflight(self, gate: Callable[[list[dict]], AbstractContextManager] | None = None) -> str | None:
        """Checks before a run starts (a model's preflight call); the line to print, if any.
        `gate` admits each call (a budget). Nothing to check by default."""
        return None

    def learn(self, request: Message, answer: Message) -> None:
        """Take note of an answer given elsewhere (a run's record, on resume). Nothing to
        note by default."""

    def answer_one(self, request: Message) -> tuple[Message, str | None]:
        """One request's answer and, if it is a safe default, the last error (run-ahead
        sends requests one by one, from several threads at once)."""
        [answer] = self.answer([request])
        return answer, None

    def close(self) -> None:
        """End what the brain started (threads, files). Nothing by default."""


class Wrapper(Brain):
    """A brain around another (`inner`): everything goes through to it unless overridden."""

    def __init__(self, inner: Brain) -> None:
        self.inner = inner
        self.name = inner.name

    @property
    def learns(self) -> bool:  # type: ignore[override]
        return self.inner.learns

    @override
    def answer(self, requests: Sequence[Message]) -> list:
        return self.inner.answer(requests)

    @override
    def describe(self) -> dict:
        return self.inner.describe()

    @override
    def preflight(self, gate: Callable[[list[dict]], AbstractContextManager] | None = None) -> str | None:
        return self.inner.preflight(gate)

    @override
    def learn(self, request: Message, answer: Message) -> None:
        self.inner.learn(request, answer)


@dataclass(frozen=True)
class Failed:
    """No valid answer this time. `reason` is one of `connection`, `rate_limit`, `server`,
    `timeout`, `bad_json`, `schema`, `refused` (a client error: retrying will not help)."""

    reason: str
    error: str
    retry_after: float | None = None  # seconds the server asked us to wait (HTTP Retry-After)
    deployment: str | None = None  # the deployment of a model's list that failed (deployments.py)

    @property
    def retryable(self) -> bool:
        return self.reason != "refused"

    def __str__(self) -> str:
        return f"{self.reason}: {self.error}"


@dataclass(frozen=True)
class Fallback:
    """A request of the last batch answered with a safe default after its last retry."""

    index: int  # position in the batch
    kind: str  # the request's kind
    key: str  # its request_key
    error: str  # the last error, one line


class Answers(list):
    """A batch's answers in order, and the fallbacks taken among them (`fallbacks`)."""

    def __init__(self, answers=(), fallbacks=()) -> None:
        super().__init__(answers)
        self.fallbacks: tuple[Fallback, ...] = tuple(fallbacks)


def fallbacks_of(answers: Sequence) -> list[Fallback]:
    """The fallbacks among a batch's answers (none from brains that never fall back)."""
    return list(answers.fallbacks) if isinstance(answers, Answers) else []
