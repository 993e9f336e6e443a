"""Where a stream's embeddings live: each distinct embedding once, in a FAISS index.

Repeated observations ("the bed is idle") are common, so memories point to rows of a
table of distinct unit vectors. That saves memory and scan time, and makes identical
memories share one row, hence one relevance value: ties between them are exact by
construction, whatever kernel computes the dot products.
"""

from __future__ import annotations

from functools import cache

import faiss
import numpy as np

HASH_SEED = 0x5EED
HASH_BLOCK = 65536


@cache
def _mix(dim: int) -> np.ndarray:
    """The odd multipliers of the row hash for vectors of `dim` (the same for every table)."""
    mix = np.random.default_rng(HASH_SEED).integers(1, 2**63, size=dim, dtype=np.uint64)
    mix |= np.uint64(1)
    mix.flags.writeable = False
    return mix


class VectorTable:
    """Distinct float32 unit vectors, each stored once and named by its row (0..u-1).

    The rows are the storage of a `faiss.IndexFlatIP` (no second copy); `matrix()` is a
    view of it. The HNSW path keeps its rows its own way (`smallville.memory.approx.graph`),
    through the two seams a subclass overrides: `new_index` and `store`.
    """

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._u = 0
        self._keys: dict[int, int] | None = {}
        self._mix = _mix(dim)
        self.index = self.new_index()

    def new_index(self):
        """The FAISS index that holds the rows."""
        return faiss.IndexFlatIP(self.dim)

    def __len__(self) -> int:
        return self._u

    def add(self, vector: np.ndarray) -> int:
        """The row holding `vector` (float32, unit length), appending it if new."""
        if self._keys is None:
            self._rebuild_keys()
        key = self._hash(vector[None, :])[0]
        row = self._keys.get(key)
        if row is not None and np.array_equal(self.row(row), vector):
            return row
        row = self._append(vector[None, :])
        if key not in self._keys:  # a true hash collision keeps the first row's key
            self._keys[key] = row
        return row

    def extend(self, rows: np.ndarray) -> None:
        """Append rows known to be distinct (a saved table); keys are rebuilt lazily."""
        if len(rows):
            self._append(np.ascontiguousarray(rows, dtype=np.float32))
            self._keys = None

    def extend_from(self, source: VectorTable, u: int) -> None:
        """Append `source`'s first `u` rows, their keys with them (no hashing again): a
        branch of a stream starts so."""
        if self._u:
            raise ValueError("extend_from needs an empty table")
        self.extend(source.matrix()[:u])
        if source._keys is None:
            source._rebuild_keys()
        self._keys = dict(source._keys) if u == source._u else {k: r for k, r in source._keys.items() if r < u}

    def row(self, i: int) -> np.ndarray:
        """Row `i` (a view: copy it before the table grows)."""
        return self.matrix()[i]

    def matrix(self) -> np.ndarray:
        """The (u, dim) rows. A view into storage that moves when the table grows: use it
        at once, never keep it across an `add`."""
        if self._u == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        flat = faiss.rev_swig_ptr(self.index.get_xb(), self._u * self.dim)
        return flat.reshape(self._u, self.dim)

    def store(self, rows: np.ndarray) -> None:
        """Put `rows` in storage after the `len(self)` rows there (they count once stored)."""
        self.index.add(rows)

    def _append(self, rows: np.ndarray) -> int:
        first = self._u
        self.store(rows)
        self._u += len(rows)
        return first

    def _hash(self, rows: np.ndarray) -> list[int]:
        return (rows.view(np.uint32).astype(np.uint64) @ self._mix).tolist()  # wraps mod 2**64

    def _rebuild_keys(self) -> None:
        keys: dict[int, int] = {}
        matrix = self.matrix()
        for lo in range(0, self._u, HASH_BLOCK):
            for j, key in enumerate(self._hash(matrix[lo : lo + HASH_BLOCK])):
                keys.setdefault(key, lo + j)
        self._keys = keys


def unit_rows(rows: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length as a stream stores an embedding it is given (in float64,
    then float32), bit for bit: `np.vecdot` takes each row's dot with itself by the same BLAS
    call `v @ v` makes, and the square root, division and rounding are exact operations. So a
    checkpoint can refer to an embedder's recorded row instead of writing the stored one."""
    v = np.asarray(rows, dtype=np.float64)
    if not len(v):
        return np.zeros(v.shape, dtype=np.float32)
    return (v / np.sqrt(np.vecdot(v, v))[:, None]).astype(np.float32)
