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
of the query and of the negated query (widened by every cosine computed). The least
cosine is the hard one: it lies in the far tail of a few topics, and an estimate too
high stretches every normalised relevance. So the negated query is searched wide
(`FAR_EF`; up to `SCAN_ROWS` rows, all rows are scanned instead); with a helper thread,
a quick narrow search (`QUICK_EF`) starts the rounds while the wide one runs, and the
stop test of step 3 is passed again with its answer before the search ends (without a
helper thread, both run in turn, the wide one only if the rounds get that far). The
approximation is HNSW's: a near row (or a farthest one) it misses is not seen. For a
given index the result depends neither on thread timing nor on whether there is a
helper thread.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import faiss
import numpy as np

from smallville.memory.ordered import LEVELS, AccessOrder
from smallville.memory.scoring import normalise, recency, span, threads, top_k
from smallville.memory.vectors import VectorTable

EXTRA_LIMIT = 8192
"""Most memories read from the access logs in one round; beyond it the index is read
deeper first (which lowers the bound those memories must beat). Scoring a few thousand
memories costs less than reading the index 4x deeper at 1M rows."""

FIRST_DEPTH = 256
"""Rows read from the index in the first round (at least 2k). At 1M rows a first round
of 64 (efSearch 64) missed the query's whole topic for 3 of 50 queries."""

DEEPER = 4
"""How much deeper each further round reads the index."""

FAR_EF = 1536
"""efSearch of the negated query's search, which finds the least cosine. At 1M clustered
rows (benchmarks/retrieval.py) efSearch 128 found it 2.8% of the cosine range too high on
average (up to 6.7%), which caused 11 of the 12 misses of recall@10 0.976; 512 erred by
1.2% on average, 1024 by 0.6%, 2048 by 0.2% (up to 1.8%). With 768, recall@10 was
0.984-0.994 on two states of that stream, with 1536 0.992 on the worse one."""

FAR_COUNT = 16

SCAN_ROWS = 32768
"""Up to this many rows the least cosine comes from a scan of them all (a wide search of
the graph costs more there)."""

QUICK_EF = 128
"""efSearch of the quick first estimate of the least cosine (with a helper thread)."""


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
        if min(stream.weights) < 0:
            raise ValueError("index='hnsw' needs non-negative weights")
        self.table.flush()
        self.order.prepare()
        u = len(self.table)
        rec_norm = span(*recency(np.array([self.order.oldest(), self.order.newest()]), now,
                                  stream.decay))
        imp_norm = span(*self.order.importance_range())
        # the least cosine, from the negated query: a quick estimate starts the rounds,
        # a wide search is folded in before they stop (see the module docstring)
        helper, quick_ef = _helper(), max(self.ef_search, QUICK_EF)
        wide_ef = max(self.ef_search, FAR_EF)
        if u <= SCAN_ROWS:  # cheaper than a wide search, and exact
            helper, quick, wide = False, _Later(self._least, query), None
        else:
            quick = _far_job(self._nearest, -query, quick_ef, helper)
            wide = (_far_job(self._nearest, -query, wide_ef, helper) if wide_ef > quick_ef
                    else None)
        try:
            return self._rounds(stream, query, k, now, rec_norm, imp_norm, u, quick, wide)
        finally:
            if helper and wide is not None:
                wide.result()  # never leave a search of the graph running past this call

    def _rounds(self, stream, query, k, now, rec_norm, imp_norm, u, quick, wide):
        """Steps 1-3 of the module docstring, deeper until the stop test passes with the
        wide search's least cosine folded in."""
        w_rel = stream.weights[2]
        depth, far_cos = min(u, max(2 * k, FIRST_DEPTH)), None
        cache = _Cosines(self.table, stream._rows, query)
        while True:
            dist, hits = self._nearest(query, depth, max(self.ef_search, depth))
            rel_cut = float(dist[-1]) if len(hits) < u else -np.inf
            hit_mids = np.unique(self._members(hits))
            if far_cos is None:  # widened below by every cosine computed
                cache.get(hit_mids)  # their cosines, while the negated search runs
                far_cos = np.vecdot(self.table.matrix()[quick.result()[1]], query)
            done = False
            while True:  # at this depth: once, and again when the wide search is in
                cand = hit_mids
                score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now,
                                                     rec_norm, imp_norm)
                if len(hits) >= u:
                    done = True  # the index was read to its end: nothing is unseen
                    break
                # unseen memories have relevance <= rel_cut, so only those whose recency
                # and importance alone exceed `need` can beat the k-th score: read them all
                need = _kth(score, k) - w_rel * float(normalise(rel_cut, *rel_norm))
                extra = self._recent_above(stream, need, now, rec_norm, imp_norm)
                last = depth >= u  # a graph that loses rows may return fewer than asked
                if len(extra) > EXTRA_LIMIT and not last:
                    break
                cand = np.union1d(cand, extra)
                score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now,
                                                     rec_norm, imp_norm)
                if not last and _kth(score, k) < need + w_rel * float(normalise(rel_cut,
                                                                               *rel_norm)):
                    break
                if wide is None:
                    done = True
                    break
                far_cos = np.concatenate([far_cos, np.vecdot(
                    self.table.matrix()[wide.result()[1]], query)])
                wide = None
            if done:
                break
            depth = min(u, DEEPER * depth)
        best = top_k(score, k)
        return cand[best], score[best], terms[0][best], terms[1][best], terms[2][best]

    def _least(self, query: np.ndarray):
        """Like `_nearest(-query, FAR_COUNT, ...)[1]` in place 1, by a scan: the rows of
        the FAR_COUNT least cosines."""
        cos = np.vecdot(self.table.matrix(), query)
        return None, np.argpartition(cos, min(FAR_COUNT, len(cos)) - 1)[:FAR_COUNT]

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


def _helper() -> bool:
    """Whether searches of the negated query run on a helper thread."""
    return threads() >= 2


def _far_job(nearest, query: np.ndarray, ef: int, helper: bool):
    """The FAR_COUNT best matches of `query` (a negated query): a future of a search
    started on the helper thread, or without one a search made when first asked for.
    Either way `.result()` gives the same rows."""
    if helper:
        return _pool().submit(nearest, query, FAR_COUNT, ef)
    return _Later(nearest, query, FAR_COUNT, ef)


class _Later:
    """A call made when its result is first asked for."""

    def __init__(self, fn, *args) -> None:
        self.fn, self.args, self.value = fn, args, None

    def result(self):
        if self.args is not None:
            self.value, self.args = self.fn(*self.args), None
        return self.value


_POOL: dict = {}


def _pool() -> ThreadPoolExecutor:
    """This process's helper thread (a forked child makes its own)."""
    if os.getpid() not in _POOL:
        _POOL.clear()
        _POOL[os.getpid()] = ThreadPoolExecutor(1, thread_name_prefix="smallville-far")
    return _POOL[os.getpid()]


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
