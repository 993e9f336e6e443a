"""Sentence embedders: the relevance signal of memory retrieval.

An embedder turns texts into float32 rows of unit length, so a dot product is a cosine.
Three ship: `UseEmbedder` (Google USE multilingual v3, weights inside the package, the
default), `LexicalEmbedder` (hashed words and word pairs; no model, a test double and
fallback) and `LiteLLMEmbedder` (any embedding model litellm can call). `CachedEmbedder`
wraps any of them so each distinct text is embedded once. Embeddings from different
embedders don't mix: record `name` with whatever stores them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from smallville.embed.later import Base, Coming, Later
from smallville.embed.lexical import LexicalEmbedder
from smallville.embed.litellm import LiteLLMEmbedder
from smallville.embed.use import UseEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "Later",
    "LexicalEmbedder",
    "LiteLLMEmbedder",
    "UseEmbedder",
    "make_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into a float32 (len(texts), dim) array of L2-normalised rows: at once
    (`embed`), or later (`submit`: see `smallville.embed.later`)."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def submit(self, texts: Sequence[str], soon: bool = False) -> Later: ...

    def close(self) -> None: ...


class CachedEmbedder(Base):
    """Embeds each distinct text once: a dict text -> row in front of `inner`.

    The misses of one call go to `inner` in one batch. `misses` counts the texts sent to
    `inner`, `hits` the texts answered without it (a repeat within one call is a hit, and
    so is a text submitted before and still coming). The cache is unbounded: a town's
    distinct observations number in the thousands.
    """

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.hits = 0
        self.misses = 0
        self._rows: dict[str, np.ndarray] = {}
        self._coming = Coming(self._keep)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit(texts, soon=True)()

    def submit(self, texts: Sequence[str], soon: bool = False) -> Later:
        texts, coming = list(texts), self._coming
        todo = list(dict.fromkeys(t for t in texts if t not in self._rows and t not in coming))
        if todo:
            coming.ask(todo, self.inner.submit(todo, soon))
        self.misses += len(todo)
        self.hits += len(texts) - len(todo)
        return coming.later(texts, lambda: self._stack(texts))

    def _keep(self, texts: list[str], rows: np.ndarray) -> None:
        for text, row in zip(texts, rows):
            self._rows[text] = row

    def _stack(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        known, coming = self._rows, self._coming
        return np.stack([known[t] if t in known else coming.row(t) for t in texts]).astype(np.float32, copy=False)

    def close(self) -> None:
        """Keep what has come and end the embedder (what has not come is asked again if
        needed: a checkpoint waited for everything it refers to, `sync`)."""
        self._coming.take()
        self.inner.close()

    def __len__(self) -> int:
        return len(self._rows)


def make_embedder(
    spec: str = "use",
    *,
    api_base: str | None = None,
    record=None,
    base=(),
    write: bool = True,
    process: bool = False,
) -> Embedder:
    """The cached embedder named by `spec`: "use" (default), "lexical", or any litellm
    embedding model name such as "openai/text-embedding-3-small" (`api_base` for a
    self-hosted OpenAI-compatible server). With `record` (a run's `embeddings/` folder, and
    `base`, its parents'), embeddings come from the run's record first and new ones are
    added to it (unless `write` is off): see `smallville.embed.record`. With `process`, USE
    runs in a process of its own (`smallville.embed.process`): close the embedder after."""
    if not isinstance(spec, str) or not spec.strip() or spec != spec.strip():
        raise ValueError(f"embedder {spec!r} is not valid: use 'use', 'lexical' or a litellm model name")
    if spec == "use":
        inner = UseEmbedder(process=process)
    elif spec == "lexical":
        inner = LexicalEmbedder()
    else:
        inner = LiteLLMEmbedder(spec, api_base=api_base)
    if record is not None:
        from smallville.embed.record import RecordedEmbedder

        return RecordedEmbedder(inner, record, base, write)
    return CachedEmbedder(inner)


def recorded(cached: CachedEmbedder, folder, base=(), write: bool = True) -> Embedder:
    """`cached`'s embedder answering from a run's record of embeddings first, which is its
    cache from then on (`smallville.embed.record`)."""
    from smallville.embed.record import RecordedEmbedder

    return RecordedEmbedder(cached.inner, folder, base, write)
