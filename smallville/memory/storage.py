"""A memory stream on disk (schema 2), written incrementally, no pickle.

    manifest.json    schema, settings, and how much of each file is committed
    embeddings.f32   the distinct embeddings, raw little-endian float32 rows, append-only
    memories.jsonl   one JSON object per memory (text, kind, times, rating, links, row),
                     append-only
    accessed.npy     every memory's last access time (the only state that changes in
                     place), replaced atomically

Saving again to the directory a stream was saved to (or loaded from) appends only the new
rows and records, rewrites accessed.npy, and commits by replacing manifest.json last. A
crash at any point leaves the previous manifest, whose counts name a prefix of the
append-only files; `load` reads only that prefix, so bytes written after it (a torn last
line included) are ignored, and the next save cuts them off before appending. Schema 1
(memories.json beside embeddings.npy) still loads.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import TYPE_CHECKING

import numpy as np

from smallville.errors import RunError

if TYPE_CHECKING:
    from smallville.embed import Embedder
    from smallville.memory.stream import MemoryStream

SCHEMA = 2
MANIFEST = "manifest.json"
ROWS = "embeddings.f32"
RECORDS = "memories.jsonl"
ACCESSED = "accessed.npy"
V1_JSON, V1_NPY = "memories.json", "embeddings.npy"


def save(stream: MemoryStream, path: str) -> None:
    """Write `stream` into directory `path`, creating it if missing."""
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    done = stream.on_disk if _still_there(stream.on_disk, path) else None
    if done is None:  # a fresh write: first withdraw any older stream's claim
        _remove(os.path.join(path, MANIFEST))
        done = {"token": uuid.uuid4().hex, "count": 0, "rows": 0, "records_bytes": 0}
    n, u = len(stream), len(stream.columns.table)
    rows = np.ascontiguousarray(stream.columns.table.matrix()[done["rows"] : u], dtype="<f4")
    _append(os.path.join(path, ROWS), done["rows"] * stream.dim * 4, memoryview(rows))
    records = "".join(_record(stream, i) for i in range(done["count"], n)).encode("utf-8")
    _append(os.path.join(path, RECORDS), done["records_bytes"], records)
    _replace(os.path.join(path, ACCESSED), lambda f: np.save(f, stream.columns.accessed[:n], allow_pickle=False))
    state = {
        "schema": SCHEMA,
        "token": done["token"],
        "dim": stream.dim,
        "weights": list(stream.weights),
        "decay": stream.decay,
        "embedder": stream.embedder_name,
        "index": stream.index_kind,
        "count": n,
        "rows": u,
        "records_bytes": done["records_bytes"] + len(records),
    }
    data = json.dumps(state, indent=1).encode("utf-8")
    _replace(os.path.join(path, MANIFEST), lambda f: f.write(data))
    stream.on_disk = {**state, "path": os.path.realpath(path)}


def _record(stream: MemoryStream, i: int) -> str:
    c = stream.columns
    return (
        json.dumps(
            {
                "id": i,
                "text": c.texts[i],
                "kind": c.kinds[i],
                "created": float(c.created[i]),
                "importance": int(c.importance[i]),
                "links": list(c.links[i]),
                "row": int(c.rows[i]),
            },
            ensure_ascii=False,
        )
        + "\n"
    )


def _still_there(disk: dict | None, path: str) -> bool:
    """Whether `path` still holds exactly what this stream last wrote or read there."""
    if disk is None or disk["path"] != os.path.realpath(path):
        return False
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError):
        return False
    return all(state.get(key) == disk[key] for key in ("schema", "token", "count", "rows", "records_bytes"))


def _append(target: str, committed: int, data: memoryview | bytes) -> None:
    """Cut `target` to its `committed` bytes (dropping a crashed save's tail), then append."""
    with open(target, "r+b" if committed else "wb") as f:
        f.truncate(committed)
        f.seek(committed)
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _replace(target: str, write) -> None:
    tmp = f"{target}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def _remove(target: str) -> None:
    try:
        os.remove(target)
    except FileNotFoundError:
        pass


# -- loading ----------------------------------------------------------------------------


def load(
    cls: type[MemoryStream],
    path: str,
    embedder: Embedder | None,
    *,
    count: int | None = None,
    accessed: np.ndarray | None = None,
) -> MemoryStream:
    """The stream saved in directory `path` by `save` (schema 2, or an older schema 1).
    With `count` (schema 2), only its first `count` memories, last accessed at `accessed`."""
    path = os.fspath(path)
    v1 = not os.path.exists(os.path.join(path, MANIFEST))
    name = V1_JSON if v1 else MANIFEST
    try:
        with open(os.path.join(path, name), encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot read memory stream in {path}: {exc}") from exc
    found = state.get("schema") if isinstance(state, dict) else None
    if found not in (1, SCHEMA) or (found == 1) != v1:
        raise RunError(
            f"memory stream in {path} has schema {found!r}, expected {SCHEMA} "
            f"(or 1, in {V1_JSON}); it was written by another version of "
            f"smallville"
        )
    try:
        if count is not None and not v1:
            stream = _load_v2(cls, path, state, embedder, count, accessed)
        else:
            stream = (_load_v1 if v1 else _load_v2)(cls, path, state, embedder)
    except OSError as exc:
        raise RunError(f"cannot read memory stream in {path}: {exc}") from exc
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunError(f"memory stream in {path} is damaged: {exc!r}") from exc
    return stream


def _new_stream(cls, state: dict, embedder: Embedder | None, index: str) -> MemoryStream:
    saved = state.get("embedder")
    if embedder is not None and saved is not None and embedder.name != saved:
        raise ValueError(f"it was embedded with {saved!r}, not {embedder.name!r}")
    stream = cls(dim=state["dim"], weights=state["weights"], decay=state["decay"], embedder=embedder, index=index)
    stream.embedder_name = saved if saved is not None else stream.embedder_name
    return stream


def _load_v2(
    cls, path: str, state: dict, embedder: Embedder | None, count: int | None = None, accessed: np.ndarray | None = None
) -> MemoryStream:
    n, u, dim = state["count"], state["rows"], state["dim"]
    if count is not None and count > n:
        raise ValueError(f"it holds {n} memories, not the {count} asked for")
    stream = _new_stream(cls, state, embedder, state.get("index", "exact"))
    with open(os.path.join(path, RECORDS), "rb") as f:
        data = f.read(state["records_bytes"])
    lines = data.split(b"\n")[:-1]  # bytes past the manifest's count are not read
    if len(lines) != n or len(data) != state["records_bytes"]:
        raise ValueError(f"{RECORDS} holds {len(lines)} complete records, expected {n}")
    if count is not None and count < n:  # a prefix: rows are added as first used, so theirs are a prefix too
        lines = lines[:count]
        n = count
    records = json.loads(b"[" + b",".join(lines) + b"]") if n else []
    if count is not None and n < state["count"]:
        u = max((r["row"] for r in records), default=-1) + 1
    rows = np.fromfile(os.path.join(path, ROWS), dtype="<f4", count=u * dim)
    if len(rows) != u * dim:
        raise ValueError(f"{ROWS} holds {len(rows) // dim} rows, expected {u}")
    if accessed is None:
        accessed = np.load(os.path.join(path, ACCESSED), allow_pickle=False)
    if accessed.shape[0] < n:
        raise ValueError(f"{ACCESSED} has {accessed.shape[0]} times, expected {n}")
    if [r["id"] for r in records] != list(range(n)):
        raise ValueError(f"expected ids 0..{n - 1} in order")
    stream.columns.table.extend(rows.reshape(u, dim))
    stream.append_loaded(records, np.asarray(accessed[:n], dtype=np.float64))
    if n == state["count"]:  # saving again appends; a prefix is written afresh
        stream.on_disk = {**state, "path": os.path.realpath(path)}
    return stream


def build(
    cls, settings: dict, embedder: Embedder | None, memories: list, rows: np.ndarray, accessed: np.ndarray
) -> MemoryStream:
    """A stream of `settings` (dim, weights, decay, embedder, index) holding `memories`, each
    `[text, kind, created, importance, links, row]`, over the distinct embeddings `rows`,
    last accessed at `accessed` (a checkpoint's streams: `smallville.checkpoint.streams`)."""
    try:
        stream = _new_stream(cls, settings, embedder, settings.get("index", "exact"))
        if len(accessed) != len(memories) or len(rows) and rows.shape[1] != stream.dim:
            raise ValueError(
                f"{len(memories)} memories with {len(accessed)} access times and rows of shape {rows.shape}"
            )
        records = [
            {"text": m[0], "kind": m[1], "created": m[2], "importance": m[3], "links": m[4], "row": m[5]}
            for m in memories
        ]
        stream.columns.table.extend(rows)
        stream.append_loaded(records, np.asarray(accessed, dtype=np.float64))
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise RunError(f"a checkpoint's memory stream is damaged: {exc!r}") from exc
    return stream


def _load_v1(cls, path: str, state: dict, embedder: Embedder | None) -> MemoryStream:
    """Schema 1: memories.json (every field) beside embeddings.npy (one row a memory)."""
    n, dim, memories = state["count"], state["dim"], state["memories"]
    if len(memories) != n or [m["id"] for m in memories] != list(range(n)):
        raise ValueError(f"expected ids 0..{n - 1} in order")
    vectors = np.load(os.path.join(path, V1_NPY), allow_pickle=False)
    if vectors.ndim != 2 or vectors.shape[1] != dim or len(vectors) < n:
        raise ValueError(f"{V1_NPY} has shape {vectors.shape}, expected at least ({n}, {dim})")
    stream = _new_stream(cls, state, embedder, "exact")
    table = stream.columns.table
    for m in memories:
        m["row"] = table.add(np.ascontiguousarray(vectors[m["id"]], dtype=np.float32))
    accessed = np.array([float(m["last_accessed"]) for m in memories], dtype=np.float64)
    stream.append_loaded(memories, accessed)
    return stream
