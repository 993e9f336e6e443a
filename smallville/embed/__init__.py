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

from smallville.embed.later import Later, TextCache
from smallville.embed.lexical import LexicalEmbedder
from smallville.embed.litellm import LiteLLMEmbedder
from smallville.embed.use import UseEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "Later",
    "LexicalEmbedder",
    "LiteLLMEmbedder",
    "Overlay",
    "TextCache",
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

    def expect(self, texts: Sequence[str]) -> None: ...

    def close(self) -> None: ...


class CachedEmbedder(TextCache):
    """Embeds each distinct text once: a dict text -> row in front of `inner` (`TextCache`).
    The cache is unbounded: a town's distinct observations number in the thousands."""

    def __init__(self, inner: Embedder) -> None:
        self._rows: dict[str, np.ndarray] = {}
        super().__init__(inner, self._keep)

    def known(self, text: str) -> np.ndarray | None:
        return self._rows.get(text)

    def _keep(self, texts: list[str], rows: np.ndarray) -> None:
        for text, row in zip(texts, rows):
            self._rows[text] = row

    def __len__(self) -> int:
        return len(self._rows)


class Overlay(CachedEmbedder):
    """A cache over another (`under`) that leaves it as it was: a text `under` has kept is
    read from it, any other is asked of `under`'s own embedder and kept here only. Run-ahead's
    copies embed through one, so the run's rows come only of the run's own calls: a USE row
    depends on the texts of its call, and the copies ask other texts together (and first)."""

    def __init__(self, under: TextCache) -> None:
        super().__init__(under.inner)
        self.under = under

    def known(self, text: str) -> np.ndarray | None:
        row = self.under.known(text)
        return super().known(text) if row is None else row

    def close(self) -> None:
        """Keep what has come (the embedder is `under`'s: it is left open)."""
        self.coming.take()


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
