"""A memory stream on disk: memories.json beside embeddings.npy, no pickle.

The embeddings are written first, then the JSON, each to a temporary name and moved into
place with os.replace. Since a stream only grows, a crash between the two leaves a JSON
whose `count` rows are a prefix of the new embeddings.npy: `load` reads only those rows,
so the pair on disk is always a consistent (possibly older) stream.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

import numpy as np

from smallville.errors import RunError

if TYPE_CHECKING:
    from smallville.embed import Embedder
    from smallville.memory.stream import MemoryStream

SCHEMA = 1
JSON_NAME = "memories.json"
NPY_NAME = "embeddings.npy"


def save(stream: MemoryStream, path: str) -> None:
    """Write `stream` into directory `path`, creating it if missing."""
    os.makedirs(path, exist_ok=True)
    n = len(stream)
    state = {
        "schema": SCHEMA,
        "dim": stream.dim,
        "weights": list(stream.weights),
        "decay": stream.decay,
        "embedder": stream.embedder_name,
        "count": n,
        "memories": [m.to_dict() for m in stream],
    }
    _replace(os.path.join(path, NPY_NAME),
             lambda f: np.save(f, np.ascontiguousarray(stream._vectors[:n]),
                               allow_pickle=False))
    data = json.dumps(state, ensure_ascii=False, indent=1).encode("utf-8")
    _replace(os.path.join(path, JSON_NAME), lambda f: f.write(data))


def _replace(target: str, write) -> None:
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def load(cls: type[MemoryStream], path: str, embedder: Embedder | None) -> MemoryStream:
    """The stream saved in directory `path` by `save`."""
    try:
        with open(os.path.join(path, JSON_NAME), encoding="utf-8") as f:
            state = json.load(f)
        vectors = np.load(os.path.join(path, NPY_NAME), allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot read memory stream in {path}: {exc}") from exc
    if not isinstance(state, dict) or state.get("schema") != SCHEMA:
        found = state.get("schema") if isinstance(state, dict) else None
        raise RunError(f"memory stream in {path} has schema {found!r}, expected {SCHEMA}")
    try:
        return _rebuild(cls, state, vectors, embedder)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(f"memory stream in {path} is damaged: {exc!r}") from exc


def _rebuild(cls: type[MemoryStream], state: dict, vectors: np.ndarray,
             embedder: Embedder | None) -> MemoryStream:
    n, dim, memories = state["count"], state["dim"], state["memories"]
    if len(memories) != n or [m["id"] for m in memories] != list(range(n)):
        raise ValueError(f"expected ids 0..{n - 1} in order")
    if vectors.ndim != 2 or vectors.shape[1] != dim or len(vectors) < n:
        raise ValueError(f"{NPY_NAME} has shape {vectors.shape}, expected at least ({n}, {dim})")
    saved = state.get("embedder")
    if embedder is not None and saved is not None and embedder.name != saved:
        raise ValueError(f"it was embedded with {saved!r}, not {embedder.name!r}")
    stream = cls(dim=dim, weights=state["weights"], decay=state["decay"], embedder=embedder)
    for m in memories:
        stream.add(m["text"], vectors[m["id"]], importance=m["importance"],
                   created=m["created"], kind=m["kind"], links=m["links"])
    stream._vectors[:n] = vectors[:n]  # exactly as saved, not re-normalised
    stream.index.reset()
    stream.index.add(np.ascontiguousarray(vectors[:n], dtype=np.float32))
    stream._accessed[:n] = [float(m["last_accessed"]) for m in memories]
    stream.embedder_name = saved if saved is not None else stream.embedder_name
    return stream
