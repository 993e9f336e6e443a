"""The brain seam: anything that answers a batch of typed requests."""

from __future__ import annotations

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
