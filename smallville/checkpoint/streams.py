"""The memory streams in a checkpoint (schema 4 and 5): each checkpoint writes, in its own folder,
what every stream gained since the checkpoint it goes on from, in two files for all agents.

    T/memories.jsonl   one line per agent, in the state's order: a JSON list of the memories
                       its stream gained since checkpoint `from`, each
                       [text, kind, created, importance, links, row]
    T/embeddings.f32   the distinct embeddings the streams gained, agent after agent, raw
                       little-endian float32 rows

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
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from smallville.checkpoint.head import Head
from smallville.checkpoint.parts import folder_name, text
from smallville.errors import RunError
from smallville.memory import storage

if TYPE_CHECKING:
    from smallville.embed import Embedder
    from smallville.memory import MemoryStream

MEMORIES, ROWS = "memories.jsonl", "embeddings.f32"
SETTINGS = ("dim", "weights", "decay", "embedder", "index")
ANCHOR_EVERY = 24
"""Pieces after which a checkpoint's piece goes on from the last anchor, not the last
checkpoint: a stream is read from at most one piece a day and 23 more, whatever the run's
length, for writing each memory twice."""


def write(streams: list[MemoryStream], folder: Path, base: tuple[float, list[int], list[int]] | None) -> dict:
    """Write what each of `streams` gained since `base` (T, counts and rows there; None: all)
    into `folder`, synced; the head's `memory`."""
    since, counts, rows = base if base is not None else (None, [0] * len(streams), [0] * len(streams))
    with open(folder / MEMORIES, "wb") as out:
        out.write("".join(text(s.records(c)) + "\n" for s, c in zip(streams, counts)).encode("utf-8"))
        out.flush()
        os.fsync(out.fileno())
    with open(folder / ROWS, "wb") as out:
        for s, u in zip(streams, rows):
            block = s.distinct_rows(u)
            if len(block):
                out.write(memoryview(np.ascontiguousarray(block, dtype="<f4")))
        out.flush()
        os.fsync(out.fileno())
    first = streams[0] if streams else None
    return {"from": since, "count": [len(s) for s in streams], "rows": [len(s.distinct_rows()) for s in streams],
            "dim": first.dim if first else 0, "weights": list(first.weights) if first else [],
            "decay": first.decay if first else 0.0, "embedder": first.embedder_name if first else None,
            "index": first.index_kind if first else "exact"}


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

    def __init__(self, folder: Path, head: Head, before: tuple[list[int], list[int]], k: int, dim: int) -> None:
        self.folder, self.memory, (self.counts, self.rows), self.k, self.dim = folder, head.memory, before, k, dim
        self._lines: list[bytes] | None = None
        self._at: np.ndarray | None = None

    def _open(self) -> None:
        m = self.memory
        lines = (self.folder / MEMORIES).read_bytes().split(b"\n")
        size, expected = (self.folder / ROWS).stat().st_size, (sum(m["rows"]) - sum(self.rows)) * self.dim * 4
        if len(lines) != self.k + 1 or len(m["count"]) != self.k or size != expected:
            raise RunError(f"a checkpoint's memory stream is damaged: {self.folder} holds memories for "
                           f"{len(lines) - 1} agents and {size // 4 // max(self.dim, 1)} rows, not what its head says")
        self._lines = lines
        gained = np.asarray(m["rows"], dtype=np.int64) - np.asarray(self.rows, dtype=np.int64)
        self._at = np.concatenate(([0], np.cumsum(gained)))     # where each agent's rows begin

    def of(self, i: int, agent: str) -> tuple[list, np.ndarray]:
        """Agent `i`'s memories and distinct embeddings gained in this piece."""
        if self._lines is None:
            self._open()
        m, counts = self.memory, self.counts
        new = json.loads(self._lines[i])
        if len(new) != m["count"][i] - counts[i]:
            raise RunError(f"a checkpoint's memory stream is damaged: {self.folder / MEMORIES} has {len(new)} "
                           f"memories for {agent}, expected {m['count'][i] - counts[i]}")
        at, n = int(self._at[i]), int(self._at[i + 1] - self._at[i])
        if not n:
            return new, np.zeros((0, self.dim), dtype=np.float32)
        with open(self.folder / ROWS, "rb") as f:
            block = os.pread(f.fileno(), n * self.dim * 4, at * self.dim * 4)
        return new, np.frombuffer(block, dtype="<f4").reshape(n, self.dim).astype(np.float32)


def read(cls: type[MemoryStream], root: Path, head: Head, agents: list[str], times: list[np.ndarray],
         embedder: Embedder | None) -> dict[str, Callable[[], MemoryStream]]:
    """Each agent's stream at `head` (schema 4 or 5), last accessed at `times`, as a function
    that reads it: a restore that looks at one agent reads one stream."""
    memory = head.memory
    dim, k = memory["dim"], len(agents)
    pieces, before = [], ([0] * k, [0] * k)
    for piece in _chain(root, head):
        pieces.append(_Piece(root / folder_name(piece.t), piece, before, k, dim))
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
