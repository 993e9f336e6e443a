"""The three ways a run goes: a new run of a scenario, a run resumed from its last checkpoint,
and a fork of a run at a time. Each opens or makes the `Run`, puts its brain together
(`smallville.brain.assembly`) and goes on in a `Session`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from pathlib import Path

from smallville.errors import RunError, UnknownAgent, UsageError
from smallville.run.folder import (
    EMBEDDINGS,
    EVENTS,
    RECORD,
    TEXTS,
    copy_prefix,
    keep_scenario,
    new_run_dir,
    truncate,
    write_json_atomic,
)
from smallville.run.fork import Fork
from smallville.run.manifest import Manifest
from smallville.run.options import RunOptions
from smallville.run.run import Run, StartPoint
from smallville.run.session import RunResult, Session
from smallville.timefmt import format_sim


def run_scenario(
    scenario,
    options: RunOptions | None = None,
    /,
    *,
    on_start: Callable | None = None,
    on_step: Callable[[float], None] | None = None,
    **given,
) -> RunResult:
    """Simulate a loaded scenario and log it to a new run folder, as `options` (a
    `RunOptions`) say, or its fields given as keywords: `run_scenario(s, duration=3600)`.
    `on_start(session)` is called once the simulation is built, `on_step(now)` after every
    step (see `Session`).

    A run that reaches a budget ends `budget_exhausted` at its last complete tick, with a
    checkpoint to resume from; Ctrl-C ends it `interrupted`, keeping what was written; any
    other exception marks it `failed` and propagates."""
    from smallville.embed import recorded

    options = replace(options, **given) if options is not None else RunOptions(**given)
    replayed = Run.open_for(options.replay_from, "--replay-from") if options.replay_from is not None else None
    settings = options.settings(scenario)
    options = options.defaults(scenario, settings, replayed.manifest if replayed else None)
    stack = _stack(scenario, settings, options)
    plain, described = _embedder(options, replayed)  # (a remote one is reached before any file is written)
    run = _new_run(scenario, options, stack.brain.describe(), described)
    bases = [replayed.path / EMBEDDINGS] if replayed else []  # a replay's embeddings are recorded too
    with Session(
        run, stack, recorded(plain, run.path / EMBEDDINGS, bases), config=options.config, ceiling=_ceiling(replayed)
    ) as session:
        return session.go_to(
            options.duration, checkpoint_every=options.checkpoint_every, on_start=on_start, on_step=on_step
        )


def _stack(scenario, settings, options: RunOptions):
    """The new run's brain; an unreachable model stops here, before any file is written."""
    from smallville.brain.assembly import assemble
    from smallville.sim.runahead import fetching_ahead

    replay = options.replay_from
    stack = assemble(
        settings,
        options.seed,
        cache=options.cache,
        replay=(replay, 0) if replay is not None else None,
        live=replay is None or options.replay_fallthrough,
        agents=len(scenario.agents) if replay is None else None,
    )  # a replay calls little
    stack.brain.preflight()
    return stack if replay is not None else fetching_ahead(stack)


def _embedder(options: RunOptions, replayed: Run | None):
    """The embedder the options name, and how the manifest describes it."""
    from smallville.embed import make_embedder
    from smallville.embed.record import record_dim

    try:
        plain = make_embedder(options.embedder, api_base=options.embedder_api_base, process=True)
    except ValueError as exc:  # an unknown --embedder
        raise UsageError(str(exc)) from None
    bases = [replayed.path / EMBEDDINGS] if replayed else []
    dim = next((d for d in map(record_dim, bases) if d), None) or plain.dim
    api_base = options.embedder_api_base
    return plain, {"name": plain.name, "dim": dim, **({"api_base": api_base} if api_base else {})}


def _new_run(scenario, options: RunOptions, brain: dict, embedder: dict) -> Run:
    """The new run's folder, with its manifest and the scenario's copy."""
    if options.folder is not None:
        path = Path(options.folder)
        path.mkdir(parents=True)
    else:
        path = new_run_dir(Path(options.runs_dir or "runs"), Path(scenario.path).stem, options.seed)
    manifest = Manifest(
        run_id=path.name,
        scenario={"path": str(scenario.path), "name": scenario.name, "sha256": scenario.sha256},
        seed=options.seed,
        brain=brain,
        embedder=embedder,
        agents=sorted(a.id for a in scenario.agents),
        sim_start=format_sim(scenario.start, 0),
        sim_end=format_sim(scenario.start, options.duration),
        duration_s=options.duration,
        experiment=options.experiment,
        wall={"started": datetime.now().isoformat(timespec="seconds")},
    )
    write_json_atomic(path / "manifest.json", manifest.to_dict())
    keep_scenario(scenario, path / "scenario")
    return Run(path, manifest, scenario)


def _ceiling(replayed: Run | None) -> int | None:
    """A replay keeps the runaway guard of the run it replays (None: the settings' own)."""
    from smallville.brain.assembly import settings_of

    if replayed is None:
        return None
    settings = settings_of(replayed.manifest.brain)
    return None if settings.is_offline else settings.max_requests_per_agent_hour


# ---- resume ------------------------------------------------------------------------------


def resume_run(
    run_dir: str | Path,
    *,
    extend: float | None = None,
    on_start=None,
    on_step=None,
    checkpoint_every: float = 3600.0,
    budget: dict | None = None,
    brain=None,
    brain_config: str | Path | None = None,
    api_base: str | None = None,
) -> RunResult:
    """Continue a run from its last checkpoint to its end (or `extend` seconds past it).
    `budget` ({"usd", "requests", "tokens"}) allows that much more spending than the run
    has spent so far (a run stopped by its budget goes on with more). `brain`, `brain_config`
    and `api_base` put another brain in for the part not yet run (see `brain_switch`)."""
    run = Run.open(run_dir)
    if run.manifest.status == "completed" and not extend:
        raise UsageError(
            f"{run.path} has completed; to go on, give how much longer: smallville resume {run.path} --for 1d"
        )
    until = run.manifest.duration_s + (extend or 0.0)
    start = _own_start(run, until)
    switch = brain_switch(run, brain, brain_config, api_base)
    stack = _resumed_stack(run, budget, switch)  # (a new brain's preflight: before anything is cut)
    try:
        cut = _cut_back(run, start)
    except BaseException:
        stack.close()
        raise
    if switch is not None:
        run.manifest.switch_brain(start.t if start else 0.0, stack.brain.describe())
    _note_resume(run, until, start, cut)
    with Session(run, stack, run.embedder(process=True), start=start) as session:
        if run.fork:
            session.fork(run.fork)
        return session.go_to(until, checkpoint_every=checkpoint_every, on_start=on_start, on_step=on_step)


def _own_start(run: Run, until: float) -> StartPoint | None:
    """The run's own last checkpoint to go on from (None: from its beginning)."""
    start = run.start_point(until)
    if start is not None and start.run != run.path:
        start = None
    if start is None and run.fork:
        raise RunError(
            f"{run.path} is a fork that stopped before its first checkpoint was written: "
            f"fork {run.fork.parent_path} again"
        )
    return start


def _cut_back(run: Run, start: StartPoint | None) -> dict:
    """The logs cut back to the checkpoint, later checkpoints removed; what was cut."""
    at = start.t if start else 0.0
    events, torn_event = truncate(run.path / EVENTS, start.offset(EVENTS) if start else 0)
    answers, torn_answer = truncate(run.path / RECORD, start.offset(RECORD) if start else 0)
    if start is None or TEXTS in start.head.files:  # (a checkpoint from before the texts has all they hold)
        truncate(run.path / TEXTS, start.offset(TEXTS) if start else 0)
    for folder in (run.path / "checkpoints").glob("*"):
        if folder.name != "memory" and (folder.name.startswith(".") or float(folder.name) > at):
            shutil.rmtree(folder)
    return {"events": events, "answers": answers, "torn": torn_event + torn_answer}


def _resumed_stack(run: Run, budget: dict | None, switch=None):
    """The run's brain again (or `switch`, the settings of another), its budget raised by
    `budget` over what the run has spent."""
    from smallville.brain.assembly import assemble, settings_of, with_budget
    from smallville.brain.budget import Spend

    spent = Spend.from_dict(run.manifest.spend)
    settings = settings_of(run.manifest.brain, budget, spent) if switch is None else with_budget(switch, budget, spent)
    if budget and not settings.is_offline:
        run.manifest.brain["budget"] = settings.budget  # the manifest keeps the limits for the next resume
    return _going(assemble(settings, run.seed_now, spent=spent, agents=len(run.manifest.agents)), switch is not None)


def _going(stack, check: bool):
    """A stack that answers a run going on, fetching ahead; `check`: a brain new to the run,
    whose preflight (an unreachable model, a mode its server refuses) comes first."""
    from smallville.sim.runahead import fetching_ahead

    if check:
        try:
            stack.brain.preflight()
        except BaseException:
            stack.close()
            raise
    return fetching_ahead(stack)


def brain_switch(run: Run, brain=None, brain_config: str | Path | None = None, api_base: str | None = None):
    """The settings of the brain a resume or fork of `run` goes on with instead of the run's
    own (None: its own): `brain` (a model name, `offline`, `llm`, or an `LLMConfig`) and
    `brain_config` (a YAML file) read as `run` reads them, over the scenario's `brain:`
    block; `api_base` alone moves the run's own model to another server."""
    from smallville.brain import LLMConfig
    from smallville.brain.assembly import settings_of
    from smallville.brain.config import load_config

    if isinstance(brain, LLMConfig):
        if brain_config is not None or api_base is not None:
            raise UsageError("brain is an LLMConfig, the whole settings: give it without brain_config or api_base")
        return brain
    if brain is None and brain_config is None:
        own = settings_of(run.manifest.brain)
        return None if api_base is None else own.merged({"api_base": api_base}, "--api-base")
    return load_config(
        scenario=run.scenario.brain,
        file=brain_config,
        flags={"model": brain, "api_base": api_base},
        scenario_path=str(run.scenario.path),
    )


def _note_resume(run: Run, until: float, start: StartPoint | None, cut: dict) -> None:
    """The manifest says the run goes on, from where, and what was cut."""
    manifest = run.manifest
    manifest.budget_stop = None
    manifest.status, manifest.duration_s, manifest.sim_end = "running", until, run.when(until)
    manifest.resumed.append(
        {
            "from": run.when(start.t if start else 0.0),
            "wall": datetime.now().isoformat(timespec="seconds"),
            "checkpoint": start is not None,
            "restored": start.head.time if start else None,
            "cut": cut,
        }
    )
    manifest.wall = {"started": datetime.now().isoformat(timespec="seconds")}
    write_json_atomic(run.path / "manifest.json", manifest.to_dict())


# ---- fork --------------------------------------------------------------------------------


def fork_run(
    run_dir: str | Path,
    at: float,
    *,
    seed: int | None = None,
    inject: list[tuple[str, str]] = (),
    duration: float | None = None,
    runs_dir: str | Path | None = None,
    on_start=None,
    on_step=None,
    checkpoint_every: float = 3600.0,
    budget: dict | None = None,
    brain=None,
    brain_config: str | Path | None = None,
    api_base: str | None = None,
    folder: str | Path | None = None,
    experiment: dict | None = None,
) -> RunResult:
    """A new run that shares `run_dir`'s history up to `at` (seconds since its start), then goes
    its own way (another seed, thoughts injected, another brain: `brain_switch`). It copies the
    parent's logs up to its checkpoint nearest before `at` and replays its answers on to `at`;
    it goes to `folder` or a new one in `runs_dir` (default: beside the parent)."""
    from smallville.brain.assembly import assemble, settings_of

    inject = _check_fork(parent := Run.open(run_dir), at, inject)
    start = parent.start_point(at)
    source, offsets = (start.run, start.head.files) if start else (parent.path, {})
    switch = brain_switch(parent, brain, brain_config, api_base)
    own = _fork_brain(parent, at, switch, seed, budget)
    history = assemble(settings_of(parent.manifest.brain), parent.seed_now, replay=(source, offsets.get(RECORD, 0)))
    until = at + duration if duration else parent.manifest.duration_s
    parent_id, thoughts = parent.manifest.run_id, tuple(tuple(i) for i in inject)
    fork = Fork(at, parent.when(at), seed, thoughts, parent_id, str(parent.path), start and start.head.time)
    run = _new_fork(parent, fork, (source, offsets), until, _fork_dir(parent, fork, runs_dir, folder), experiment)
    if switch is not None:
        run.manifest.switch_brain(at, own.brain.describe())
    with Session(run, history, run.embedder(process=True), start=start) as session:
        session.fork(fork, own)
        return session.go_to(until, checkpoint_every=checkpoint_every, on_start=on_start, on_step=on_step)


def _fork_brain(parent: Run, at: float, switch, seed: int | None, budget: dict | None):
    """The brain a fork goes on with after `at`: the parent's then, or the one switched to."""
    from smallville.brain.assembly import assemble, settings_of, with_budget

    settings = settings_of(parent.manifest.brain_at(at), budget) if switch is None else with_budget(switch, budget)
    seed = seed if seed is not None else parent.seed_now
    return _going(assemble(settings, seed, agents=len(parent.manifest.agents)), switch is not None)


def _check_fork(parent: Run, at: float, inject) -> list[tuple[str, str]]:
    """A fork's time within what the parent covers, and its thoughts for agents it has: each
    (the agent's id, the thought), the agent given by id or name."""
    reached = parent.reached()
    if not 0 < at <= reached:
        raise UsageError(
            f"cannot fork {parent.path} at {parent.when(at)}: it covers "
            f"{parent.manifest.sim_start} to {parent.when(reached)}"
        )
    try:
        return [(parent.agent_id(agent), thought) for agent, thought in inject]
    except UnknownAgent as exc:
        raise UnknownAgent(f"--inject: {exc}") from None


def _fork_dir(parent: Run, fork: Fork, runs_dir, folder) -> Path:
    """The fork's new folder: `folder`, or one in `runs_dir` (default: beside the parent)."""
    if folder is not None:
        Path(folder).mkdir(parents=True)
        return Path(folder)
    return new_run_dir(
        Path(runs_dir) if runs_dir else parent.path.parent,
        f"{parent.path.name}-fork",
        fork.seed if fork.seed is not None else parent.manifest.seed,
    )


def _new_fork(
    parent: Run, fork: Fork, history: tuple[Path, dict], until: float, path: Path, experiment: dict | None
) -> Run:
    """The fork's folder `path`: its manifest, the scenario's copy, and the shared `history`:
    the logs of a run folder up to their lengths at the checkpoint the fork starts from."""
    p = parent.manifest
    manifest = Manifest(
        run_id=path.name,
        scenario=p.scenario,
        seed=p.seed,
        brain=p.brain_at(fork.t),
        brains=[b for b in p.brains if b["t"] <= fork.t],
        embedder=p.embedder,
        agents=p.agents,
        sim_start=p.sim_start,
        sim_end=parent.when(until),
        duration_s=until,
        fork=fork.to_dict(),
        experiment=experiment,
        wall={"started": datetime.now().isoformat(timespec="seconds")},
    )
    write_json_atomic(path / "manifest.json", manifest.to_dict())
    keep_scenario(parent.scenario, path / "scenario")
    source, offsets = history
    for name in (EVENTS, RECORD):
        copy_prefix(source / name, path / name, offsets.get(name, 0))
    if (source / TEXTS).exists():  # (all of it under a checkpoint from before the texts)
        whole = (source / TEXTS).stat().st_size if offsets else 0
        copy_prefix(source / TEXTS, path / TEXTS, offsets.get(TEXTS, whole))
    return Run(path, manifest, parent.scenario)
