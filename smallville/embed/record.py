"""A run's embeddings, part of its record: each distinct text's embedding is stored once,
append-only, when first computed, so restoring, replaying, verifying, forking, inspecting
and interviewing a run never ask the embedder for a text the record has (a run with a
remote embedder goes on with no server), and get the very bits the run used.

    RUN_DIR/embeddings/texts.jsonl    one JSON string a line, in the order first embedded
    RUN_DIR/embeddings/vectors.f32    the rows, raw little-endian float32, same order

A crash can leave one file a row ahead of the other: what both hold is the record, and
the next write cuts the rest off. A fork reads its parent's record too (`base`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np

TEXTS, VECTORS = "texts.jsonl", "vectors.f32"


class EmbeddingRecord:
    """The texts and rows in one run folder's `embeddings/` (read at open)."""

    def __init__(self, folder: str | Path, dim: int | None = None) -> None:
        self.folder = Path(folder)
        self.rows: dict[str, np.ndarray] = {}
        self.dim = dim
        self._texts_bytes = 0
        self._count = 0
        self._files = None
        self._pid = os.getpid()                 # a forked copy (run-ahead) never writes the run's files
        texts_path, vectors_path = self.folder / TEXTS, self.folder / VECTORS
        self.dim = dim or record_dim(self.folder)
        if not (texts_path.exists() and vectors_path.exists() and self.dim):
            return
        lines = texts_path.read_bytes().split(b"\n")[:-1]             # a torn last line is not read
        vectors = np.fromfile(vectors_path, dtype="<f4")
        n = min(len(lines), len(vectors) // self.dim)
        vectors = vectors[: n * self.dim].reshape(n, self.dim)
        for line, row in zip(lines[:n], vectors):
            self.rows.setdefault(json.loads(line), row)
        self._texts_bytes = sum(len(line) + 1 for line in lines[:n])
        self._count = n

    def keep(self, texts: Sequence[str], rows: np.ndarray) -> None:
        """Know these embeddings from now on, in memory only."""
        for text, row in zip(texts, np.asarray(rows, dtype="<f4")):
            self.rows.setdefault(text, row)

    def add(self, texts: Sequence[str], rows: np.ndarray) -> None:
        """Append embeddings of texts not in the record (the caller checked). Written
        through to the files at once (flushed, not synced: a lost tail is computed again)."""
        if not len(texts):
            return
        if os.getpid() != self._pid:
            self.keep(texts, rows)
            return
        if self._files is None:
            self._open(rows.shape[1])
        vectors = np.ascontiguousarray(rows, dtype="<f4")
        data = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts).encode("utf-8")
        out_vectors, out_texts = self._files
        out_vectors.write(vectors.tobytes())            # rows first: a text line never lacks its row
        out_vectors.flush()
        out_texts.write(data)
        out_texts.flush()
        self.keep(texts, vectors)

    def _open(self, dim: int) -> None:
        """Open both files for appending, cut back to what the record holds."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dim = self.dim or dim
        if not (self.folder / "dim").exists():
            (self.folder / "dim").write_text(str(self.dim))
        self._files = (_cut(self.folder / VECTORS, self._count * self.dim * 4), _cut(self.folder / TEXTS, self._texts_bytes))

    def close(self) -> None:
        for f in self._files or ():
            f.close()
        self._files = None


class RecordedEmbedder:
    """An embedder that answers from a run's record first (and its parent's, `base`), asks
    `inner` only for texts the record lacks, and records those (with `write` off: keeps them
    in memory only). So it is a per-text cache too, in place of `CachedEmbedder`. Its `dim`
    comes from the record when it has one, so a remote embedder is not reached."""

    def __init__(self, inner, folder: str | Path, base: list[str | Path] = (), write: bool = True) -> None:
        self.inner = inner
        self.write = write
        self.bases = [EmbeddingRecord(Path(b)) for b in base]
        self.record = EmbeddingRecord(folder, next((b.dim for b in self.bases if b.dim), None))

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        known = self.record.dim or next((b.dim for b in self.bases if b.dim), None)
        return known or self.inner.dim

    def _known(self, text: str) -> np.ndarray | None:
        row = self.record.rows.get(text)
        for base in self.bases:
            if row is not None:
                break
            row = base.rows.get(text)
        return row

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        rows = [self._known(t) for t in texts]
        todo = list(dict.fromkeys(t for t, r in zip(texts, rows) if r is None))
        if todo:
            fresh = self.inner.embed(todo)
            (self.record.add if self.write else self.record.keep)(todo, fresh)
            made = dict(zip(todo, fresh))
            rows = [r if r is not None else made[t] for t, r in zip(texts, rows)]
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack(rows).astype(np.float32, copy=False)

    def close(self) -> None:
        self.record.close()


def record_dim(folder: str | Path) -> int | None:
    """The dimension of the embeddings recorded in `folder`, if it holds any."""
    try:
        return int((Path(folder) / "dim").read_text())
    except (OSError, ValueError):
        return None


def _cut(path: Path, committed: int):
    """`path` opened for appending after its first `committed` bytes (the rest cut off)."""
    f = open(path, "r+b" if path.exists() else "w+b")
    f.truncate(committed)
    f.seek(committed)
    return f
