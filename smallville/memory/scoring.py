"""The retrieval formula of Park et al. (2023), vectorised over a whole stream."""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

CONSTANT_TERM = 0.5
"""The normalised value of a term that is equal for every memory (max == min). Any
constant ranks the same; 0.5, the middle of [0, 1], is what the paper's code uses
(`normalize_dict_floats` in reverie's retrieve.py)."""

BLOCK_ROWS = 2048
"""Rows per block when several queries share one pass: a block (3 MB at 384 dims) stays
in cache while every query is scored against it."""


def span(lo: float, hi: float) -> tuple[float, float]:
    """(lo, hi - lo): what min-max maps to [0, 1] by `normalise`; a zero span is flat."""
    return lo, hi - lo


def normalise(values, lo: float, width: float) -> np.ndarray:
    """(values - lo) / width as float64; everything CONSTANT_TERM when width is 0."""
    if width == 0:
        return np.full(np.shape(values), CONSTANT_TERM)
    return (np.asarray(values, dtype=np.float64) - lo) / width


def recency(last_accessed: np.ndarray, now: float, decay: float) -> np.ndarray:
    """decay ** hours since each memory was last accessed (as exp, which is ~6x faster
    than np.power and equal to it within 1e-15)."""
    return np.exp((last_accessed - now) * (-math.log(decay) / 3600.0))


def scan(matrix: np.ndarray, queries: np.ndarray, helpers: Helpers | None = None):
    """(m, u) float32 dot products of unit queries (m, d) with the stored rows (u, d).

    Returns a function that gives the result. With one query over a large stream and
    `helpers`, the rows are split between helper threads (the values are the same), which
    read them while this thread goes on until it asks for the result.

    One pass over the matrix. `np.vecdot` computes each (query, row) pair by the same
    BLAS dot call, so a row's value depends only on that row and the query: never on its
    position, on the matrix's size or growth, or on the other queries of a batch. A BLAS
    mat-vec (`matrix @ q`) is ~25% faster but rounds rows differently by position and by
    thread split, which broke exact ties between repeated memories.
    """
    m, u = len(queries), len(matrix)
    out = np.empty((m, u), dtype=np.float32)
    if m == 1:
        parts = _split(u) if helpers is not None else [(0, u)]
        if len(parts) == 1:
            np.vecdot(matrix, queries[0], out=out[0])
            return lambda: out
        pool = helpers.pool(len(parts))  # a large stream: rows in parallel, the same values
        futures = [pool.submit(np.vecdot, matrix[lo:hi], queries[0], out=out[0, lo:hi]) for lo, hi in parts]

        def result() -> np.ndarray:  # meanwhile the caller computes the other terms
            for future in futures:
                future.result()
            return out

        return result
    batch = queries[:, None, :]
    for lo in range(0, u, BLOCK_ROWS):
        hi = min(u, lo + BLOCK_ROWS)
        np.vecdot(matrix[lo:hi], batch, out=out[:, lo:hi])
    return lambda: out


PARALLEL_ROWS = 32768
"""Streams of at least this many distinct rows are scored on several threads: one pass
over memory is bandwidth-bound, and two cores read it faster than one."""


def threads() -> int:
    """Threads for one pass: the CPUs this process may use, capped by OMP_NUM_THREADS
    (experiment workers set it to 1: there the workers are the parallelism)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    try:
        cap = int(os.environ.get("OMP_NUM_THREADS") or cpus)
    except ValueError:
        cap = cpus
    return max(1, min(cpus, cap, 8))


def _split(u: int) -> list[tuple[int, int]]:
    n = threads() if u >= PARALLEL_ROWS else 1
    edges = [u * i // n for i in range(n + 1)]
    return list(zip(edges[:-1], edges[1:]))


class Helpers:
    """Helper threads for searches over large streams, started when a search first needs
    them and ended by `close`, which their owner calls: the `Simulation` for its agents'
    streams, else the stream itself (`MemoryStream.close`). A search after `close` starts
    them again. One pool per size; a forked child process makes its own (a parent's threads
    do not survive a fork)."""

    def __init__(self) -> None:
        self._pools: dict[int, ThreadPoolExecutor] = {}
        self._pid = os.getpid()

    def pool(self, n: int) -> ThreadPoolExecutor:
        """The pool of `n` helper threads."""
        if self._pid != os.getpid():
            self._pools, self._pid = {}, os.getpid()
        if n not in self._pools:
            self._pools[n] = ThreadPoolExecutor(max_workers=n, thread_name_prefix="smallville-helper")
        return self._pools[n]

    def close(self) -> None:
        """End the helper threads (a search under way finishes first)."""
        pools, self._pools = self._pools, {}
        if self._pid == os.getpid():
            for each in pools.values():
                each.shutdown(wait=True)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; equal scores: higher index first."""
    n = len(scores)
    if k >= n:
        candidates = np.arange(n)
    else:
        kth = np.partition(scores, n - k)[n - k]  # the k-th highest value
        candidates = np.flatnonzero(scores >= kth)  # keeps every tie at the boundary
    order = np.lexsort((-candidates, -scores[candidates]))
    return candidates[order[:k]]
