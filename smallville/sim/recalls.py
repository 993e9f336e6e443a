"""What each brain request was shown from memory, as the log records it (`recall` events).

Retrieval (`Simulation.retrieve`) notes, per agent, each query and the memories it brought
back with their scores; the agent's next request (`Simulation.ask`) takes those notes, and
the log keeps them in a `recall` event naming the request by its number among the agent's
requests. So `smallville why` can say which memories a decision rested on, how each ranked
(recency, importance, relevance) and, from the memory events, where each came from.
"""

from __future__ import annotations

from collections.abc import Iterable

DIGITS = 3  # the scores' decimals in the log: enough to rank by, little to store


def hit_row(hit) -> list:
    """A retrieved memory as a `recall` event lists it: [id, score, recency, importance,
    relevance] (the three terms min-max normalised; a negative id is a working-memory item
    of the salience model that is in no stream)."""
    return [
        hit.memory.id,
        round(hit.score, DIGITS),
        round(hit.recency, DIGITS),
        round(hit.importance, DIGITS),
        round(hit.relevance, DIGITS),
    ]


class RecallNotes:
    """Each agent's retrievals since its last request: [query, [hit rows, best first]] each."""

    def __init__(self) -> None:
        self.pending: dict[str, list[list]] = {}

    def note(self, agent: str, queries: Iterable[str], found: Iterable[list]) -> None:
        """The agent retrieved `found` (one hit list per query) for `queries`."""
        rows = self.pending.setdefault(agent, [])
        rows += [[query, [hit_row(h) for h in hits]] for query, hits in zip(queries, found)]

    def take(self, agent: str) -> list[list]:
        """What the agent retrieved since its last request (and forget it): what the request
        it is about to make was built from."""
        return self.pending.pop(agent, [])
