"""The memory streams in a checkpoint (schema 4 to 6): each checkpoint writes, in its own folder,
what every stream gained since the checkpoint it goes on from, in two files for all agents.

    T/memories.jsonl   one line per agent, in the state's order: a JSON list of the memories
                       its stream gained since checkpoint `from`, each
                       [text, kind, created, importance, links, row]
    T/recorded.i64     for each distinct embedding the streams gained, agent after agent,
                       the line of the run's record (`smallville.embed.record`) holding it, or -1
    T/embeddings.f32   those with -1 (schemas 4 and 5: every one), raw little-endian float32
                       rows; so an embedding is stored once in a run

and in `head.json` `memory`: `from` (the earlier checkpoint these extend, or null: they are
the streams whole), `count` and `rows` (each stream's memories and distinct embeddings at T,
in the state's order) and the streams' settings. A stream at T is the chain's pieces, oldest
first. The files are written and synced inside the checkpoint's unfinished folder, so they
are on disk before its rename makes the checkpoint count; a crash leaves no stream files to
repair (schema 3 kept a file set per agent beside the checkpoints, `smallville.memory.storage`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from smallville.checkpoint.head import Head
from smallville.checkpoint.parts import folder_name, text
from smallville.embed.record import FOLDER as EMBEDDINGS
from smallville.embed.record import EmbeddingRecord
from smallville.errors import RunError
from smallville.memory import storage
from smallville.memory.vectors import unit_rows

if TYPE_CHECKING:
    from smallville.embed import Embedder
    from smallville.embed.record import RecordedEmbedder
    from smallville.memory import MemoryStream

MEMORIES, ROWS, LINES = "memories.jsonl", "embeddings.f32", "recorded.i64"
SETTINGS = ("dim", "weights", "decay", "embedder", "index")
ANCHOR_EVERY = 24
"""Pieces after which a checkpoint's piece goes on from the last anchor, not the last
checkpoint: a stream is read from at most one piece a day and 23 more, whatever the run's
length, for writing each memory twice."""


def write(
    streams: list[MemoryStream],
    folder: Path,
    base: tuple[float, list[int], list[int]] | None,
    record: RecordedEmbedder | None = None,
) -> dict:
    """Write what each of `streams` gained since `base` (T, counts and rows there; None: all)
    into `folder`, synced; the head's `memory`. A distinct embedding that the run's `record`
    holds (made unit length, the very row) is written as its line there, else whole."""
    since, counts, rows = base if base is not None else (None, [0] * len(streams), [0] * len(streams))
    records = [s.records(c) for s, c in zip(streams, counts)]
    with open(folder / MEMORIES, "wb") as out:
        out.write("".join(text(r) + "\n" for r in records).encode("utf-8"))
        out.flush()
        os.fsync(out.fileno())
    lines = []
    with open(folder / ROWS, "wb") as out:
        for s, u, gained in zip(streams, rows, records):
            block = s.distinct_rows(u)
            at = _recorded(block, u, gained, record)
            lines.append(at)
            whole = block[at < 0]
            if len(whole):
                out.write(memoryview(np.ascontiguousarray(whole, dtype="<f4")))
        out.flush()
        os.fsync(out.fileno())
    with open(folder / LINES, "wb") as out:
        out.write(np.concatenate(lines or [np.zeros(0, dtype="<i8")]).astype("<i8").tobytes())
        out.flush()
        os.fsync(out.fileno())
    first = streams[0] if streams else None
    return {
        "from": since,
        "count": [len(s) for s in streams],
        "rows": [len(s.distinct_rows()) for s in streams],
        "dim": first.dim if first else 0,
        "weights": list(first.weights) if first else [],
        "decay": first.decay if first else 0.0,
        "embedder": first.embedder_name if first else None,
        "index": first.index_kind if first else "exact",
    }


def _recorded(block: np.ndarray, u: int, gained: list, record: RecordedEmbedder | None) -> np.ndarray:
    """For each of a stream's new distinct rows `block` (its rows from `u` on), the line of
    `record` whose row, made unit length, is that row bit for bit; -1 where there is none."""
    if record is None or not len(block):
        return np.full(len(block), -1, dtype=np.int64)
    first: dict[int, str] = {}  # each new row's text: the first memory using it
    for memory in gained:
        if memory[5] >= u:
            first.setdefault(memory[5], memory[0])
    texts = [first.get(u + j, "") for j in range(len(block))]
    lines, raw = record.recorded(texts)
    found = np.flatnonzero(lines >= 0)
    stored = np.ascontiguousarray(block[found], dtype=np.float32)
    with np.errstate(all="ignore"):  # (a zero row is no match)
        same = (unit_rows(raw[found]).view(np.uint32) == stored.view(np.uint32)).all(axis=1)
    out = np.full(len(block), -1, dtype=np.int64)
    out[found[same]] = lines[found[same]]
    return out


def anchor_of(root: Path, head: Head, agents: list[str]) -> tuple[tuple[float, dict, dict], int]:
    """The anchor of the streams at `head` (T, each agent's count and rows there: the last
    piece of its chain that is an anchor or whole), and how many pieces came after it."""
    chain = _chain(root, head)
    at = max(i for i, h in enumerate(chain) if h.memory.get("anchor") or h.memory["from"] is None)
    m = chain[at].memory
    return (chain[at].t, dict(zip(agents, m["count"])), dict(zip(agents, m["rows"]))), len(chain) - 1 - at


def _chain(root: Path, head: Head) -> list[Head]:
    """The heads whose pieces make the streams at `head`, oldest first."""
    chain = [head]
    while chain[-1].memory["from"] is not None:
        path = root / folder_name(chain[-1].memory["from"]) / "head.json"
        chain.append(Head.of(json.loads(path.read_text(encoding="utf-8"))))
    return chain[::-1]


class _Piece:
    """One checkpoint's memory files, opened when an agent's stream first needs them: the
    memories' lines, read whole, and of the embeddings only the agent's rows."""

    def __init__(
        self, folder: Path, head: Head, before: tuple[list[int], list[int]], k: int, dim: int, record: EmbeddingRecord
    ) -> None:
        self.folder, self.memory, (self.counts, self.rows), self.k, self.dim = folder, head.memory, before, k, dim
        self.record = record if (head.schema or 0) >= 6 else None  # (older pieces hold every row whole)
        self._lines: list[bytes] | None = None
        self._at: np.ndarray | None = None
        self._recorded: np.ndarray | None = None  # each new row's line of the record, or -1
        self._whole_at: np.ndarray | None = None  # where each agent's whole rows begin

    def _open(self) -> None:
        m = self.memory
        lines = (self.folder / MEMORIES).read_bytes().split(b"\n")
        gained = np.asarray(m["rows"], dtype=np.int64) - np.asarray(self.rows, dtype=np.int64)
        self._at = np.concatenate(([0], np.cumsum(gained)))  # where each agent's rows begin
        recorded = np.full(int(self._at[-1]), -1, dtype=np.int64)
        if self.record is not None and (self.folder / LINES).stat().st_size == 8 * len(recorded):
            recorded = np.fromfile(self.folder / LINES, dtype="<i8")
        elif self.record is not None:
            recorded = None
        size = (self.folder / ROWS).stat().st_size
        expected = -1 if recorded is None else int((recorded < 0).sum()) * self.dim * 4
        if len(lines) != self.k + 1 or len(m["count"]) != self.k or size != expected:
            raise RunError(
                f"a checkpoint's memory stream is damaged: {self.folder} holds memories for "
                f"{len(lines) - 1} agents and {size // 4 // max(self.dim, 1)} rows, not what its head says"
            )
        self._lines, self._recorded = lines, recorded
        self._whole_at = np.concatenate(([0], np.cumsum(recorded < 0)))[self._at]

    def of(self, i: int, agent: str) -> tuple[list, np.ndarray]:
        """Agent `i`'s memories and distinct embeddings gained in this piece."""
        if self._lines is None:
            self._open()
        m, counts = self.memory, self.counts
        new = json.loads(self._lines[i])
        if len(new) != m["count"][i] - counts[i]:
            raise RunError(
                f"a checkpoint's memory stream is damaged: {self.folder / MEMORIES} has {len(new)} "
                f"memories for {agent}, expected {m['count'][i] - counts[i]}"
            )
        at, n = int(self._at[i]), int(self._at[i + 1] - self._at[i])
        rows = np.empty((n, self.dim), dtype=np.float32)
        lines = self._recorded[at : at + n]
        whole = lines < 0
        if whole.any():
            count, start = int(whole.sum()), int(self._whole_at[i])
            with open(self.folder / ROWS, "rb") as f:
                block = os.pread(f.fileno(), count * self.dim * 4, start * self.dim * 4)
            rows[whole] = np.frombuffer(block, dtype="<f4").reshape(count, self.dim)
        if not whole.all():
            rows[~whole] = unit_rows(self.record.rows_at(lines[~whole]))
        return new, rows


def read(
    cls: type[MemoryStream],
    root: Path,
    head: Head,
    agents: list[str],
    times: list[np.ndarray],
    embedder: Embedder | None,
) -> dict[str, Callable[[], MemoryStream]]:
    """Each agent's stream at `head` (schema 4 to 6), last accessed at `times`, as a function
    that reads it: a restore that looks at one agent reads one stream."""
    memory = head.memory
    dim, k = memory["dim"], len(agents)
    pieces, before = [], ([0] * k, [0] * k)
    record = EmbeddingRecord(root.parent / EMBEDDINGS, dim)
    for piece in _chain(root, head):
        pieces.append(_Piece(root / folder_name(piece.t), piece, before, k, dim, record))
        before = (piece.memory["count"], piece.memory["rows"])
    settings = {key: memory[key] for key in SETTINGS}

    def load(i: int) -> MemoryStream:
        records, blocks = [], []
        for piece in pieces:
            new, block = piece.of(i, agents[i])
            records += new
            blocks.append(block)
        rows = np.concatenate(blocks) if blocks else np.zeros((0, dim), dtype=np.float32)
        return storage.build(cls, settings, embedder, records, rows, times[i])

    return {a: partial(load, i) for i, a in enumerate(agents)}
