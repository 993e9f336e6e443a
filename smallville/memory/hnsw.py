"""Approximate retrieval for huge streams: a threshold search (Fagin's threshold algorithm)
over an HNSW index for relevance and ordered structures for recency and importance.

The score is S + w_rel * norm(relevance), where S = w_rec * norm(recency) +
w_imp * norm(importance) needs no embedding. One search:

1. reads the `depth` rows nearest the query from the HNSW index (inner product) and
   scores their memories exactly (cosines recomputed with the exact path's kernel);
2. every memory not read has relevance at most that of the last hit, so it can beat the
   k-th score only if its S exceeds k-th score - w_rel * norm(last hit). Within one
   importance level S grows with the last access time, so those memories are a tail of
   each of the ten per-level logs of `AccessOrder`, found by binary search; they are
   scored exactly too;
3. if the k-th score still reaches the bound of the memories seen in neither list, it
   stops; otherwise (or when step 2 would read too many) it reads the index 4x deeper.

The min and max that normalise each term come from the same structures: access times
from the logs' ends, importance from the levels in use, and cosines from the first hit
of the query and of the negated query (widened by every cosine computed). The one
approximation is HNSW's: a near row it misses is not seen.
"""

from __future__ import annotations

import math

import faiss
import numpy as np

from smallville.memory.ordered import LEVELS, AccessOrder
from smallville.memory.scoring import normalise, recency, span, top_k
from smallville.memory.vectors import VectorTable

EXTRA_LIMIT = 4096
"""Most memories read from the access logs in one round; beyond it the index is read
deeper first (which lowers the bound those memories must beat)."""


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
        u = len(self.table)
        rec_norm = span(*recency(np.array([self.order.oldest(), self.order.newest()]), now,
                                  stream.decay))
        imp_norm = span(*self.order.importance_range())
        # the least cosine (the best match of the negated query), widened below by every
        # cosine computed; a wide search, as a missed minimum shifts every relevance
        far = self._nearest(-query, 16, max(self.ef_search, 128))[1]
        far_cos = np.vecdot(self.table.matrix()[far], query)
        depth, cache = min(u, max(2 * k, 64)), _Cosines(self.table, stream._rows, query)
        while True:
            dist, hits = self._nearest(query, depth, max(self.ef_search, depth))
            rel_cut = float(dist[-1]) if len(hits) < u else -np.inf
            cand = np.unique(self._members(hits))
            score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now,
                                                 rec_norm, imp_norm)
            if len(hits) >= u:
                break  # the index was read to its end: nothing is unseen
            # unseen memories have relevance <= rel_cut, so only those whose recency and
            # importance alone exceed `need` can beat the k-th score: read them all
            rel_bound = w_rel * float(normalise(rel_cut, *rel_norm))
            kth = _kth(score, k)
            extra = self._recent_above(stream, kth - rel_bound, now, rec_norm, imp_norm)
            last = depth >= u  # a graph that loses rows may return fewer than asked
            if len(extra) <= EXTRA_LIMIT or last:
                cand = np.union1d(cand, extra)
                score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now,
                                                     rec_norm, imp_norm)
                kth2 = _kth(score, k)
                if last or kth2 >= kth - rel_bound + w_rel * float(normalise(rel_cut,
                                                                             *rel_norm)):
                    break
            depth = min(u, 4 * depth)
        best = top_k(score, k)
        return cand[best], score[best], terms[0][best], terms[1][best], terms[2][best]

    def _nearest(self, query: np.ndarray, count: int, ef: int):
        """The inner products and rows of the `count` rows nearest `query` in the graph."""
        params = faiss.SearchParametersHNSW()
        params.efSearch = ef
        dist, labels = self.table.index.search(query[None, :], count, params=params)
        keep = labels[0] >= 0
        return dist[0][keep], labels[0][keep]

    def _score(self, stream, cand, cache, far_cos, now, rec_norm, imp_norm):
        """The exact scores and terms of memories `cand`, relevance normalised between the
        least and greatest cosine known."""
        w_rec, w_imp, w_rel = stream.weights
        cos = cache.get(cand)
        rel_norm = span(float(min(cos.min(), far_cos.min(initial=np.inf))),
                        float(max(cos.max(), far_cos.max(initial=-np.inf))))
        terms = (normalise(recency(stream._accessed[cand], now, stream.decay), *rec_norm),
                 normalise(stream._importance[cand], *imp_norm), normalise(cos, *rel_norm))
        return w_rec * terms[0] + w_imp * terms[1] + w_rel * terms[2], terms, rel_norm

    def _recent_above(self, stream, need: float, now: float, rec_norm, imp_norm):
        """Every memory whose weighted recency and importance terms may exceed `need`
        (and a few just below it): per importance level, a tail of its access log."""
        w_rec, w_imp, _ = stream.weights
        rate = -math.log(stream.decay) / 3600.0
        found = []
        for level in range(1, LEVELS + 1):
            lv = self.order.levels[level - 1]
            if not lv.live:
                continue
            rest = need - w_imp * float(normalise(level, *imp_norm))
            if w_rec == 0 or rec_norm[1] == 0 or rate == 0:
                fixed = w_rec * float(normalise(0.0, *rec_norm)) if rec_norm[1] == 0 else 0.0
                cut = -np.inf if fixed >= rest else np.inf
            else:
                r = rest / w_rec * rec_norm[1] + rec_norm[0]  # the recency to exceed
                cut = -np.inf if r <= 0 else now + math.log(r) / rate - 1.0
            if cut == np.inf:
                continue
            start = lv.head + int(np.searchsorted(lv.times[lv.head: lv.end], cut))
            mids = lv.mids[start: lv.end]
            found.append(mids[self.order.pos[mids] == np.arange(start, lv.end)])
            if sum(map(len, found)) > EXTRA_LIMIT:
                break
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _kth(score: np.ndarray, k: int) -> float:
    """The k-th highest of `score`; -inf when there are fewer than k."""
    n = len(score)
    return float(np.partition(score, n - k)[n - k]) if n >= k else -np.inf


class _Cosines:
    """Cosines of memories with one query, each computed once per search (by the same
    kernel as the exact path) however often it is asked for."""

    def __init__(self, table: VectorTable, rows: np.ndarray, query: np.ndarray) -> None:
        self.table, self.rows, self.query = table, rows, query
        self.mids = np.zeros(0, dtype=np.int64)
        self.cos = np.zeros(0, dtype=np.float32)

    def get(self, cand: np.ndarray) -> np.ndarray:
        """Cosines of sorted, distinct memories `cand`."""
        if len(self.mids):
            at = np.minimum(np.searchsorted(self.mids, cand), len(self.mids) - 1)
            old = self.mids[at] == cand
        else:
            at, old = None, np.zeros(len(cand), dtype=bool)
        cos = np.empty(len(cand), dtype=np.float32)
        if at is not None:
            cos[old] = self.cos[at[old]]
        new = ~old
        cos[new] = np.vecdot(self.table.matrix()[self.rows[cand[new]]], self.query)
        self.mids, self.cos = cand, cos
        return cos
