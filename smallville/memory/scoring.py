"""The retrieval formula of Park et al. (2023), vectorised over a whole stream."""

from __future__ import annotations

import numpy as np

CONSTANT_TERM = 0.5
"""The normalised value of a term that is equal for every memory (max == min). Any
constant ranks the same; 0.5, the middle of [0, 1], is what the paper's code uses
(`normalize_dict_floats` in reverie's retrieve.py)."""


def minmax(values: np.ndarray) -> np.ndarray:
    """`values` scaled to [0, 1] by min-max along the last axis; a constant row -> 0.5."""
    lo = values.min(axis=-1, keepdims=True)
    hi = values.max(axis=-1, keepdims=True)
    span = hi - lo
    flat = span == 0
    scaled = (values - lo) / np.where(flat, 1.0, span)
    return np.where(flat, CONSTANT_TERM, scaled)


def recency(last_accessed: np.ndarray, now: float, decay: float) -> np.ndarray:
    """decay ** hours since each memory was last accessed."""
    return np.power(decay, (now - last_accessed) / 3600.0)


def cosines(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """(m, n) dot products of unit-length queries (m, d) with stored vectors (n, d).

    einsum, not `@`: BLAS rounds identical rows differently depending on where they sit,
    which would break exact ties between repeated memories ("the bed is idle") by noise.
    numpy's einsum runs the same loop for every row, so equal rows give equal values, and
    a batch of queries gives bit-for-bit what each query gives alone.
    """
    return np.einsum("ij,kj->ki", vectors, queries).astype(np.float64)


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
