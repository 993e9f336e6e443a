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
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smallville.embed.later import TextCache

FOLDER, TEXTS, VECTORS = "embeddings", "texts.jsonl", "vectors.f32"  # RUN_DIR/FOLDER/TEXTS, ...


class EmbeddingRecord:
    """The texts and rows in one run folder's `embeddings/`, read when asked for: opening
    reads nothing, the first look-up reads the texts (not their rows: a text's line number
    is its row's), and a row is read when its text is first asked for. So a restore reads
    the rows it uses, however long the run."""

    def __init__(self, folder: str | Path, dim: int | None = None) -> None:
        self.folder = Path(folder)
        self.rows: dict[str, np.ndarray] = {}  # known in memory: read, computed or added
        self.dim = dim or record_dim(self.folder)
        self._where: dict[bytes, int] | None = None  # a text's JSON line -> its row on disk (read when first needed)
        self._texts_bytes = 0
        self._count = 0
        self._added: dict[str, int] = {}  # a text written since opening -> its line
        self._next = 0  # the line the next text written goes to
        self._files = None
        self._pid = os.getpid()  # a forked copy (run-ahead) never writes the run's files

    def get(self, text: str) -> np.ndarray | None:
        """The recorded embedding of `text`, if the record has one."""
        row = self.rows.get(text)
        if row is None:
            where = self._index()
            at = where.get(json.dumps(text, ensure_ascii=False).encode("utf-8")) if where else None
            if at is not None:
                row = self.rows[text] = np.fromfile(
                    self.folder / VECTORS, dtype="<f4", count=self.dim, offset=at * self.dim * 4
                )
        return row

    def _index(self) -> dict[bytes, int]:
        """Each recorded text's line (as `add` writes it) -> its row: the first one for a
        text written twice. Read once, with the length of what both files hold."""
        if self._where is None:
            self._where = {}
            texts_path, vectors_path = self.folder / TEXTS, self.folder / VECTORS
            if texts_path.exists() and vectors_path.exists() and self.dim:
                lines = texts_path.read_bytes().split(b"\n")[:-1]  # a torn last line is not read
                n = min(len(lines), vectors_path.stat().st_size // (4 * self.dim))
                self._texts_bytes = sum(map(len, lines[:n])) + n
                keys = [_canonical(line) if b"\\" in line else line for line in lines[:n]]
                self._where = dict(zip(reversed(keys), range(n - 1, -1, -1)))
                self._count = n
        return self._where

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
        out_vectors.write(vectors.tobytes())  # rows first: a text line never lacks its row
        out_vectors.flush()
        out_texts.write(data)
        out_texts.flush()
        for i, text in enumerate(texts):
            self._added.setdefault(text, self._next + i)
        self._next += len(texts)
        self.keep(texts, vectors)

    def line_of(self, text: str) -> int | None:
        """The line (and row) of the record that holds `text`'s embedding, if it has one."""
        line = self._added.get(text)
        if line is None:
            where = self._index()
            line = where.get(json.dumps(text, ensure_ascii=False).encode("utf-8")) if where else None
        return line

    def rows_at(self, lines: np.ndarray) -> np.ndarray:
        """The recorded rows at `lines`, read from the file (a restore's, which knows no texts)."""
        if not len(lines):
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        table = np.memmap(self.folder / VECTORS, dtype="<f4", mode="r").reshape(-1, self.dim)
        return np.asarray(table[np.asarray(lines, dtype=np.int64)], dtype=np.float32)

    def sync(self) -> None:
        """Put what was written on disk (a checkpoint that refers to it comes next)."""
        for f in self._files or ():
            f.flush()
            os.fsync(f.fileno())

    def _open(self, dim: int) -> None:
        """Open both files for appending, cut back to what the record holds."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.dim = self.dim or dim
        self._index()
        if not (self.folder / "dim").exists():
            (self.folder / "dim").write_text(str(self.dim))
        self._files = (
            _cut(self.folder / VECTORS, self._count * self.dim * 4),
            _cut(self.folder / TEXTS, self._texts_bytes),
        )
        self._next = self._count

    def close(self) -> None:
        for f in self._files or ():
            f.close()
        self._files = None


class RecordedEmbedder(TextCache):
    """An embedder that answers from a run's record first (and its parent's, `base`), asks
    `inner` only for texts the record lacks, and records those (with `write` off: keeps them
    in memory only). So it is a per-text cache too, in place of `CachedEmbedder`. Its `dim`
    comes from the record when it has one, so a remote embedder is not reached."""

    def __init__(self, inner, folder: str | Path, base: list[str | Path] = (), write: bool = True) -> None:
        self.write = write
        self.bases = [EmbeddingRecord(Path(b)) for b in base]
        self.record = EmbeddingRecord(folder, next((b.dim for b in self.bases if b.dim), None))
        super().__init__(inner, self.record.add if write else self.record.keep)  # recorded in the order asked

    @property
    def dim(self) -> int:
        known = self.record.dim or next((b.dim for b in self.bases if b.dim), None)
        return known or self.inner.dim

    def recorded(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Where the run's own record holds each text's embedding: its line (-1: not there),
        and the rows at those lines (zeros for -1). A checkpoint refers to these lines rather
        than write the embeddings again; what it refers to is put on disk first (`sync`)."""
        self.coming.take(wait=True)
        lines = np.full(len(texts), -1, dtype=np.int64)
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            line = self.record.line_of(text)
            if line is not None:
                lines[i], rows[i] = line, self.record.get(text)
        return lines, rows

    def sync(self) -> None:
        self.coming.take(wait=True)
        self.record.sync()

    def known(self, text: str) -> np.ndarray | None:
        row = self.record.get(text)
        for base in self.bases:
            if row is not None:
                break
            row = base.get(text)
        return row

    def close(self) -> None:
        super().close()
        self.record.close()


def _canonical(line: bytes) -> bytes:
    """A text's line as `add` writes it (a line with an escape may have been written with
    other escapes)."""
    return json.dumps(json.loads(line), ensure_ascii=False).encode("utf-8")


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
