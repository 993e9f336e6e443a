"""Embeddings from any model litellm can call (OpenAI, Ollama, vLLM, a local server...)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from smallville.embed.later import Base
from smallville.errors import BrainError


class LiteLLMEmbedder(Base):
    """Calls `litellm.embedding` in batches of `batch_size` texts.

    `dim` is learned from the first answer (reading it before any `embed` sends one probe
    text). Rows are L2-normalised here, whatever the server returns. Any failure of the
    call becomes a one-line `BrainError` naming the model and endpoint.
    """

    def __init__(
        self,
        model: str,
        api_base: str | None = None,
        batch_size: int = 64,
        api_key: str | None = None,
        timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"litellm embedding model must be a non-empty name, got {model!r}")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        self.model = model
        self.api_base = api_base
        self.batch_size = batch_size
        self.api_key = api_key
        self.timeout = timeout
        self.kwargs = kwargs
        self.name = f"litellm:{model}"
        self._dim: int | None = None
        self._key_checked = api_key is not None

    @property
    def dim(self) -> int:
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        parts = [self._call(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        rows = np.concatenate(parts).astype(np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0).astype(np.float32)

    def _call(self, batch: list[str]) -> np.ndarray:
        where = self.api_base or "its default endpoint"
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm  # lazy: slow to import, and must not fetch a cost map at import

        litellm.suppress_debug_info = True  # our BrainError says it in one line
        if not self._key_checked:  # a keyless local server gets a placeholder key
            from smallville.brain.keys import api_key_for

            self.api_key = api_key_for(self.model, self.api_base, None, what="embedding model")
            self._key_checked = True
        try:
            answer = litellm.embedding(
                model=self.model,
                input=batch,
                api_base=self.api_base,
                api_key=self.api_key,
                timeout=self.timeout,
                **self.kwargs,
            )
            data = sorted(answer.data, key=lambda d: _field(d, "index"))
            rows = np.array([_field(d, "embedding") for d in data], dtype=np.float32)
        except Exception as exc:  # every provider raises its own types; report, don't guess
            from smallville.brain.calls import one_line

            detail = one_line(exc)
            raise BrainError(
                f"embedding model {self.model!r} at {where} failed: {type(exc).__name__}: {detail}"
            ) from exc
        if rows.ndim != 2 or len(rows) != len(batch):
            raise BrainError(
                f"embedding model {self.model!r} at {where} returned {len(rows)} vectors for {len(batch)} texts"
            )
        if self._dim is None:
            self._dim = rows.shape[1]
        elif rows.shape[1] != self._dim:
            raise BrainError(
                f"embedding model {self.model!r} at {where} changed dimension from {self._dim} to {rows.shape[1]}"
            )
        return rows


def _field(item: Any, key: str) -> Any:
    """`item[key]` for dicts and litellm's response objects alike."""
    return item[key] if isinstance(item, dict) else getattr(item, key)
