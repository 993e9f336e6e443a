"""Checkpoints: the state of a run at a simulated time, as JSON plus arrays (no pickle).

    RUN_DIR/checkpoints/
      memory/ID/            each agent's memory stream, saved incrementally (append-only)
      T/state.json          clock, world, every agent's plans and doings, random states,
                            how many memories each stream held, and how long the event log
                            and the answer record were at T
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

CHECKPOINT_SCHEMA = 1


def fault_point(stage: str, t: float) -> None:
    """Fault injection for the crash tests: SMALLVILLE_FAULT=kill-in-checkpoint:T."""
    if os.environ.get("SMALLVILLE_FAULT") == f"{stage}:{int(t)}":
        os.kill(os.getpid(), 9)


def agent_state(agent) -> dict:
    """Everything the engine tracks about an agent besides its memory stream, as JSON."""
    rng = agent.rng.getstate()
    return {
        "plan": [[b.start, b.end, b.activity, b.where] for b in agent.plan],
        "plan_day": agent.plan_day,
        "block": [agent.block.start, agent.block.end, agent.block.activity, agent.block.where] if agent.block else None,
        "queue": [[a.start, a.end, a.description, a.object] for a in agent.queue],
        "activity": agent.activity, "status": agent.status, "free_to_talk": agent.free_to_talk,
        "since_reflection": agent.since_reflection,
        "relationships": dict(sorted(agent.relationships.items())), "talks": dict(sorted(agent.talks.items())),
        "last_talk": dict(sorted(agent.last_talk.items())),
        "earlier_lines": dict(sorted(agent.earlier_lines.items())),
        "seen": dict(sorted(agent.seen.items())), "knows": sorted(agent.knows),
        "reason": agent.reason, "alerts": list(agent.alerts),
        "memories": len(agent.stream),
        "rng": [rng[0], list(rng[1]), rng[2]],
    }


def sim_state(sim) -> dict:
    """The whole simulation's state at its current time, as JSON."""
    return {
        "t": sim.env.now,
        "seed": sim.seed,
        "counts": dict(sorted(sim.counts.items())),
        "requests": dict(sorted(sim.dispatch.requests.items())),
        "events": sim.log.count,
        "probe_start": sim.probe_start,
        "positions": {a: list(sim.world.position(a)) for a in sim.agents},
        "objects": [[t.area, t.name, t.state, t.user] for t in sim.world.things],
        "agents": {a.id: agent_state(a) for a in sim.agents.values()},
    }


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
    state = sim_state(sim)
    body = {"schema": CHECKPOINT_SCHEMA, "time": sim.now_datetime().strftime("%Y-%m-%d %H:%M:%S"),
            "digest": digest(state), "files": files, **state}
    np.savez(tmp / "accessed.npz", **{a.id: np.array([a.stream[i].last_accessed for i in range(len(a.stream))])
                                      for a in sim.agents.values()})
    with open(tmp / "state.json", "w", encoding="utf-8") as f:
        json.dump(body, f, ensure_ascii=False)
        f.flush()
        os.fsync(f.fileno())
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    return final


def checkpoints(run_dir: Path) -> list[dict]:
    """The run's complete checkpoints, oldest first (a half-written one is skipped)."""
    found = []
    for folder in sorted((run_dir / "checkpoints").glob("[0-9]*")):
        try:
            state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if state.get("schema") == CHECKPOINT_SCHEMA:
            found.append(state)
    return found


def strip(state: dict) -> dict:
    """The part of a checkpoint that the digest covers."""
    return {k: v for k, v in state.items() if k not in ("schema", "time", "digest", "files")}
