"""The brain seam: anything that answers a batch of typed requests.

A brain that reaches a model may also answer a request with `Failed` (it could not get
a valid answer this time); wrappers retry those (`Retrying`) and replace what still fails
with a safe default (`WithFallbacks`), recording each as a `Fallback`. A brain that hands
answers to the engine never returns `Failed`; it returns `Answers`, the answers with the
fallbacks taken among them, which the dispatcher logs as `brain_fallback` events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

from smallville.brain.requests import Message


class Brain(Protocol):
    """Answers requests. `answer` takes every request of one tick and returns one answer
    per request, in the same order; the engine applies them in a fixed order."""

    name: str

    def answer(self, requests: Sequence[Message]) -> list[Message]: ...

    def describe(self) -> dict:
        """Settings recorded in the run's manifest."""
        ...


@dataclass(frozen=True)
class Failed:
    """No valid answer this time. `reason` is one of `connection`, `rate_limit`, `server`,
    `timeout`, `bad_json`, `schema`, `refused` (a client error: retrying will not help)."""

    reason: str
    error: str
    retry_after: float | None = None     # seconds the server asked us to wait (HTTP Retry-After)

    @property
    def retryable(self) -> bool:
        return self.reason != "refused"

    def __str__(self) -> str:
        return f"{self.reason}: {self.error}"


@dataclass(frozen=True)
class Fallback:
    """A request of the last batch answered with a safe default after its last retry."""

    index: int       # position in the batch
    kind: str        # the request's kind
    key: str         # its request_key
    error: str       # the last error, one line


class Answers(list):
    """A batch's answers in order, and the fallbacks taken among them (`fallbacks`)."""

    def __init__(self, answers=(), fallbacks=()) -> None:
        super().__init__(answers)
        self.fallbacks: tuple[Fallback, ...] = tuple(fallbacks)


def fallbacks_of(answers) -> list[Fallback]:
    """The fallbacks among a batch's answers (none from brains that never fall back)."""
    return list(getattr(answers, "fallbacks", ()))
