"""Runs: `RUNS_DIR/RUN_ID/` with `manifest.json`, an append-only `events.jsonl`, the records
of answers and embeddings, and checkpoints (docs/run-format.md). `Run` owns one; a `Session`
is one going on; the functions here are the ways to make one, go on with one and look
inside one.

Wall-clock times and the run id live in the manifest only, so the event log of a seeded
offline run is byte-identical from run to run.
"""

from __future__ import annotations

from pathlib import Path

from smallville.run.folder import seed_label, write_json_atomic
from smallville.run.fork import Fork
from smallville.run.launch import fork_run, resume_run, run_scenario
from smallville.run.manifest import Manifest
from smallville.run.options import RunOptions
from smallville.run.run import Run, StartPoint
from smallville.run.session import RunResult, Session

__all__ = [
    "Fork",
    "Manifest",
    "Run",
    "RunOptions",
    "RunResult",
    "Session",
    "StartPoint",
    "fork_run",
    "resume_run",
    "run_scenario",
    "seed_label",
    "simulate_to",
    "write_json_atomic",
]


def simulate_to(run_dir: str | Path, at: float | None = None, strict: bool = False):
    """The run's simulation at `at` seconds since its start (default: where it got to),
    rebuilt in memory from its nearest checkpoint: see `Run.state_at`. Close it when done
    (`with simulate_to(run) as sim:`)."""
    return Run.open(run_dir).state_at(at, strict)
