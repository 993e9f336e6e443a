"""Approximate retrieval for huge streams: a threshold search (Fagin's threshold algorithm)
over an HNSW index for relevance and ordered structures for recency and importance.

The score is S + w_rel * norm(relevance), where S = w_rec * norm(recency) +
w_imp * norm(importance) needs no embedding. One search:

1. reads the `depth` rows nearest the query from the HNSW index (inner product) and
   scores their memories exactly (the graph's inner products are their cosines: equal
   to the exact path's but for float32 rounding, as FAISS sums in another order);
2. every memory not read has relevance at most that of the last hit, so it can beat the
   k-th score only if its S exceeds k-th score - w_rel * norm(last hit). Within one
   importance level S grows with the last access time, so those memories are a tail of
   each of the ten per-level logs of `AccessOrder`, found by binary search; they are
   scored exactly too (cosines by the exact path's kernel);
3. if the k-th score still reaches the bound of the memories seen in neither list, it
   stops; otherwise (or when step 2 would read too many) it reads the index 4x deeper.
   The next search begins at the depth this one ended at (`PROBE_EVERY`).

The min and max that normalise each term come from the same structures: access times
from the logs' ends, importance from the levels in use, and cosines from the first hit
of the query and of the negated query (widened by every cosine computed). The least
cosine is the hard one: it lies in the far tail of a few topics, and an estimate too
high stretches every normalised relevance. The HNSW graph is poor at it (a search of
the negated query with efSearch 1536 cost 9 ms at 1M rows and still erred), so it comes
from a second, coarse index of the same rows, `FarRows`: an inverted file of about
sqrt(n) k-means lists of 8-bit codes. The negated query reads the lists (`PROBE_ROWS`) whose
centres lie farthest from the query, and the least cosines found are recomputed exactly.
Up to `SCAN_ROWS` rows, all rows are scanned instead. Once the lists exist, the graph's
entries are laid out list by list, and again each time the graph has doubled (`LAYOUT`),
so that a graph search reads nearby memory (`GraphTable.reorder`: 30% faster at 1M
rows). With a helper thread the negated query's search runs while the graph is searched,
and so do the cosines of the recent memories that the last search's bound selects (most
of step 2's). The approximation is HNSW's and the lists': a near row (or a farthest one)
they miss is not seen. For a given graph and lists, and the depths earlier searches ended
at, the result depends neither on thread timing nor on whether there is a helper thread.
"""

from __future__ import annotations

import math
from concurrent.futures import Future

import faiss
import numpy as np

from smallville.memory.approx.graph import GraphTable
from smallville.memory.approx.ordered import LEVELS, AccessOrder
from smallville.memory.scoring import normalise, recency, span, threads, top_k

EXTRA_LIMIT = 8192
"""Most memories read from the access logs in one round; beyond it the index is read
deeper first (which lowers the bound those memories must beat). Scoring a few thousand
memories costs less than reading the index 4x deeper at 1M rows."""

FIRST_DEPTH = 256
"""Rows read from the index in a stream's first search (at least 2k). At 1M rows a first
round of 64 (efSearch 64) missed the query's whole topic for 3 of 50 queries."""

PROBE_EVERY = 8
"""A search begins at the depth where the last one ended, since the density of a
stream's recent memories, which sets the depth, changes slowly. After this many searches
in a row that ended in their first round, the next begins one step shallower (down to
FIRST_DEPTH). At 1M rows (benchmarks/retrieval.py) every search ends at 1,024 rows: a
first round at 256 is abandoned for its 12k recent memories, and cost 1.5 ms a search;
at 100k every search ends at 256, where 1,024 would cost 5 ms more."""

DEEPER = 4
"""How much deeper each further round reads the index."""

TAIL_ROWS = 1024
"""Cosines of at least this many rows read a dense tail of the table in place."""

FAR_COUNT = 16
"""Rows the negated query's search returns; the least of their exact cosines is used."""

SCAN_ROWS = 32768
"""Up to this many rows the least cosine comes from a scan of them all (exact, and
cheaper than reading lists there)."""

PROBE_ROWS = 8192
"""About how many rows of `FarRows` (at least 8 lists) are read for the least cosine. At
1M clustered rows (benchmarks/retrieval.py, 1,024 lists), 8 lists took 1.1 ms and found
it 0.4% of the cosine range too high on average (4 lists: 0.6 ms, 0.5%; 16: 1.8 ms,
0.3%), where a search of the HNSW graph with efSearch 1536 took 9 ms and erred by 0.7%.
At 100k rows (256 lists), recall@10 was 0.992 with 8 lists and 0.998 with 16 or 32."""

REBUILD = 4
"""`FarRows` is trained again (more lists) when the stream has grown this many times
over since it was trained: amortised O(1) per add."""

LAYOUT = 2
"""The graph is laid out list by list again (`GraphTable.reorder`) when it has grown this
many times over since its last layout, as rows added since keep their order of arrival (a
graph all in that order searched 30% slower at 1M rows). The lists take in new rows between
trainings, so a layout needs no training; amortised O(1) per add."""


class HNSWRetriever:
    """The retriever of an `index="hnsw"` stream (`smallville.memory.retriever`): its
    embeddings in a `GraphTable`, the ordered structures, and the threshold search.
    Scores need non-negative weights (the bounds of step 2 assume each term only adds)."""

    kind = "hnsw"

    def __init__(
        self,
        dim: int,
        weights: tuple[float, float, float],
        *,
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int = 64,
    ) -> None:
        if min(weights) < 0:
            raise ValueError(f"index='hnsw' needs non-negative weights, got {weights!r}")
        self.table = GraphTable(dim, hnsw_m, ef_construction)
        self.ef_search = ef_search
        self.order = AccessOrder()
        self.far = FarRows()
        self.start, self.easy = FIRST_DEPTH, 0  # where searches begin (PROBE_EVERY)
        self.need: float | None = None  # the last search's bound for recent memories
        self.first = np.full(16, -1, dtype=np.int64)  # row -> newest memory using it
        self.prev = np.full(16, -1, dtype=np.int64)  # memory -> older memory, same row
        self.known = np.full(16, np.nan, dtype=np.float32)  # memory -> cosine (_Cosines)

    def add(self, mid: int, row: int, importance: int, time: float) -> None:
        """Index a new memory: O(1) amortised (its HNSW insertion waits for a search)."""
        if row >= len(self.first):
            self.first = np.concatenate([self.first, np.full(len(self.first), -1)])
        if mid >= len(self.prev):
            self.prev = np.concatenate([self.prev, np.full(len(self.prev), -1)])
            self.known = np.concatenate([self.known, np.full(len(self.known), np.nan, dtype=np.float32)])
        self.prev[mid], self.first[row] = self.first[row], mid
        self.order.add(mid, importance, time)

    def bulk_add(self, start: int, rows: np.ndarray, importance: np.ndarray, accessed: np.ndarray) -> None:
        """`add` for loaded memories start, start+1, ..."""
        for i, (row, imp, time) in enumerate(zip(rows.tolist(), importance.tolist(), accessed.tolist())):
            self.add(start + i, row, imp, time)

    def touch(self, mids: list[int], time: float) -> None:
        self.order.touch(mids, time)

    def _members(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every memory whose embedding is one of `rows`, sorted, and the place in `rows`
        of each one's row."""
        found, at, mids = [], [], self.first[rows]
        where = np.arange(len(rows))
        while len(mids):
            found.append(mids)
            at.append(where)
            mids = self.prev[mids]
            where = where[mids >= 0]
            mids = mids[mids >= 0]
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        mids, where = np.concatenate(found), np.concatenate(at)
        order = np.argsort(mids)
        return mids[order], where[order]

    def search(self, stream, queries: np.ndarray, k: int, now: float) -> list[tuple]:
        """For each query, (ids, scores, recency, importance, relevance) of about the k
        best memories, best first, with the terms normalised as in the exact path."""
        return [self._search(stream, query, k, now) for query in queries]

    def _search(self, stream, query: np.ndarray, k: int, now: float) -> tuple:
        self.table.flush()
        self.order.prepare()
        u = len(self.table)
        rec_norm = span(*recency(np.array([self.order.oldest(), self.order.newest()]), now, stream.decay))
        imp_norm = span(*self.order.importance_range())
        # the least cosine, from the negated query's best matches (module docstring)
        if u <= SCAN_ROWS:
            least = self._least
        else:
            trained = self.far.update(self.table)
            if trained or u >= LAYOUT * self.table.laid_out:  # lay the graph out by list
                self.table.reorder(self.far.rows_by_list())
            least = self.far.least
        if _helper():  # then the cosines of the recent memories likely needed, in turn
            helper = stream.helpers.pool(1)
            far = helper.submit(least, query)
            likely = helper.submit(self._likely, stream, self.need, query, now, rec_norm, imp_norm)
        else:
            far, likely = _done(least(query)), _done(None)
        try:
            return self._rounds(stream, query, k, now, rec_norm, imp_norm, u, far, likely)
        finally:
            far.result(), likely.result()  # never leave a search running past this call

    def _rounds(self, stream, query, k, now, rec_norm, imp_norm, u, far, likely):
        """Steps 1-3 of the module docstring, deeper until the stop test passes. `far`
        will hold the rows of the least cosines, `likely` `_likely`'s cosines."""
        w_rel = stream.weights[2]
        depth, far_cos = min(u, max(2 * k, self.start)), None
        first = depth
        cache = _Cosines(self.known, self.table, stream.columns.rows, query)
        try:
            while True:
                dist, hits = self.table.nearest(query, depth, max(self.ef_search, depth))
                rel_cut = float(dist[-1]) if len(hits) < u else -np.inf
                cand, at = self._members(hits)  # distinct: a memory has one row
                cache.add(cand, dist[at], replace=True)  # the graph's inner products
                if far_cos is None:  # widened below by every cosine computed
                    far_cos = np.vecdot(self.table.matrix()[far.result()], query)
                score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now, rec_norm, imp_norm)
                if len(hits) >= u:  # the index was read to its end: nothing is unseen
                    need = None
                    break
                # unseen memories have relevance <= rel_cut, so only those whose recency and
                # importance alone exceed `need` can beat the k-th score: read them all
                need = _kth(score, k) - w_rel * float(normalise(rel_cut, *rel_norm))
                extra = self._recent_above(stream, need, now, rec_norm, imp_norm)
                last = depth >= u  # a graph that loses rows may return fewer than asked
                if len(extra) <= EXTRA_LIMIT or last:
                    if likely.result() is not None:
                        cache.add(*likely.result())
                        likely = _done(None)  # taken in
                    cand = _union(cand, extra)
                    score, terms, rel_norm = self._score(stream, cand, cache, far_cos, now, rec_norm, imp_norm)
                    if last or _kth(score, k) >= need + w_rel * float(normalise(rel_cut, *rel_norm)):
                        break
                depth = min(u, DEEPER * depth)
        finally:
            cache.clear()
        self._next_start(first, depth)
        self.need = need
        best = top_k(score, k)
        return cand[best], score[best], terms[0][best], terms[1][best], terms[2][best]

    def _next_start(self, first: int, depth: int) -> None:
        """Where the next search begins, after one that began at `first` and ended at
        `depth` (PROBE_EVERY)."""
        self.easy = self.easy + 1 if depth == first else 0
        self.start = depth
        if self.easy >= PROBE_EVERY and depth > FIRST_DEPTH:
            self.start, self.easy = max(FIRST_DEPTH, depth // DEEPER), 0

    def _likely(self, stream, need, query, now, rec_norm, imp_norm):
        """(memories, cosines) of the recent memories the last search's bound `need`
        selects, which this search will most likely read too: computed on the helper
        thread while the graph is searched. Which cosines are computed where changes
        no result: the exact path's kernel gives a memory's cosine the same bits wherever
        it is computed, and the graph's inner products replace it for the hits."""
        if need is None:
            return None
        mids = np.sort(self._recent_above(stream, need, now, rec_norm, imp_norm))
        return mids, _cosines(self.table.matrix(), stream.columns.rows[mids], query)

    def _least(self, query: np.ndarray) -> np.ndarray:
        """Like `FarRows.least`, by a scan of every row: the rows of the FAR_COUNT least
        cosines."""
        cos = np.vecdot(self.table.matrix(), query)
        return np.argpartition(cos, min(FAR_COUNT, len(cos)) - 1)[:FAR_COUNT]

    def _score(self, stream, cand, cache, far_cos, now, rec_norm, imp_norm):
        """The exact scores and terms of memories `cand`, relevance normalised between the
        least and greatest cosine known."""
        w_rec, w_imp, w_rel = stream.weights
        cos = cache.get(cand)
        rel_norm = span(
            float(min(cos.min(), far_cos.min(initial=np.inf))), float(max(cos.max(), far_cos.max(initial=-np.inf)))
        )
        terms = (
            normalise(recency(stream.columns.accessed[cand], now, stream.decay), *rec_norm),
            normalise(stream.columns.importance[cand], *imp_norm),
            normalise(cos, *rel_norm),
        )
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
            start = lv.head + int(np.searchsorted(lv.times[lv.head : lv.end], cut))
            mids = lv.mids[start : lv.end]
            found.append(mids[self.order.pos[mids] == np.arange(start, lv.end)])
            if sum(map(len, found)) > EXTRA_LIMIT:
                break
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


class FarRows:
    """A coarse index of the table's rows for the negated query's search, which finds the
    least cosine: an inverted file (FAISS `IndexIVFScalarQuantizer`) of about sqrt(n)
    k-means lists of 8-bit codes, 400 bytes a row. Trained at the first search past
    `SCAN_ROWS` rows and again each time the table has grown `REBUILD` times over; rows
    added in between go to their nearest list. Its lists also give the graph its layout
    (`rows_by_list`)."""

    def __init__(self) -> None:
        self.index = None
        self.quantizer = None  # the list centres: FAISS does not own it, so we keep it
        self.trained_at = 0

    def update(self, table: GraphTable) -> bool:
        """Take in the rows added since the last search, or train afresh (True)."""
        u = len(table)
        if self.index is None or u >= REBUILD * self.trained_at:
            self._train(table.matrix())
            return True
        if self.index.ntotal < u:
            self.index.add(table.matrix()[self.index.ntotal :])
        return False

    def rows_by_list(self) -> np.ndarray:
        """Every row in the lists, list by list: near rows near each other."""
        lists = self.index.invlists
        return np.concatenate(
            [np.zeros(0, dtype=np.int64)]
            + [
                faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i))
                for i in range(lists.nlist)
                if lists.list_size(i)
            ]
        )

    def least(self, query: np.ndarray) -> np.ndarray:
        """Rows whose cosines with `query` are (about) the FAR_COUNT least."""
        _, labels = self.index.search(-query[None, :], FAR_COUNT)
        return labels[0][labels[0] >= 0]

    def _train(self, rows: np.ndarray) -> None:
        u, dim = rows.shape
        # a power of two near sqrt(u), with the 39 training rows a list FAISS asks for
        lists = 1 << max(0, min(round(math.log2(math.sqrt(u))), int(math.log2(max(1, u // 39)))))
        sample = rows
        if u > 64 * lists:  # k-means on a sample of 64 rows a list (seeded: repeatable)
            sample = rows[np.sort(np.random.default_rng(u).choice(u, 64 * lists, replace=False))]
        self.quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            self.quantizer, dim, lists, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        index.train(np.ascontiguousarray(sample))
        index.add(rows)
        index.nprobe = min(lists, max(8, math.ceil(PROBE_ROWS * lists / u)))
        self.index, self.trained_at = index, u


def _helper() -> bool:
    """Whether the negated query's search (and the likely cosines) run on a helper
    thread."""
    return threads() >= 2


def _done(value) -> Future:
    """A future that already holds `value`."""
    future: Future = Future()
    future.set_result(value)
    return future


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `a` and `b`: `np.union1d`, which took 1.3 ms where
    this takes 0.15 ms on 14k memories (numpy 2.4 hashes before it sorts)."""
    both = np.sort(np.concatenate([a, b]))
    keep = np.ones(len(both), dtype=bool)
    np.not_equal(both[1:], both[:-1], out=keep[1:])
    return both[keep]


def _kth(score: np.ndarray, k: int) -> float:
    """The k-th highest of `score`; -inf when there are fewer than k."""
    n = len(score)
    return float(np.partition(score, n - k)[n - k]) if n >= k else -np.inf


class _Cosines:
    """Cosines of memories with one query, each computed once per search (by the same
    kernel as the exact path, unless the graph gave it) however often it is asked for.
    They are kept in `known`, an array by memory id that is NaN for a memory not known
    and that the search owns: `clear` puts back the NaNs, so each search pays only for
    the memories it reads."""

    def __init__(self, known: np.ndarray, table: GraphTable, rows: np.ndarray, query: np.ndarray) -> None:
        self.known, self.table, self.rows, self.query = known, table, rows, query
        self.touched: list[np.ndarray] = []

    def get(self, cand: np.ndarray) -> np.ndarray:
        """Cosines of distinct memories `cand`."""
        cos = self.known[cand]
        new = np.isnan(cos)
        if new.any():
            cos[new] = _cosines(self.table.matrix(), self.rows[cand[new]], self.query)
            self.add(cand[new], cos[new], replace=True)
        return cos

    def add(self, mids: np.ndarray, cos: np.ndarray, replace: bool = False) -> None:
        """Keep the cosines `cos` of distinct memories `mids`; those of memories already
        known are ignored, or with `replace` replace the known ones."""
        if not replace:
            new = np.isnan(self.known[mids])
            mids, cos = mids[new], cos[new]
        self.known[mids] = cos
        self.touched.append(mids)

    def clear(self) -> None:
        """Forget every cosine (the array is all NaN again)."""
        for mids in self.touched:
            self.known[mids] = np.nan
        self.touched = []


def _cosines(matrix: np.ndarray, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
    """`np.vecdot(matrix[rows], query)`. Recent memories have the newest rows, so the
    rows asked for are often most of the table's tail: that run is read where it lies
    (gathering rows first cost 4x more), the rest gathered."""
    u, n = len(matrix), len(rows)
    if n < TAIL_ROWS:
        return np.vecdot(matrix[rows], query)
    ordered = np.sort(rows)
    # the longest tail [lo, u) of which at least half the rows are asked for
    dense = np.flatnonzero(2 * (n - np.arange(n)) >= u - ordered)
    if not len(dense) or n - dense[0] < TAIL_ROWS:
        return np.vecdot(matrix[rows], query)
    lo = int(ordered[dense[0]])
    tail = np.vecdot(matrix[lo:], query)
    out = np.empty(n, dtype=np.float32)
    inside = rows >= lo
    out[inside] = tail[rows[inside] - lo]
    out[~inside] = np.vecdot(matrix[rows[~inside]], query)
    return out
