"""Checkpoints: the state of a run at a simulated time, as JSON plus arrays (no pickle).

    RUN_DIR/checkpoints/
      memory/ID/            each agent's memory stream, saved incrementally (append-only)
      T/state.json          `Simulation.get_state()` (the clock, the world, every agent's
                            plans and what it is in the middle of, conversations, random
                            states, how many memories each stream held) and how long the
                            event log and the answer record were at T
      T/accessed.npz        each stream's last-access times at T

A checkpoint folder is written under a temporary name and renamed into place when whole,
so a crash during a save leaves the previous checkpoints intact. `T` is the simulated
second, zero-padded (`000007200`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np

CHECKPOINT_SCHEMA = 2


def fault_point(stage: str, t: float) -> None:
    """Fault injection for the crash tests: SMALLVILLE_FAULT=kill-in-checkpoint:T."""
    if os.environ.get("SMALLVILLE_FAULT") == f"{stage}:{int(t)}":
        os.kill(os.getpid(), 9)


def digest(state: dict) -> str:
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()


def folder_name(t: float) -> str:
    return f"{int(t):09d}"


def write_checkpoint(sim, run_dir: Path, files: dict[str, int]) -> Path:
    """Save the simulation's state now; `files` maps run files (events.jsonl, answers.jsonl)
    to their length in bytes at this moment."""
    root = run_dir / "checkpoints"
    t = sim.env.now
    final = root / folder_name(t)
    tmp = root / f".{folder_name(t)}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for agent in sim.agents.values():
        agent.stream.save(str(root / "memory" / agent.id))
    fault_point("kill-in-checkpoint", t)
    state = sim.get_state()
    body = {"schema": CHECKPOINT_SCHEMA, "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M:%S"), "t": t,
            "digest": digest(state), "files": files, "state": state}
    np.savez(tmp / "accessed.npz", **{a.id: np.array([a.stream[i].last_accessed for i in range(len(a.stream))])
                                      for a in sim.agents.values()})
    with open(tmp / "state.json", "w", encoding="utf-8") as f:
        json.dump(body, f, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def checkpoints(run_dir: Path, schema: int | None = CHECKPOINT_SCHEMA) -> list[dict]:
    """The run's complete checkpoints of `schema` (None: any), oldest first (a half-written
    one is skipped)."""
    found = []
    for folder in sorted((run_dir / "checkpoints").glob("[0-9]*")):
        try:
            state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if schema is None or state.get("schema") == schema:
            found.append(state)
    return found


def restore(sim, run_dir: Path, checkpoint: dict) -> None:
    """Bring `sim` (new, not started) to the state of one of `run_dir`'s checkpoints: each
    memory stream as it was then, and every agent going on with what it was doing."""
    from smallville.memory import MemoryStream

    root = Path(run_dir) / "checkpoints"
    state = checkpoint["state"]
    with np.load(root / folder_name(checkpoint["t"]) / "accessed.npz", allow_pickle=False) as accessed:
        streams = {a: MemoryStream.load(str(root / "memory" / a), sim.embedder, count=s["memories"],
                                        accessed=accessed[a]) for a, s in state["agents"].items()}
    sim.set_state(state, streams)
