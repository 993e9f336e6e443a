"""Going on with a run: resume one that stopped (or extend one that ended), or fork one
at a time into a new run that can change history.

Both rebuild the state at their starting time by re-simulating the run from its start:
with the offline brain the simulation is deterministic, and with a model the answers come
from the run's own record (`answers.jsonl`), so no model is asked twice. A resumed run is
checked against its last checkpoint before it writes anything, and ends exactly as a run
that was never interrupted.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from smallville.errors import RunError, UsageError
from smallville.runner import (RunResult, _embedder_spec, _Sink, apply_fork, execute,
                               keep_scenario, new_run_dir, write_json_atomic)
from smallville.timefmt import format_sim


def _load(run_dir: Path) -> tuple[dict, object]:
    from smallville.replay.record import read_manifest
    from smallville.scenario import load_scenario

    manifest = read_manifest(run_dir)
    copies = sorted((run_dir / "scenario").glob("*.yaml"))
    if not copies:
        raise RunError(f"{run_dir} keeps no copy of its scenario (it was written by an older smallville)")
    return manifest, load_scenario(str(copies[0]))


def _brain(manifest: dict, record_dir: Path | None, budget: dict | None = None, spent: dict | None = None):
    """The run's brain again: the offline brain, or its record with the live model behind it.
    `budget` holds new limits, counted on top of `spent` (the run's spend so far)."""
    from smallville.brain import make_brain
    from smallville.brain.config import LLMConfig
    from smallville.brain.record import Replaying
    from smallville.brain.ledger import Ledger

    settings = manifest.get("brain", {})
    if settings.get("name", settings.get("model")) == "offline":
        return make_brain("offline", manifest["seed"]), None
    from smallville.brain.budget import Spend

    known = set(LLMConfig.__dataclass_fields__)
    ledger = Ledger()
    config = LLMConfig().merged({k: v for k, v in settings.items() if k in known}, "the run's manifest")
    before = Spend.from_dict(spent)
    more = {k: v for k, v in (budget or {}).items() if v is not None}
    if more:                        # MORE on top of what the run has spent
        config = replace(config, budget={**config.budget,
                                         **{k: getattr(before, k) + v for k, v in more.items()}})
        settings["budget"] = config.budget          # the manifest keeps the limits for the next resume
    live = make_brain(config, manifest["seed"], ledger=ledger, spent_before=before)
    return (Replaying(record_dir, fallthrough=live) if record_dir else live), ledger


def _embedder(manifest: dict):
    from smallville.embed import make_embedder

    return make_embedder(_embedder_spec(manifest) or "use")


def _truncate(path: Path, size: int) -> tuple[int, int]:
    """Cut a log back to `size` bytes: (whole lines cut, torn lines cut, 0 or 1)."""
    if not path.exists():
        return 0, 0
    with open(path, "r+b") as f:
        f.seek(size)
        tail = f.read()
        f.truncate(size)
    return tail.count(b"\n"), int(bool(tail) and not tail.endswith(b"\n"))


def resume_run(run_dir: str | Path, *, extend: float | None = None, on_start=None, on_step=None,
               checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """Continue a run from its last checkpoint to its end (or `extend` seconds past it).
    `budget` ({"usd", "requests", "tokens"}) allows that much more spending than the run
    has spent so far (a run stopped by its budget goes on with more)."""
    from smallville.checkpoint import checkpoints

    run_dir = Path(run_dir)
    manifest, scenario = _load(run_dir)
    if manifest.get("status") == "completed" and not extend:
        raise UsageError(f"{run_dir} has completed; to go on, give how much longer: smallville resume {run_dir} --for 1d")
    sizes = {name: (run_dir / name).stat().st_size if (run_dir / name).exists() else 0
             for name in ("events.jsonl", "answers.jsonl")}
    usable = [c for c in checkpoints(run_dir) if all(c["files"].get(n, 0) <= sizes[n] for n in sizes)]
    last = usable[-1] if usable else None       # one whose files reach past a lost tail is no good
    start = last["t"] if last else 0.0
    files = last["files"] if last else {}
    events, torn_event = _truncate(run_dir / "events.jsonl", files.get("events.jsonl", 0))
    answers, torn_answer = _truncate(run_dir / "answers.jsonl", files.get("answers.jsonl", 0))
    for folder in (run_dir / "checkpoints").glob("*"):
        if folder.name == "memory" or folder.name.startswith(".") or float(folder.name) > start:
            shutil.rmtree(folder)
    brain, ledger = _brain(manifest, run_dir, budget, manifest.get("spend"))
    until = manifest["duration_s"] + (extend or 0.0)
    manifest.pop("budget_stop", None)
    manifest.update(status="running", duration_s=until, sim_end=format_sim(scenario.start, until))
    manifest.setdefault("resumed", []).append({
        "from": format_sim(scenario.start, start), "wall": datetime.now().isoformat(timespec="seconds"),
        "checkpoint": last is not None, "restored": None,        # re-simulated from the start to `from`
        "cut": {"events": events, "answers": answers, "torn": torn_event + torn_answer}})
    manifest["wall"] = {"started": datetime.now().isoformat(timespec="seconds")}
    write_json_atomic(run_dir / "manifest.json", manifest)
    return execute(scenario, brain, _embedder(manifest), manifest["seed"], run_dir, manifest, until,
                   ledger=ledger, on_start=on_start, on_step=on_step, checkpoint_every=checkpoint_every,
                   replay_to=start, expected=last, fork=manifest.get("fork"))


def fork_run(run_dir: str | Path, at: float, *, seed: int | None = None, inject: list[tuple[str, str]] = (),
             duration: float | None = None, runs_dir: str | Path | None = None, on_start=None, on_step=None,
             checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """A new run that shares `run_dir`'s history up to `at` (seconds since its start), then
    goes its own way: with another seed, and thoughts injected into agents' heads."""
    run_dir = Path(run_dir)
    parent, scenario = _load(run_dir)
    reached = _reached(run_dir, parent, scenario)
    if not 0 < at <= reached:
        raise UsageError(f"cannot fork {run_dir} at {format_sim(scenario.start, at)}: it covers "
                         f"{parent['sim_start']} to {format_sim(scenario.start, reached)}")
    ids = {a.id for a in scenario.agents}
    for agent_id, _ in inject:
        if agent_id not in ids:
            raise UsageError(f"--inject: unknown agent {agent_id!r}; the run has {', '.join(sorted(ids))}")
    brain, ledger = _brain(parent, run_dir, budget)        # the fork's own spending, from nothing
    until = at + duration if duration else parent["duration_s"]
    path = new_run_dir(Path(runs_dir) if runs_dir else run_dir.parent, f"{run_dir.name}-fork", seed or parent["seed"])
    fork = {"t": at, "at": format_sim(scenario.start, at), "seed": seed, "inject": [list(i) for i in inject],
            "parent": {"run_id": parent["run_id"], "path": str(run_dir)},
            "restored": None}                                   # re-simulated from the start to `at`
    manifest = {k: v for k, v in parent.items() if k in ("schema", "scenario", "seed", "brain", "embedder",
                                                         "agents", "sim_start", "smallville_version", "python")}
    manifest.update(run_id=path.name, status="running", fork=fork, duration_s=until,
                    sim_end=format_sim(scenario.start, until),
                    wall={"started": datetime.now().isoformat(timespec="seconds")})
    write_json_atomic(path / "manifest.json", manifest)
    keep_scenario(scenario, path / "scenario")
    return execute(scenario, brain, _embedder(parent), parent["seed"], path, manifest, until, ledger=ledger,
                   on_start=on_start, on_step=on_step, checkpoint_every=checkpoint_every, fork=fork)


def _reached(run_dir: Path, manifest: dict, scenario) -> float:
    """Seconds since the start that the run covers: where it ended, or, for a run that died
    without saying (killed, a power cut), its last checkpoint: all before it is on record."""
    from smallville.checkpoint import checkpoints

    if manifest.get("sim_reached"):
        return (datetime.fromisoformat(manifest["sim_reached"]) - scenario.start).total_seconds()
    saved = checkpoints(run_dir)
    return saved[-1]["t"] if saved else 0.0


def simulate_to(run_dir: str | Path, at: float | None = None, strict: bool = False):
    """The run's simulation at `at` seconds since its start (default: where the run got to),
    re-simulated in memory: nothing of the run is written or changed. `strict`: answers
    come from the run's record only (never a model)."""
    from smallville.sim import SimConfig, Simulation
    from smallville.sim.log import EventLog

    run_dir = Path(run_dir)
    manifest, scenario = _load(run_dir)
    reached = _reached(run_dir, manifest, scenario)
    at = reached if at is None else at
    if not 0 <= at <= reached:
        raise UsageError(f"{format_sim(scenario.start, at)} is outside the time {run_dir} covers: "
                         f"{manifest['sim_start']} to {format_sim(scenario.start, reached)}")
    if strict:
        from smallville.brain.record import Replaying

        brain = Replaying(run_dir)
    else:
        brain, _ = _brain(manifest, run_dir)
    sim = Simulation(scenario, brain, _embedder(manifest), seed=manifest["seed"],
                     config=SimConfig.from_dict(manifest.get("config")), log=EventLog(scenario.start, _Sink()))
    fork = manifest.get("fork")

    def step(now: float) -> None:
        if fork and now == fork["t"]:
            apply_fork(sim, fork)

    sim.run(max(at, 1e-6), on_step=step, stops=(fork["t"],) if fork else ())
    return sim
