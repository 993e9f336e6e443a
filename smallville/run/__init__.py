"""Runs: `RUNS_DIR/RUN_ID/` with `manifest.json`, an append-only `events.jsonl`, the records
of answers and embeddings, and checkpoints (docs/run-format.md). `Run` owns one; the
functions here are the ways to make one, go on with one and look inside one.

Wall-clock times and the run id live in the manifest only, so the event log of a seeded
offline run is byte-identical from run to run.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from smallville.errors import RunError, UsageError
from smallville.run.folder import (EMBEDDINGS, EVENTS, RECORD, copy_prefix, keep_scenario, new_run_dir, seed_label,
                                   truncate, write_json_atomic)
from smallville.run.manifest import Manifest
from smallville.run.run import Run, embedder_spec
from smallville.run.session import RunResult, go
from smallville.timefmt import format_sim

__all__ = ["Manifest", "Run", "RunResult", "fork_run", "resume_run", "run_scenario", "seed_label", "simulate_to",
           "write_json_atomic"]


def run_scenario(scenario, *, runs_dir: Path | str = "runs", seed: int | None = None,
                 duration: float | None = None, brain=None, embedder: str | None = None,
                 embedder_api_base: str | None = None, brain_config: str | Path | None = None,
                 api_base: str | None = None, cache: str | Path | None = None,
                 replay_from: str | Path | None = None, replay_fallthrough: bool = False,
                 on_start: Callable | None = None, on_step: Callable[[float], None] | None = None,
                 checkpoint_every: float = 3600.0, config=None, budget: dict | None = None,
                 experiment: dict | None = None, folder: str | Path | None = None) -> RunResult:
    """Simulate a loaded scenario and log it to a new run directory.

    `brain` is "offline" (the default), a litellm model name or an `LLMConfig`; settings
    come from the scenario's `brain:` block, then `brain_config` (a YAML file), then
    `brain`/`api_base`. With `replay_from` (a run directory) the brain answers from that
    run's record, and seed, duration and embedder default to that run's.

    `config` is a `smallville.sim.SimConfig` (the architecture's knobs and ablations; default:
    the paper's). `budget` ({"usd", "requests", "tokens"}) limits what the model may be sent
    (on top of the brain settings' `budget`); a run that reaches a limit ends with status
    `budget_exhausted` at its last complete tick, with a checkpoint to resume from.
    `experiment` is recorded in the manifest (the experiment, condition and seed it is of).
    `folder` (a new folder, whose name is the run id) instead of a new one in `runs_dir`.

    Ctrl-C ends the run with status `interrupted`, keeping what was written; any other
    exception marks it `failed` and propagates."""
    from smallville.brain import LLMConfig
    from smallville.brain.assembly import assemble, settings_of
    from smallville.brain.config import load_config
    from smallville.embed import make_embedder, recorded
    from smallville.embed.record import record_dim

    recorded_run = Run.open_for(replay_from, "--replay-from") if replay_from is not None else None
    before = recorded_run.manifest if recorded_run else None
    seed = (before.seed if before else scenario.seed) if seed is None else seed
    duration = (before.duration_s if before else scenario.duration) if duration is None else duration
    settings = brain if isinstance(brain, LLMConfig) else load_config(
        scenario=scenario.brain, file=brain_config, flags={"model": brain, "api_base": api_base},
        scenario_path=str(scenario.path))
    if budget and any(v is not None for v in budget.values()):
        settings = replace(settings, budget={**settings.budget, **{k: v for k, v in budget.items() if v is not None}})
    stack = assemble(settings, seed, cache=cache, replay=(replay_from, 0) if replay_from is not None else None,
                     live=replay_from is None or replay_fallthrough,
                     agents=len(scenario.agents) if replay_from is None else None)   # a replay calls little
    if hasattr(stack.brain, "preflight"):
        stack.brain.preflight()             # an unreachable model stops here, before any file is written
    if embedder is None and settings.embedding_model:
        embedder = settings.embedding_model
        embedder_api_base = embedder_api_base or settings.embedding_api_base or settings.api_base
    elif embedder is None:                   # a replay's embedder, else the default
        embedder, recorded_base = embedder_spec(before.embedder) if before else ("use", None)
        embedder_api_base = embedder_api_base or recorded_base
    try:
        plain = make_embedder(embedder, api_base=embedder_api_base)
    except ValueError as exc:                # an unknown --embedder
        raise UsageError(str(exc)) from None
    bases = [recorded_run.path / EMBEDDINGS] if recorded_run else []      # a replay's embeddings are recorded too
    dim = next((d for d in map(record_dim, bases) if d), None) or plain.dim  # else a remote embedder is reached
    #                                                                        here, before any file is written
    if folder is not None:
        path = Path(folder)
        path.mkdir(parents=True)
    else:
        path = new_run_dir(Path(runs_dir), Path(scenario.path).stem, seed)
    described = {"name": plain.name, "dim": dim, **({"api_base": embedder_api_base} if embedder_api_base else {})}
    manifest = Manifest(
        run_id=path.name, scenario={"path": str(scenario.path), "name": scenario.name, "sha256": scenario.sha256},
        seed=seed, brain=stack.brain.describe(), embedder=described, agents=sorted(a.id for a in scenario.agents),
        sim_start=format_sim(scenario.start, 0), sim_end=format_sim(scenario.start, duration), duration_s=duration,
        experiment=experiment, wall={"started": datetime.now().isoformat(timespec="seconds")})
    write_json_atomic(path / "manifest.json", manifest.to_dict())
    keep_scenario(scenario, path / "scenario")
    run = Run(path, manifest, scenario)
    ceiling = None
    if before is not None:                   # a replay keeps the recorded run's runaway guard
        recorded_settings = settings_of(before.brain)
        ceiling = None if recorded_settings.is_offline else recorded_settings.max_requests_per_agent_hour
    return go(run, stack, recorded(plain, path / EMBEDDINGS, bases), duration, on_start=on_start, on_step=on_step,
              checkpoint_every=checkpoint_every, config=config, ceiling=ceiling)


def resume_run(run_dir: str | Path, *, extend: float | None = None, on_start=None, on_step=None,
               checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """Continue a run from its last checkpoint to its end (or `extend` seconds past it).
    `budget` ({"usd", "requests", "tokens"}) allows that much more spending than the run
    has spent so far (a run stopped by its budget goes on with more)."""
    from smallville.brain.assembly import assemble, settings_of
    from smallville.brain.budget import Spend

    run = Run.open(run_dir)
    manifest = run.manifest
    if manifest.status == "completed" and not extend:
        raise UsageError(f"{run.path} has completed; to go on, give how much longer: "
                         f"smallville resume {run.path} --for 1d")
    until = manifest.duration_s + (extend or 0.0)
    start = run.start_point(until)
    if start is not None and start[0] != run.path:
        start = None
    if start is None and manifest.fork:
        raise RunError(f"{run.path} is a fork that stopped before its first checkpoint was written: "
                       f"fork {manifest.fork['parent']['path']} again")
    at = start[1]["t"] if start else 0.0
    files = start[1]["files"] if start else {}
    events, torn_event = truncate(run.path / EVENTS, files.get(EVENTS, 0))
    answers, torn_answer = truncate(run.path / RECORD, files.get(RECORD, 0))
    for folder in (run.path / "checkpoints").glob("*"):
        if folder.name != "memory" and (folder.name.startswith(".") or float(folder.name) > at):
            shutil.rmtree(folder)
    spent = Spend.from_dict(manifest.spend)
    settings = settings_of(manifest.brain, budget, spent)
    if budget and not settings.is_offline:
        manifest.brain["budget"] = settings.budget          # the manifest keeps the limits for the next resume
    stack = assemble(settings, run.seed_now, spent=spent, agents=len(manifest.agents))
    manifest.budget_stop = None
    manifest.status, manifest.duration_s, manifest.sim_end = "running", until, run.when(until)
    manifest.resumed.append({
        "from": run.when(at), "wall": datetime.now().isoformat(timespec="seconds"),
        "checkpoint": start is not None, "restored": start[1]["time"] if start else None,
        "cut": {"events": events, "answers": answers, "torn": torn_event + torn_answer}})
    manifest.wall = {"started": datetime.now().isoformat(timespec="seconds")}
    write_json_atomic(run.path / "manifest.json", manifest.to_dict())
    fork = manifest.fork
    return go(run, stack, run.embedder(), until, on_start=on_start, on_step=on_step,
              checkpoint_every=checkpoint_every, restore=start, fork=fork if fork and fork["t"] >= at else None)


def fork_run(run_dir: str | Path, at: float, *, seed: int | None = None, inject: list[tuple[str, str]] = (),
             duration: float | None = None, runs_dir: str | Path | None = None, on_start=None, on_step=None,
             checkpoint_every: float = 3600.0, budget: dict | None = None) -> RunResult:
    """A new run that shares `run_dir`'s history up to `at` (seconds since its start), then
    goes its own way: with another seed, and thoughts injected into agents' heads. It
    starts from the parent's checkpoint nearest before `at`, whose logs it copies, and
    simulates on to `at` with the parent's recorded answers."""
    from smallville.brain.assembly import assemble, settings_of

    parent = Run.open(run_dir)
    reached = parent.reached()
    if not 0 < at <= reached:
        raise UsageError(f"cannot fork {parent.path} at {parent.when(at)}: it covers "
                         f"{parent.manifest.sim_start} to {parent.when(reached)}")
    ids = {a.id for a in parent.scenario.agents}
    for agent_id, _ in inject:
        if agent_id not in ids:
            raise UsageError(f"--inject: unknown agent {agent_id!r}; the run has {', '.join(sorted(ids))}")
    start = parent.start_point(at)
    settings = settings_of(parent.manifest.brain)
    source, offset = (start[0], start[1]["files"]) if start else (parent.path, {})
    agents = len(parent.manifest.agents)
    history = assemble(settings, parent.seed_now, replay=(source, offset.get(RECORD, 0)), run_ahead=False)
    own = assemble(settings_of(parent.manifest.brain, budget),
                   seed if seed is not None else parent.seed_now, agents=agents)
    until = at + duration if duration else parent.manifest.duration_s
    path = new_run_dir(Path(runs_dir) if runs_dir else parent.path.parent, f"{parent.path.name}-fork",
                       seed if seed is not None else parent.manifest.seed)
    fork = {"t": at, "at": parent.when(at), "seed": seed, "inject": [list(i) for i in inject],
            "parent": {"run_id": parent.manifest.run_id, "path": str(parent.path)},
            "restored": start[1]["time"] if start else None}
    p = parent.manifest
    manifest = Manifest(run_id=path.name, scenario=p.scenario, seed=p.seed, brain=p.brain, embedder=p.embedder,
                        agents=p.agents, sim_start=p.sim_start, sim_end=parent.when(until), duration_s=until,
                        fork=fork, wall={"started": datetime.now().isoformat(timespec="seconds")})
    write_json_atomic(path / "manifest.json", manifest.to_dict())
    keep_scenario(parent.scenario, path / "scenario")
    for name in (EVENTS, RECORD):                   # the shared history, up to the checkpoint
        copy_prefix(source / name, path / name, offset.get(name, 0))
    run = Run(path, manifest, parent.scenario)
    return go(run, history, run.embedder(), until, on_start=on_start, on_step=on_step,
              checkpoint_every=checkpoint_every, restore=start, fork=fork, fork_stack=own)


def simulate_to(run_dir: str | Path, at: float | None = None, strict: bool = False):
    """The run's simulation at `at` seconds since its start (default: where it got to),
    rebuilt in memory from its nearest checkpoint: see `Run.state_at`. Close it when done
    (`with simulate_to(run) as sim:`)."""
    return Run.open(run_dir).state_at(at, strict)
