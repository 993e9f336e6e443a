"""A run on disk: `RUNS_DIR/RUN_ID/` with `manifest.json` and an append-only `events.jsonl`.

Wall-clock times and the run id live in the manifest only, so the event log of a seeded
offline run is byte-identical from run to run.
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from smallville import __version__
from smallville.errors import BrainError
from smallville.timefmt import format_sim

MANIFEST_SCHEMA = 1


def write_json_atomic(path: Path, data: dict) -> None:
    """Write JSON beside the target and rename it into place: never a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def new_run_dir(runs_dir: Path, stem: str, seed: int) -> Path:
    """A fresh, unique run folder named after the scenario, seed and wall-clock time."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-seed{seed}-{datetime.now():%Y%m%d-%H%M%S}"
    path, n = runs_dir / base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = runs_dir / f"{base}-{n}"


@dataclass
class RunResult:
    path: Path
    manifest: dict
    simulation: object


def run_scenario(scenario, *, runs_dir: Path | str = "runs", seed: int | None = None,
                 duration: float | None = None, brain: str = "offline", embedder: str = "use",
                 embedder_api_base: str | None = None,
                 on_start: Callable | None = None, on_step: Callable[[float], None] | None = None) -> RunResult:
    """Simulate a loaded scenario and log it to a new run directory.

    Ctrl-C (KeyboardInterrupt) ends the run with status `interrupted`, keeping what was
    written; any other exception marks it `failed` and propagates."""
    from smallville.brain import make_brain
    from smallville.embed import make_embedder
    from smallville.sim import Simulation
    from smallville.sim.log import EventLog

    seed = scenario.seed if seed is None else seed
    duration = scenario.duration if duration is None else duration
    the_brain = make_brain(brain, seed)
    try:
        the_embedder = make_embedder(embedder, api_base=embedder_api_base)
    except ValueError as exc:
        raise BrainError(str(exc)) from None
    dim = the_embedder.dim                  # a remote embedder is reached here, before any file is written
    path = new_run_dir(Path(runs_dir), Path(scenario.path).stem, seed)
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "run_id": path.name,
        "status": "running",
        "scenario": {"path": str(scenario.path), "name": scenario.name, "sha256": scenario.sha256},
        "seed": seed,
        "brain": the_brain.describe(),
        "embedder": {"name": the_embedder.name, "dim": dim},
        "agents": sorted(a.id for a in scenario.agents),
        "sim_start": format_sim(scenario.start, 0),
        "sim_end": format_sim(scenario.start, duration),
        "duration_s": duration,
        "smallville_version": __version__,
        "python": platform.python_version(),
        "wall": {"started": datetime.now().isoformat(timespec="seconds")},
    }
    write_json_atomic(path / "manifest.json", manifest)
    began = time.perf_counter()
    with open(path / "events.jsonl", "a", encoding="utf-8") as out:
        sim = Simulation(scenario, the_brain, the_embedder, seed=seed, log=EventLog(scenario.start, out))
        manifest["config"] = sim.config.to_dict()
        if on_start:
            on_start(sim, path)
        try:
            sim.run(duration, on_step=on_step)
            manifest["status"] = "completed"
        except KeyboardInterrupt:
            manifest["status"] = "interrupted"
        except BaseException as exc:
            manifest["status"] = "failed"
            manifest["error"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            sim.log.flush()
            manifest.update(_final(sim))
            manifest["wall"].update(finished=datetime.now().isoformat(timespec="seconds"),
                                    seconds=round(time.perf_counter() - began, 3))
            write_json_atomic(path / "manifest.json", manifest)
    return RunResult(path, manifest, sim)


def _final(sim) -> dict:
    counts = {k: sim.counts.get(k, 0) for k in ("memories", "reflections", "conversations", "actions", "replans")}
    counts["events"] = sim.log.count
    end = sim.probe_knowers()
    return {
        "sim_reached": format_sim(sim.scenario.start, sim.env.now),
        "counts": counts,
        "probes": {name: {"start": sim.probe_start.get(name, []), "end": end[name]} for name in end},
        "requests": dict(sorted(sim.dispatch.requests.items())),
    }
