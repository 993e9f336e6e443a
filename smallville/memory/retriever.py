"""How a stream finds its best memories: the `Retriever` seam, and the exact retriever.

A stream keeps its memories (texts, times, ratings) and hands each embedding to its
retriever's table; it tells the retriever of every memory added and every access, and
asks it for the k best memories of each query. Two retrievers exist: `ExactRetriever`
(the default: every memory scored, as the paper defines it) and the approximate
`smallville.memory.approx.HNSWRetriever`, for huge streams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from smallville.memory.approx import HNSWRetriever
from smallville.memory.scoring import CONSTANT_TERM, normalise, recency, scan, span, top_k
from smallville.memory.vectors import VectorTable

if TYPE_CHECKING:
    from smallville.memory.stream import MemoryStream

Found = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""One query's answer: the ids of the best memories, best first, with their scores and
their normalised recency, importance and relevance terms."""


class Retriever(Protocol):
    """What a stream needs of a retriever. `kind` is the `index` name a saved stream
    records; `table` holds the stream's distinct embeddings."""

    kind: str
    table: VectorTable

    def add(self, mid: int, row: int, importance: int, time: float) -> None:
        """Memory `mid` was added, its embedding at row `row`, accessed at `time`."""

    def bulk_add(self, start: int, rows: np.ndarray, importance: np.ndarray, accessed: np.ndarray) -> None:
        """Memories start, start+1, ... were loaded at once."""

    def touch(self, mids: list[int], time: float) -> None:
        """Memories `mids` were accessed at `time`."""

    def search(self, stream: MemoryStream, queries: np.ndarray, k: int, now: float) -> list[Found]:
        """For each unit query (a row of `queries`), the k best memories at `now`."""


class ExactRetriever:
    """Every memory scored: one pass over the distinct embeddings for all queries, then the
    other terms and the normalisation as whole-array operations. It reads the stream's
    times and ratings at each search, so it needs no notice of adds and accesses."""

    kind = "exact"

    def __init__(self, dim: int) -> None:
        self.table = VectorTable(dim)

    def add(self, mid: int, row: int, importance: int, time: float) -> None:
        pass

    def bulk_add(self, start: int, rows: np.ndarray, importance: np.ndarray, accessed: np.ndarray) -> None:
        pass

    def touch(self, mids: list[int], time: float) -> None:
        pass

    def search(self, stream: MemoryStream, qs: np.ndarray, k: int, now: float) -> list[Found]:
        c, (w_rec, w_imp, w_rel) = stream.columns, stream.weights
        n = c.count
        relevance = scan(self.table.matrix(), qs, stream.helpers)  # under way while the other terms are computed
        fixed = stream.normalize == "fixed"
        rec = recency(c.accessed[:n], now, stream.decay)
        importance = c.importance[:n]
        if fixed:  # 000's scales: importance / 10, raw recency, raw cosine
            levels = np.arange(11) / 10.0
        else:
            rec = normalise(rec, *span(float(rec.min()), float(rec.max())))
            levels = normalise(np.arange(11), *span(float(importance.min()), float(importance.max())))
        imp = levels[importance]
        static = w_rec * rec + w_imp * imp
        rel_rows = relevance()
        shared = len(self.table) < n  # some memories share a row: map rows to memories
        found = []
        for rel in rel_rows:
            lo, width = (0.0, 1.0) if fixed else span(float(rel.min()), float(rel.max()))
            if shared:
                rel = rel[c.rows[:n]]
            if width:
                score = np.subtract(rel, lo, dtype=np.float64)
                score *= w_rel / width
                score += static
            else:
                score = static + w_rel * CONSTANT_TERM
            best = top_k(score, k)
            found.append((best, score[best], rec[best], imp[best], normalise(rel[best], lo, width)))
        return found


NORMALIZE = ("minmax", "fixed")
"""How a stream scales its terms before weighting them (`MemoryStream`'s `normalize`)."""

INDEXES = ("exact", "hnsw")
"""The retrievers a stream can be built with, by the name its `index` argument takes."""


def make_retriever(
    index: str,
    dim: int,
    weights: tuple[float, float, float],
    *,
    hnsw_m: int = 32,
    ef_construction: int = 64,
    ef_search: int = 64,
) -> Retriever:
    """The retriever named `index` for a stream of `dim` dimensions scored with `weights`;
    `hnsw_m`, `ef_construction` and `ef_search` tune the HNSW graph."""
    if index == "exact":
        return ExactRetriever(dim)
    if index == "hnsw":
        return HNSWRetriever(dim, weights, hnsw_m=hnsw_m, ef_construction=ef_construction, ef_search=ef_search)
    raise ValueError(f"index must be one of {INDEXES}, got {index!r}")
