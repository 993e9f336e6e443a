"""A model-free embedder: hashed words and word pairs."""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

from smallville.embed.later import Base

_WORD = re.compile(r"[^\W_]+")


def words(text: str) -> list[str]:
    """Lower-cased words of `text`, punctuation dropped ("Isabella's" -> "isabellas")."""
    return _WORD.findall(text.lower().replace("'", "").replace("\u2019", ""))


class LexicalEmbedder(Base):
    """Counts of hashed words and adjacent word pairs, L2-normalised.

    Deterministic across processes and machines (crc32, never Python's `hash`). It knows
    no meaning: texts are close when they share words. A test double and a fallback when
    no model is available, never a substitute for one. A text with no words embeds to a
    fixed unit vector of its own.
    """

    def __init__(self, dim: int = 512) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"lexical embedder dim must be a positive int, got {dim!r}")
        self.dim = dim
        self.name = f"lexical-{dim}"

    def _features(self, text: str) -> list[str]:
        ws = words(text)
        if not ws:
            return ["<empty>"]
        return [f"w:{w}" for w in ws] + [f"b:{a} {b}" for a, b in zip(ws, ws[1:])]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            slots = [zlib.crc32(f.encode("utf-8")) % self.dim for f in self._features(text)]
            out[i] = np.bincount(slots, minlength=self.dim)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out
