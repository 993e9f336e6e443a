"""What a memory stream hands out: `Memory` views, retrieval `Hit`s, and to the modules that
store, score and index it, its `Columns`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from smallville.memory.stream import MemoryStream


@dataclass(eq=False)
class Columns:
    """A memory stream's storage, a field a column, indexed by memory id: what storage writes,
    what the retrievers and the salience model score, what a `Memory` views. Only the stream
    changes it (loaders add through `MemoryStream.append_loaded`, after the distinct
    embeddings into `table`). The arrays have room to grow: their first `count` entries
    are the memories. A memory's embedding may still be coming (`smallville.embed.later`):
    reading `table` or `rows` waits for it; the other columns are there at once."""

    stored: Any  # the distinct embeddings (a VectorTable, or an HNSW graph's) as they are: see `table`
    count: int = 0
    texts: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    links: list[tuple[int, ...]] = field(default_factory=list)
    stored_rows: np.ndarray = field(default_factory=lambda: np.zeros(16, dtype=np.int64))  # -1: still coming
    created: np.ndarray = field(default_factory=lambda: np.zeros(16, dtype=np.float64))
    accessed: np.ndarray = field(default_factory=lambda: np.zeros(16, dtype=np.float64))
    importance: np.ndarray = field(default_factory=lambda: np.zeros(16, dtype=np.int64))
    settle: Callable[[], None] = lambda: None  # the stream's: takes in the embeddings still coming

    @property
    def table(self) -> Any:
        """The distinct embeddings, with every memory's (those still coming taken in first)."""
        self.settle()
        return self.stored

    @property
    def rows(self) -> np.ndarray:
        """Each memory's row in `table` (those still coming taken in first)."""
        self.settle()
        return self.stored_rows


class Memory:
    """One memory: a read-only view into its stream, so `last_accessed` is always current.

    `id` is its position in the stream (0..n-1, insertion order); `importance` is the raw
    1..10 rating; `links` are the ids of the memories it came from (a reflection's
    evidence); times are simulated seconds.
    """

    __slots__ = ("_stream", "id")

    def __init__(self, stream: MemoryStream, id: int) -> None:
        self._stream = stream
        self.id = id

    @property
    def text(self) -> str:
        return self._stream.columns.texts[self.id]

    @property
    def kind(self) -> str:
        return self._stream.columns.kinds[self.id]

    @property
    def links(self) -> tuple[int, ...]:
        return self._stream.columns.links[self.id]

    @property
    def created(self) -> float:
        return float(self._stream.columns.created[self.id])

    @property
    def last_accessed(self) -> float:
        return float(self._stream.columns.accessed[self.id])

    @property
    def importance(self) -> int:
        return int(self._stream.columns.importance[self.id])

    @property
    def embedding(self) -> np.ndarray:
        """A copy of its stored (unit-length, float32) embedding."""
        return self._stream.embedding_of(self.id)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able fields (no embedding)."""
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "created": self.created,
            "last_accessed": self.last_accessed,
            "importance": self.importance,
            "links": list(self.links),
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Memory) and other._stream is self._stream and other.id == self.id

    def __hash__(self) -> int:
        return hash((id(self._stream), self.id))

    def __repr__(self) -> str:
        return (
            f"Memory(id={self.id}, kind={self.kind!r}, importance={self.importance}, "
            f"created={self.created:g}, text={self.text!r})"
        )


@dataclass(frozen=True)
class Hit:
    """A retrieved memory with its score and the three min-max normalised terms in [0, 1]
    that make it up (`importance` here is normalised; the rating is `memory.importance`)."""

    memory: Memory
    score: float
    recency: float
    importance: float
    relevance: float
