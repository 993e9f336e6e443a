"""Checkpoints: the state of a run at a simulated time, as JSON plus arrays (no pickle),
each writing only what changed since the one before.

    RUN_DIR/checkpoints/
      T/head.json           what `checkpoints()` lists: the time, the digest of the whole
                            state (`smallville.checkpoint.hashing`), how long the event log and
                            the answer record were at T,
                            where the state's root part is, and the memory streams' counts
      T/parts.jsonl         the parts of the state first written at T, one JSON a line
      T/accessed.npz        the memories' last-access times: every one, or those changed
                            since the last checkpoint that has every one
      T/memories.jsonl,     what the memory streams gained since the previous checkpoint,
      T/recorded.i64,       all agents' (`smallville.checkpoint.streams`); an embedding the
      T/embeddings.f32      run's record holds is referred to by its line there

The state (`Simulation.get_state()`) is stored as parts that refer to each other by
`[T, offset, length]` (bytes of `T/parts.jsonl`): the root part is the state with each
agent replaced by a reference to its record, and the objects by a dict's references; a
record is the agent's state with its plan, its random generator's words and its dicts
(relationships, talks, earlier lines, ...) replaced by references. A part that has not
changed since the previous checkpoint is not written again: the reference points where it
already is (`smallville.checkpoint.parts`). So a checkpoint is read by following references
at most three deep, however many came before it.

A checkpoint folder is written under a temporary name and renamed into place when whole,
so a crash during a save leaves the previous checkpoints intact; a checkpoint refers only
to earlier ones, which are never removed before it (`resume` removes later ones). `T` is
the simulated second, zero-padded (`000007200`). Schema 5 (every embedding whole in
`T/embeddings.f32`), schema 4 (the same, but the digest of the
whole state's JSON), schema 3 (also each agent's stream in `memory/ID/`,
`smallville.memory.storage`) and schema 2 (the whole state in `T/state.json`, every
last-access time in `T/accessed.npz`) are still read.
"""

from __future__ import annotations

import gc
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np

from smallville.checkpoint import streams
from smallville.checkpoint.hashing import digest
from smallville.checkpoint.head import Head
from smallville.checkpoint.parts import PARTS, Reader, Saved, Writer, folder_name, starts, text
from smallville.embed.record import RecordedEmbedder
from smallville.errors import RunError

__all__ = [
    "CHECKPOINT_SCHEMA",
    "Head",
    "checkpoints",
    "digest",
    "fault_point",
    "folder_name",
    "last_checkpoint",
    "load_state",
    "restore",
    "write_checkpoint",
]

CHECKPOINT_SCHEMA = 6
READABLE = (2, 3, 4, 5, 6)  # schemas `restore` reads
HEAD, ACCESSED, WHOLE_STATE = "head.json", "accessed.npz", "state.json"


def fault_point(stage: str, t: float) -> None:
    """Fault injection for the crash tests: SMALLVILLE_FAULT=kill-in-checkpoint:T."""
    if os.environ.get("SMALLVILLE_FAULT") == f"{stage}:{int(t)}":
        os.kill(os.getpid(), 9)


def _save_streams(sim, folder: Path, before: Saved | None) -> dict:
    """Write what every agent's memory stream gained since `before` into the checkpoint's
    `folder`, two files for all; the head's `memory`. Every `ANCHOR_EVERY` pieces, the piece
    is an anchor: what they gained since the last anchor. All of it if `before` holds no
    streams of its own (a fork's first checkpoint, or one after a schema 3 one)."""
    base, anchor = None, True
    if before is not None and before.rows is not None:
        if before.since_anchor + 1 < streams.ANCHOR_EVERY:
            base, anchor = (before.t, before.memories, before.rows), False
        else:
            base = before.anchor
    record = sim.embedder if isinstance(sim.embedder, RecordedEmbedder) else None
    if record is not None:
        record.sync()  # what the streams' pieces refer to is on disk first
    memory = streams.write(
        [agent.stream for agent in sim.agents.values()],
        folder,
        base and (base[0], [base[1][a] for a in sim.agents], [base[2][a] for a in sim.agents]),
        record,
    )
    return {**memory, "anchor": True} if anchor else memory


def _write_synced(path: Path, write) -> None:
    with open(path, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())


def _sync_folder(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(sim, run_dir: Path, files: dict[str, int]) -> Path:
    """Save the simulation's state now; `files` maps run files (events.jsonl, answers.jsonl)
    to their length in bytes at this moment. What the run's previous checkpoint (written or
    restored by `sim`) holds already is referred to, not written again.

    The garbage collector waits meanwhile: a checkpoint makes many short-lived containers and
    no cycles, and each collection they would set off scans the whole town's memory."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _write(sim, Path(run_dir), files)
    finally:
        if collecting:
            gc.enable()


def _write(sim, run_dir: Path, files: dict[str, int]) -> Path:
    root = run_dir / "checkpoints"
    t = sim.env.now
    final = root / folder_name(t)
    tmp = root / f".{folder_name(t)}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    before = sim.checkpointed if sim.checkpointed is not None and sim.checkpointed.usable(root, t) else None
    memory = _save_streams(sim, tmp, before)
    fault_point("kill-in-checkpoint", t)
    state = sim.get_state()
    with open(tmp / PARTS, "wb") as out:
        writer = Writer(root, t, out, before)
        agents = {a: writer.record(a, s) for a, s in state["agents"].items()}
        head = {
            "schema": CHECKPOINT_SCHEMA,
            "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M:%S"),
            "t": t,
            "digest": digest(state, agents=writer.digests()),
            "files": files,
            "root": writer.root(state, agents),
            "memory": memory,
        }
        out.flush()
        os.fsync(out.fileno())
    arrays, head["accessed"] = writer.accessed([sim.agents[a].stream.last_accessed() for a in state["agents"]])
    _write_synced(tmp / ACCESSED, lambda f: np.savez_compressed(f, **arrays))  # (times repeat: a sixth the size)
    _write_synced(tmp / HEAD, lambda f: f.write(text(head).encode("utf-8")))
    _sync_folder(tmp)  # its files' names, before the rename names it
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    _sync_folder(root)  # the rename, before a later checkpoint refers to it
    now = writer.now
    now.rows = dict(zip(sim.agents, memory["rows"]))
    if memory.get("anchor"):
        now.anchor, now.since_anchor = (t, dict(now.memories), dict(now.rows)), 0
    else:
        now.anchor, now.since_anchor = before.anchor, before.since_anchor + 1
    sim.checkpointed = now
    return final


# -- reading ----------------------------------------------------------------------------


def checkpoints(run_dir: Path, schema: tuple[int, ...] | None = READABLE) -> list[Head]:
    """The heads of the run's complete checkpoints of a schema in `schema` (None: any),
    oldest first (a half-written one is skipped). `load_state` gives a checkpoint's whole state."""
    return list(_heads(sorted((Path(run_dir) / "checkpoints").glob("[0-9]*")), schema))


def last_checkpoint(
    run_dir: Path, at: float = math.inf, schema: tuple[int, ...] | None = READABLE, accept=lambda head: True
) -> Head | None:
    """The head of the run's last complete checkpoint at or before `at` of a schema in
    `schema` that `accept` takes, reading heads from the newest back only as far as that."""
    folders = [f for f in (Path(run_dir) / "checkpoints").glob("[0-9]*") if f.name.isdigit() and int(f.name) <= at]
    return next((h for h in _heads(sorted(folders, reverse=True), schema) if h.t <= at and accept(h)), None)


def _heads(folders, schema: tuple[int, ...] | None):
    for folder in folders:
        try:
            name = (
                HEAD if (folder / HEAD).exists() else WHOLE_STATE
            )  # (schemas 1 and 2 keep head and state in one file)
            head = Head.of(json.loads((folder / name).read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            continue
        if schema is None or head.schema in schema:
            yield head


def _read(run_dir: Path, head: Head) -> tuple[dict, Saved | None]:
    """A checkpoint's whole state, and (schema 3) what it holds as parts."""
    if head.schema == 2:
        return head.state, None
    reader = Reader(Path(run_dir) / "checkpoints", head.t)
    try:
        state = reader.root(head.root)
    finally:
        reader.close()
    return state, reader.saved


def load_state(run_dir: Path, checkpoint: Head) -> dict:
    """The whole `Simulation.get_state()` a checkpoint (one of `checkpoints()`) holds."""
    return _read(run_dir, checkpoint)[0]


def _accessed(root: Path, head: Head, agents: list[str]) -> tuple[list[np.ndarray], tuple | None]:
    """Each agent's last-access times at a checkpoint, and the full ones a diff is against."""
    with np.load(root / folder_name(head.t) / ACCESSED, allow_pickle=False) as saved:
        if head.schema == 2:
            return [saved[a] for a in agents], None
        n, times, changed = saved["n"], saved["t"], saved["i"] if "i" in saved.files else None
    if changed is None:
        full = np.split(times, starts(n)[1:])
        return full, (head.t, full)
    base, _ = _accessed(root, Head(CHECKPOINT_SCHEMA, head.accessed, ""), agents)
    flat = np.empty(n.sum(), dtype=np.float64)
    for start, count, old in zip(starts(n), n, base):
        flat[start : start + min(count, len(old))] = old[:count]
    flat[changed] = times
    return np.split(flat, starts(n)[1:]), (head.accessed, base)


def restore(sim, run_dir: Path, checkpoint: Head) -> None:
    """Bring `sim` (new, not started) to the state of one of `run_dir`'s checkpoints: each
    memory stream as it was then, and every agent going on with what it was doing."""
    from smallville.memory import MemoryStream

    root = Path(run_dir) / "checkpoints"
    state, saved = _read(run_dir, checkpoint)
    times, full = _accessed(root, checkpoint, list(state["agents"]))
    agents = list(state["agents"])
    if checkpoint.schema >= 4:
        loaded = streams.read(MemoryStream, root, checkpoint, agents, times, sim.embedder)
        if checkpoint.memory["count"] != [s["memories"] for s in state["agents"].values()]:
            raise RunError(
                f"checkpoint {folder_name(checkpoint.t)} of {run_dir}: its memory streams' counts "
                f"differ from its state's"
            )
    else:  # (schemas 2 and 3 keep a stream per agent in memory/ID/)
        loaded = {
            a: MemoryStream.load(str(root / "memory" / a), sim.embedder, count=s["memories"], accessed=x)
            for (a, s), x in zip(state["agents"].items(), times)
        }
    sim.set_state(state, loaded)
    if saved is not None:
        saved.accessed = full
        if checkpoint.schema >= 4:
            saved.rows = dict(zip(agents, checkpoint.memory["rows"]))
            saved.anchor, saved.since_anchor = streams.anchor_of(root, checkpoint, agents)
    sim.checkpointed = saved
