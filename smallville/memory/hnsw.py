"""Approximate retrieval for huge streams: a threshold search (Fagin's threshold algorithm)
over an HNSW index for relevance and ordered structures for recency and importance.

The score is S + w_rel * norm(relevance), where S = w_rec * norm(recency) +
w_imp * norm(importance) needs no embedding. Two lists are read best-first:

- by S: within one importance level, S grows with the last access time, so the ten
  per-level logs of `AccessOrder`, read from their tails, give every memory whose S is
  above a bound (the S of the last memory read in each level);
- by relevance: the HNSW index (inner product) returns the rows nearest the query.

Every memory seen in either list is scored exactly (its cosine recomputed with the same
kernel as the exact path). A memory seen in neither has S at most the S bound and
relevance at most that of the last HNSW hit, so once the k-th best score reaches the sum
of the two bounds no unseen memory can beat it, and the search stops; otherwise both
lists are read deeper. The min and max that normalise each term come from the same
structures: access times from the logs' ends, importance from the levels in use, and
cosines from the first hit of the query and of the negated query (widened by every
cosine computed). The one approximation is HNSW's: a near row it misses is not seen.
"""

from __future__ import annotations

import faiss
import numpy as np

from smallville.memory.ordered import LEVELS, AccessOrder
from smallville.memory.scoring import normalise, recency, span, top_k
from smallville.memory.vectors import VectorTable


class ApproxSearch:
    """The ordered structures of an `index="hnsw"` stream, and its threshold search."""

    def __init__(self, table: VectorTable, ef_search: int = 64) -> None:
        self.table = table
        self.ef_search = ef_search
        self.order = AccessOrder()
        self.first = np.full(16, -1, dtype=np.int64)  # row -> newest memory using it
        self.prev = np.full(16, -1, dtype=np.int64)   # memory -> older memory, same row

    def add(self, mid: int, row: int, importance: int, time: float) -> None:
        """Index a new memory: O(1) amortised (its HNSW insertion waits for a search)."""
        if row >= len(self.first):
            self.first = np.concatenate([self.first, np.full(len(self.first), -1)])
        if mid >= len(self.prev):
            self.prev = np.concatenate([self.prev, np.full(len(self.prev), -1)])
        self.prev[mid], self.first[row] = self.first[row], mid
        self.order.add(mid, importance, time)

    def bulk_add(self, start: int, rows: np.ndarray, importance: np.ndarray,
                 accessed: np.ndarray) -> None:
        """`add` for loaded memories start, start+1, ..."""
        for i, (row, imp, time) in enumerate(zip(rows.tolist(), importance.tolist(),
                                                 accessed.tolist())):
            self.add(start + i, row, imp, time)

    def touch(self, mids: list[int], time: float) -> None:
        self.order.touch(mids, time)

    def _members(self, rows: np.ndarray) -> np.ndarray:
        """Every memory whose embedding is one of `rows`."""
        found, mids = [], self.first[rows]
        while len(mids):
            found.append(mids)
            mids = self.prev[mids]
            mids = mids[mids >= 0]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)

    def search(self, stream, query: np.ndarray, k: int, now: float):
        """(ids, scores, recency, importance, relevance) of about the k best memories,
        best first, with the terms normalised as in the exact path."""
        w_rec, w_imp, w_rel = stream.weights
        if min(stream.weights) < 0:
            raise ValueError("index='hnsw' needs non-negative weights")
        self.table.flush()
        self.order.prepare()
        u, index, order = len(self.table), self.table.index, self.order
        rows, accessed, importance = (stream._rows, stream._accessed, stream._importance)
        rec_norm = span(*recency(np.array([order.oldest(), order.newest()]), now,
                                  stream.decay))
        imp_norm = span(*order.importance_range())
        level_s = w_imp * normalise(np.arange(1, LEVELS + 1), *imp_norm)
        # the least cosine (the best match of the negated query), recomputed below; a wide
        # search, as a missed minimum shifts every memory's normalised relevance
        far_params = faiss.SearchParametersHNSW()
        far_params.efSearch = max(self.ef_search, 128)
        _, far = index.search(-query[None, :], 16, params=far_params)
        far_rows = far[0][far[0] >= 0]
        depth, width, rounds = min(u, max(2 * k, 32)), max(k, 32), 0
        prev_cand = prev_cos = None
        while True:
            params = faiss.SearchParametersHNSW()
            params.efSearch = max(self.ef_search, depth)
            dist, labels = index.search(query[None, :], depth, params=params)
            hits = labels[0][labels[0] >= 0]
            seen, s_bound = [self._members(hits)], -np.inf
            for level in range(1, LEVELS + 1):
                if not order.levels[level - 1].live:
                    continue
                mids, complete = order.recent(level, width)
                seen.append(mids)
                if not complete:
                    last = recency(accessed[mids[-1]], now, stream.decay)
                    s_bound = max(s_bound, level_s[level - 1]
                                  + w_rec * float(normalise(last, *rec_norm)))
            cand = np.unique(np.concatenate(seen))
            matrix = self.table.matrix()
            # cosines already computed in an earlier round are reused (same kernel, so
            # the same bits); only the newly seen candidates are scored
            if prev_cand is None:
                cos = np.vecdot(matrix[rows[cand]], query)
            else:
                at = np.minimum(np.searchsorted(prev_cand, cand), len(prev_cand) - 1)
                old = prev_cand[at] == cand
                cos = np.empty(len(cand), dtype=prev_cos.dtype)
                cos[old] = prev_cos[at[old]]
                new = ~old
                cos[new] = np.vecdot(matrix[rows[cand[new]]], query)
            prev_cand, prev_cos = cand, cos
            # the first hit of the query (in cand) and of the negated one bound cosines
            far_cos = np.vecdot(matrix[far_rows], query)
            rel_norm = span(float(min(cos.min(), far_cos.min(initial=np.inf))),
                            float(cos.max()))
            terms = (normalise(recency(accessed[cand], now, stream.decay), *rec_norm),
                     normalise(importance[cand], *imp_norm), normalise(cos, *rel_norm))
            score = w_rec * terms[0] + w_imp * terms[1] + w_rel * terms[2]
            best = top_k(score, k)
            if s_bound == -np.inf or len(hits) >= u:
                break  # one of the lists was read to its end: nothing is unseen
            if len(best) == k:
                rel_bound = float(normalise(dist[0, len(hits) - 1], *rel_norm))
                if score[best[-1]] >= s_bound + w_rel * rel_bound:
                    break
            rounds += 1
            width *= 2
            if rounds % 2 == 0:
                depth = min(u, 2 * depth)
        return cand[best], score[best], terms[0][best], terms[1][best], terms[2][best]
