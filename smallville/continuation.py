"""Going on with a run: resume one that stopped (or extend one that ended), fork one at a
time into a new run that can change history, or rebuild its state at any time in memory.

Each starts from a checkpoint (`checkpoint.restore`) and simulates at most one checkpoint
interval: from the nearest checkpoint at or before the time wanted, with the answers
from the run's own record (`answers.jsonl`), so no model is asked twice and nothing needs
the engine to be the version that wrote the run. A resumed run ends exactly as a run
that was never interrupted. `verify` is where a run is re-simulated from its start.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from smallville.errors import RunError, UsageError
from smallville.runner import (RunResult, _embedder_spec, apply_fork, execute, keep_scenario, new_run_dir,
                               write_json_atomic)
from smallville.timefmt import format_sim


def _load(run_dir: Path) -> tuple[dict, object]:
    from smallville.replay.record import read_manifest
    from smallville.scenario import load_scenario

    manifest = read_manifest(run_dir)
    copies = sorted((run_dir / "scenario").glob("*.yaml"))
    if not copies:
        raise RunError(f"{run_dir} keeps no copy of its scenario (it was written by an older smallville)")
    return manifest, load_scenario(str(copies[0]))


def _seed(manifest: dict) -> int:
    """The seed a run's brain answers with now: a fork's own, else the run's."""
    fork = manifest.get("fork") or {}
    return fork["seed"] if fork.get("seed") is not None else manifest["seed"]


def _brain(manifest: dict, seed: int, budget: dict | None = None, spent: dict | None = None, ahead: bool = True):
    """The run's live brain again (offline, or its model with its settings, fetching
    ahead if it did and `ahead`), and its ledger. `budget` holds new limits, counted on
    top of `spent` (the run's spend so far)."""
    from smallville.brain import make_brain
    from smallville.runner import run_ahead
    from smallville.brain.config import LLMConfig
    from smallville.brain.ledger import Ledger

    settings = manifest.get("brain", {})
    if settings.get("name", settings.get("model")) == "offline":
        return make_brain("offline", seed), None
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
    brain = make_brain(config, seed, ledger=ledger, spent_before=before)
    return (run_ahead(brain, config) if ahead else brain), ledger


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


def _sizes(run_dir: Path) -> dict[str, int]:
    return {name: (run_dir / name).stat().st_size if (run_dir / name).exists() else 0
            for name in ("events.jsonl", "answers.jsonl")}


def start_point(run_dir: Path, manifest: dict, at: float) -> tuple[Path, dict] | None:
    """The checkpoint to start from for time `at`: the run's last at or before `at` whose
    files are all on disk, else (a fork's time before its own first checkpoint) its
    parent's, and so on up; None: start from the beginning. A run whose checkpoints are
    all of an older format cannot be restored: that is a `RunError` saying so."""
    from smallville.checkpoint import CHECKPOINT_SCHEMA, checkpoints

    sizes = _sizes(run_dir)
    usable = [c for c in checkpoints(run_dir) if c["t"] <= at and all(c["files"].get(n, 0) <= sizes[n] for n in sizes)]
    if usable:
        return run_dir, usable[-1]
    fork = manifest.get("fork")
    if fork and at <= fork["t"] and fork.get("parent", {}).get("path"):
        parent = Path(fork["parent"]["path"])
        if (parent / "manifest.json").exists():
            from smallville.replay.record import read_manifest

            return start_point(parent, read_manifest(parent), at)
    old = [c for c in checkpoints(run_dir, schema=None) if c["t"] <= at]
    if old:
        raise RunError(f"{run_dir} was written by an older smallville: its checkpoints (schema "
                       f"{old[-1].get('schema')}) hold no state this version can restore (schema {CHECKPOINT_SCHEMA}); "
                       "run its scenario again, or use the smallville that wrote it")
    return None


def _at_checkpoint(start: tuple[Path, dict] | None) -> float:
    return start[1]["t"] if start else 0.0


def resume_run(run_dir: str | Path, *, extend: float | None = None, on_start=None, on_step=None,
               checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """Continue a run from its last checkpoint to its end (or `extend` seconds past it).
    `budget` ({"usd", "requests", "tokens"}) allows that much more spending than the run
    has spent so far (a run stopped by its budget goes on with more)."""
    run_dir = Path(run_dir)
    manifest, scenario = _load(run_dir)
    if manifest.get("status") == "completed" and not extend:
        raise UsageError(f"{run_dir} has completed; to go on, give how much longer: smallville resume {run_dir} --for 1d")
    start = start_point(run_dir, manifest, manifest["duration_s"] + (extend or 0.0))
    if start is not None and start[0] != run_dir:          # a fork killed before its first checkpoint: fork again
        start = None
    fork = manifest.get("fork")
    if start is None and fork:
        raise RunError(f"{run_dir} is a fork that stopped before its first checkpoint was written: "
                       f"fork {fork['parent']['path']} again")
    at = _at_checkpoint(start)
    files = start[1]["files"] if start else {}
    events, torn_event = _truncate(run_dir / "events.jsonl", files.get("events.jsonl", 0))
    answers, torn_answer = _truncate(run_dir / "answers.jsonl", files.get("answers.jsonl", 0))
    for folder in (run_dir / "checkpoints").glob("*"):
        if folder.name != "memory" and (folder.name.startswith(".") or float(folder.name) > at):
            shutil.rmtree(folder)
    brain, ledger = _brain(manifest, _seed(manifest), budget, manifest.get("spend"))
    until = manifest["duration_s"] + (extend or 0.0)
    manifest.pop("budget_stop", None)
    manifest.update(status="running", duration_s=until, sim_end=format_sim(scenario.start, until))
    manifest.setdefault("resumed", []).append({
        "from": format_sim(scenario.start, at), "wall": datetime.now().isoformat(timespec="seconds"),
        "checkpoint": start is not None, "restored": start[1]["time"] if start else None,
        "cut": {"events": events, "answers": answers, "torn": torn_event + torn_answer}})
    manifest["wall"] = {"started": datetime.now().isoformat(timespec="seconds")}
    write_json_atomic(run_dir / "manifest.json", manifest)
    return execute(scenario, brain, _embedder(manifest), manifest["seed"], run_dir, manifest, until,
                   ledger=ledger, on_start=on_start, on_step=on_step, checkpoint_every=checkpoint_every,
                   restore=start, fork=fork if fork and fork["t"] >= at else None)


def fork_run(run_dir: str | Path, at: float, *, seed: int | None = None, inject: list[tuple[str, str]] = (),
             duration: float | None = None, runs_dir: str | Path | None = None, on_start=None, on_step=None,
             checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """A new run that shares `run_dir`'s history up to `at` (seconds since its start), then
    goes its own way: with another seed, and thoughts injected into agents' heads. It
    starts from the parent's checkpoint nearest before `at`, whose logs it copies, and
    simulates on to `at` with the parent's recorded answers."""
    from smallville.brain.record import RECORD, Replaying

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
    start = start_point(run_dir, parent, at)
    history, _ = _brain(parent, _seed(parent), ahead=False)  # the parent's, up to `at`
    own, ledger = _brain({**parent, "fork": None}, seed if seed is not None else _seed(parent), budget)
    until = at + duration if duration else parent["duration_s"]
    path = new_run_dir(Path(runs_dir) if runs_dir else run_dir.parent, f"{run_dir.name}-fork",
                       seed if seed is not None else parent["seed"])
    fork = {"t": at, "at": format_sim(scenario.start, at), "seed": seed, "inject": [list(i) for i in inject],
            "parent": {"run_id": parent["run_id"], "path": str(run_dir)},
            "restored": start[1]["time"] if start else None}
    manifest = {k: v for k, v in parent.items() if k in ("schema", "scenario", "seed", "brain", "embedder",
                                                         "agents", "sim_start", "smallville_version", "python")}
    manifest.update(run_id=path.name, status="running", fork=fork, duration_s=until,
                    sim_end=format_sim(scenario.start, until),
                    wall={"started": datetime.now().isoformat(timespec="seconds")})
    write_json_atomic(path / "manifest.json", manifest)
    keep_scenario(scenario, path / "scenario")
    files = start[1]["files"] if start else {}
    source = start[0] if start else run_dir
    for name in ("events.jsonl", RECORD):                   # the shared history, up to the checkpoint
        with open(source / name, "rb") as src, open(path / name, "wb") as dst:
            dst.write(src.read(files.get(name, 0)))
    recorded = Replaying(source, fallthrough=history, start=files.get(RECORD, 0))
    return execute(scenario, recorded, _embedder(parent), parent["seed"], path, manifest, until, ledger=ledger,
                   on_start=on_start, on_step=on_step, checkpoint_every=checkpoint_every, restore=start,
                   fork=fork, fork_brain=own)


def _reached(run_dir: Path, manifest: dict, scenario) -> float:
    """Seconds since the start that the run covers: where it ended, or, for a run that died
    without saying (killed, a power cut), its last checkpoint: all before it is on record."""
    from smallville.checkpoint import checkpoints

    if manifest.get("sim_reached"):
        return (datetime.fromisoformat(manifest["sim_reached"]) - scenario.start).total_seconds()
    saved = checkpoints(run_dir, schema=None)
    return saved[-1]["t"] if saved else 0.0


def simulate_to(run_dir: str | Path, at: float | None = None, strict: bool = False):
    """The run's simulation at `at` seconds since its start (default: where the run got to),
    rebuilt in memory from the nearest checkpoint before: nothing of the run is written or
    changed. Answers come from the record of the run whose checkpoint it is (a fork's
    parent's, before the fork's first); what that lacks goes to the run's brain or, with
    `strict`, is an error."""
    from smallville.brain.record import RECORD, Replaying
    from smallville.checkpoint import restore
    from smallville.sim import SimConfig, Simulation
    from smallville.sim.log import EventLog, Nowhere

    run_dir = Path(run_dir)
    manifest, scenario = _load(run_dir)
    reached = _reached(run_dir, manifest, scenario)
    at = reached if at is None else at
    if not 0 <= at <= reached:
        raise UsageError(f"{format_sim(scenario.start, at)} is outside the time {run_dir} covers: "
                         f"{manifest['sim_start']} to {format_sim(scenario.start, reached)}")
    start = start_point(run_dir, manifest, at)
    begin = _at_checkpoint(start)
    source = start[0] if start else run_dir
    own = source == run_dir                  # else the parent's history, before the fork
    live = None if strict else _brain(manifest, _seed(manifest) if own else manifest["seed"], ahead=False)[0]
    brain = Replaying(source, fallthrough=live, start=start[1]["files"].get(RECORD, 0) if start else 0)
    sim = Simulation(scenario, brain, _embedder(manifest), seed=manifest["seed"],
                     config=SimConfig.from_dict(manifest.get("config")), log=EventLog(scenario.start, Nowhere()))
    if start:
        restore(sim, *start)
    fork = manifest.get("fork") if own else None
    if fork and start and fork["t"] == begin:
        apply_fork(sim, fork)

    def step(now: float) -> None:
        if fork and now == fork["t"]:
            apply_fork(sim, fork)

    sim.run(max(at, 1e-6), on_step=step, stops=(fork["t"],) if fork and fork["t"] > begin else ())
    return sim
