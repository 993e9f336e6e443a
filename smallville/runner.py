"""A run on disk: `RUNS_DIR/RUN_ID/` with `manifest.json` and an append-only `events.jsonl`.

Wall-clock times and the run id live in the manifest only, so the event log of a seeded
offline run is byte-identical from run to run.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Callable

from smallville import __version__, events
from smallville.errors import RunError, SmallvilleError, UsageError
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


def seed_label(seed: int) -> str:
    """`seed7`, and `seed_neg7` for -7: a run id's parts are split by hyphens, and `seed-7`
    would read as seed 7."""
    return f"seed{seed}" if seed >= 0 else f"seed_neg{-seed}"


def new_run_dir(runs_dir: Path, stem: str, seed: int) -> Path:
    """A fresh, unique run folder named after the scenario, seed and wall-clock time."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{seed_label(seed)}-{datetime.now():%Y%m%d-%H%M%S}"
    path, n = runs_dir / base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = runs_dir / f"{base}-{n}"


def keep_scenario(scenario, folder: Path) -> None:
    """Copy the scenario file and its agent files into the run, so the run can be replayed,
    resumed or forked even after the originals change or move."""
    (folder / "agents").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(scenario.path, folder / Path(scenario.path).name)
    for agent in scenario.agents:
        shutil.copyfile(agent.source, folder / "agents" / f"{agent.id}.yaml")


@dataclass
class RunResult:
    path: Path
    manifest: dict
    simulation: object


def run_scenario(scenario, *, runs_dir: Path | str = "runs", seed: int | None = None,
                 duration: float | None = None, brain=None, embedder: str | None = None,
                 embedder_api_base: str | None = None, brain_config: str | Path | None = None,
                 api_base: str | None = None, cache: str | Path | None = None,
                 replay_from: str | Path | None = None, replay_fallthrough: bool = False,
                 on_start: Callable | None = None, on_step: Callable[[float], None] | None = None,
                 checkpoint_every: float = 3600.0, config=None, budget: dict | None = None) -> RunResult:
    """Simulate a loaded scenario and log it to a new run directory.

    `brain` is "offline" (the default), a litellm model name or an `LLMConfig`; settings
    come from the scenario's `brain:` block, then `brain_config` (a YAML file), then
    `brain`/`api_base`. With `replay_from` (a run directory) the brain answers from that
    run's record, and seed, duration and embedder default to that run's.

    `config` is a `smallville.sim.SimConfig` (the architecture's knobs and ablations; default:
    the paper's). `budget` ({"usd", "requests", "tokens"}) limits what the model may be sent
    (on top of the brain settings' `budget`); a run that reaches a limit ends with status
    `budget_exhausted` at its last complete tick, with a checkpoint to resume from.

    Ctrl-C (KeyboardInterrupt) ends the run with status `interrupted`, keeping what was
    written; any other exception marks it `failed` and propagates."""
    from smallville.brain import Ledger, LLMConfig, make_brain
    from smallville.brain.config import load_config
    from smallville.brain.record import Replaying
    from smallville.embed import make_embedder

    recorded = _recorded_manifest(replay_from) if replay_from is not None else {}
    seed = recorded.get("seed", scenario.seed) if seed is None else seed
    duration = recorded.get("duration_s", scenario.duration) if duration is None else duration
    settings = brain if isinstance(brain, LLMConfig) else load_config(
        scenario=scenario.brain, file=brain_config, flags={"model": brain, "api_base": api_base},
        scenario_path=str(scenario.path))
    if budget and any(v is not None for v in budget.values()):
        settings = replace(settings, budget={**settings.budget, **{k: v for k, v in budget.items() if v is not None}})
    ledger = Ledger()
    the_brain = None if replay_from is not None and not replay_fallthrough else make_brain(
        settings, seed, ledger=ledger, cache=cache)
    if replay_from is None:
        the_brain = run_ahead(the_brain, settings)
    if replay_from is not None:
        the_brain = Replaying(replay_from, fallthrough=the_brain)
    if hasattr(the_brain, "preflight"):
        the_brain.preflight()               # an unreachable model stops here, before any file is written
    if embedder is None:
        embedder = settings.embedding_model or _embedder_spec(recorded) or "use"
        if settings.embedding_model and embedder_api_base is None:
            embedder_api_base = settings.embedding_api_base or settings.api_base
    try:
        the_embedder = make_embedder(embedder, api_base=embedder_api_base)
    except ValueError as exc:                # an unknown --embedder
        raise UsageError(str(exc)) from None
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
    keep_scenario(scenario, path / "scenario")
    model = recorded.get("brain", {}) if replay_from is not None else settings.describe()
    ceiling = model.get("max_requests_per_agent_hour") if model.get("model", "offline") != "offline" else None
    return execute(scenario, the_brain, the_embedder, seed, path, manifest, duration, ledger=ledger,
                   on_start=on_start, on_step=on_step, checkpoint_every=checkpoint_every, config=config,
                   ceiling=ceiling)


def run_ahead(brain, settings):
    """A model brain that fetches answers ahead of the clock (`lookahead` > 0), else `brain`."""
    from smallville.sim.runahead import Ahead, Prefetched, can_fork

    if settings.is_offline or not settings.lookahead or not can_fork() or not hasattr(brain, "answer_one"):
        return brain
    return Prefetched(Ahead(brain, concurrency=settings.concurrency_limit, lookahead=settings.lookahead))


def apply_fork(sim, fork: dict) -> None:
    """Change history at a fork: another seed from now on (the fork's brain is made with
    it), thoughts put into heads."""
    if fork.get("seed") is not None:
        sim.reseed(fork["seed"])
    for agent_id, thought in fork.get("inject", ()):
        sim.inject(agent_id, thought)


def execute(scenario, brain, embedder, seed: int, path: Path, manifest: dict, until: float, *,
            ledger=None, on_start: Callable | None = None, on_step: Callable[[float], None] | None = None,
            checkpoint_every: float = 3600.0, restore: tuple[Path, dict] | None = None,
            fork: dict | None = None, fork_brain=None, config=None, ceiling: int | None = None) -> RunResult:
    """Simulate to `until`, appending to the run's `events.jsonl` and `answers.jsonl` and
    checkpointing every `checkpoint_every` simulated seconds. With `restore` (a run folder
    and one of its checkpoints) the simulation starts from that checkpoint's state, and the
    logs are taken to hold everything before it. A `fork` ({"t", "seed", "inject"}) changes
    history at its time; from then on `fork_brain` (if given) answers instead of `brain`.
    `config` (a SimConfig) defaults to the one the manifest records, if any (a resumed or
    forked run keeps its parent's knobs), else the paper's. `ceiling` (model runs) caps
    each agent's requests per simulated hour; by default the brain settings'
    `max_requests_per_agent_hour` the manifest records. `on_start(sim, path, manifest)` is
    called once the simulation is built, before it runs."""
    from smallville.brain.budget import BudgetExhausted, Spend
    from smallville.brain.record import RECORD, Recording, recorded_keys, teach
    from smallville.brain.wrappers import ModelUnusable
    from smallville.checkpoint import fault_point, restore as restore_checkpoint, write_checkpoint
    from smallville.sim import Simulation
    from smallville.sim.engine import SimConfig
    from smallville.sim.log import EventLog

    if config is None and manifest.get("config"):
        config = SimConfig.from_dict(manifest["config"])
    if ceiling is None and manifest.get("brain", {}).get("model", "offline") != "offline":
        ceiling = manifest["brain"].get("max_requests_per_agent_hour")

    began = time.perf_counter()
    spent_before = Spend.from_dict(manifest.get("spend"))
    stopped: BudgetExhausted | ModelUnusable | None = None
    start = restore[1]["t"] if restore else 0.0
    with open(path / "events.jsonl", "a", encoding="utf-8") as out, open(path / RECORD, "a", encoding="utf-8") as rec:
        written = recorded_keys(path, os.fstat(rec.fileno()).st_size) if restore else set()
        sim = Simulation(scenario, Recording(brain, rec, written), embedder, seed=seed,
                         log=EventLog(scenario.start, out), config=config)
        if ceiling is not None:                       # the runaway guard
            sim.dispatch.ceiling = ceiling
            sim.dispatch.on_refused = lambda agent, request, limit: sim.emit(
                events.BRAIN_REFUSED, agent, kind=request.kind, ceiling=limit)
        if restore:
            restore_checkpoint(sim, *restore)
            teach(brain, path, os.fstat(rec.fileno()).st_size)

        aheads = []

        def answer_with(the_brain) -> None:
            sim.use_brain(Recording(the_brain, rec, sim.brain.written))
            if hasattr(the_brain, "ahead"):           # run-ahead (sim/runahead.py)
                from smallville.sim.runahead import RunAheadDispatcher

                aheads.append(the_brain.ahead)
                sim.dispatch = RunAheadDispatcher(sim, the_brain.ahead, sim.dispatch)

        def fork_now() -> None:
            apply_fork(sim, fork)
            if fork_brain is not None:
                rec.flush()
                teach(fork_brain, path, os.fstat(rec.fileno()).st_size)
                answer_with(fork_brain)

        if hasattr(brain, "ahead"):
            answer_with(brain)
        if fork and fork["t"] == start:
            if restore[0] != path:                    # a new fork: its first checkpoint, before it changes history
                write_checkpoint(sim, path, {"events.jsonl": os.fstat(out.fileno()).st_size,
                                             RECORD: os.fstat(rec.fileno()).st_size})
            fork_now()
        manifest["config"] = sim.config.to_dict()
        sim.ledger = ledger                            # for live spend in progress displays
        if on_start:
            on_start(sim, path, manifest)

        def step(now: float) -> None:
            if checkpoint_every and now % checkpoint_every == 0 or fork and now == fork["t"]:
                for f in (out, rec):                  # a fork's point is a checkpoint too: its state before the fork
                    f.flush()
                    os.fsync(f.fileno())
                write_checkpoint(sim, path, {"events.jsonl": os.fstat(out.fileno()).st_size,
                                             RECORD: os.fstat(rec.fileno()).st_size})
            if fork and now == fork["t"]:
                fork_now()
            fault_point("kill-at", now)
            if on_step:
                on_step(now)
            if ctrl_c.pressed:
                raise KeyboardInterrupt

        stops = (fork["t"],) if fork and fork["t"] > start else ()
        ctrl_c = CtrlC()
        try:
            with ctrl_c:
                sim.run(until, on_step=step, stops=stops)
            manifest["status"] = "completed"
        except BudgetExhausted as exc:
            stopped = exc
            manifest["status"] = "budget_exhausted"
            manifest["budget_stop"] = {**exc.data(), "at": format_sim(scenario.start, sim.env.now)}
        except ModelUnusable as exc:             # kept and resumable, like a budget stop
            stopped = exc
            manifest["status"] = "failed"
            manifest["error"] = str(exc)
        except KeyboardInterrupt:
            manifest["status"] = "interrupted"
        except BaseException as exc:
            manifest["status"] = "failed"
            manifest["error"] = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            sim.log.flush()
            manifest.update(_final(sim))
            if manifest["status"] == "interrupted":   # Ctrl-C may land between an event's line and its count
                out.flush()
                with open(path / "events.jsonl", "rb") as written:
                    manifest["counts"]["events"] = sum(1 for _ in written)
            for ahead in aheads:
                ahead.close()
            if ledger is not None and ledger.by_kind:
                manifest["usage"] = ledger.to_dict(len(sim.agents), sim.env.now / 3600)
            if aheads:
                stats = Counter()
                for ahead in aheads:
                    stats.update(ahead.stats)           # (adding Counters would drop the zeros)
                manifest.setdefault("usage", {})["run_ahead"] = dict(sorted(stats.items()))
            if ledger is not None:
                total = ledger.total()
                manifest["spend"] = Spend(spent_before.requests + total["calls"],
                                          spent_before.tokens + total["prompt_tokens"] + total["completion_tokens"],
                                          spent_before.usd + total["cost"]).to_dict()
            if stopped is not None:
                manifest["sim_reached"] = format_sim(scenario.start, sim.env.now)
                if "spend" in manifest and isinstance(stopped, BudgetExhausted):   # calls under way included
                    manifest["budget_stop"]["spent"] = manifest["spend"][stopped.which]
            manifest["wall"].update(finished=datetime.now().isoformat(timespec="seconds"),
                                    seconds=round(time.perf_counter() - began, 3))
            write_json_atomic(path / "manifest.json", manifest)
    if stopped is not None:
        checkpoint_before(path, sim.env.now)
    if isinstance(stopped, ModelUnusable):
        raise ModelUnusable(f"{stopped}. What ran is kept: once that is set, go on with: smallville resume {path}")
    return RunResult(path, manifest, sim)


class CtrlC:
    """Ctrl-C during a run: the first press stops it at the end of the step under way (every
    15 simulated minutes, after a checkpoint if one is due), so no state is torn; a second
    press stops it at once. Outside the main thread (no signals there) it does nothing."""

    def __init__(self) -> None:
        self.pressed = False
        self._before = None

    def __enter__(self) -> "CtrlC":
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._before = signal.signal(signal.SIGINT, self._press)
        return self

    def _press(self, signum, frame) -> None:
        import signal
        import sys

        self.pressed = True
        signal.signal(signal.SIGINT, signal.default_int_handler)     # the second press: at once
        sys.stderr.write("\nsmallville: stopping at the end of this step (Ctrl-C again to stop now)\n")

    def __exit__(self, *exc) -> None:
        import signal

        if self._before is not None:
            signal.signal(signal.SIGINT, self._before)


def checkpoint_before(path: Path, t: float) -> None:
    """Cut a run that stopped during the instant `t` back to the instant's start: the
    event log and the record lose the instant's lines, and a checkpoint at `t` (made by
    simulating from the checkpoint before to `t` with the run's own record, no model
    asked) lets `resume` go on from there."""
    from smallville.brain.record import RECORD
    from smallville.checkpoint import checkpoints, write_checkpoint
    from smallville.continuation import simulate_to

    existing = [c for c in checkpoints(path) if c["t"] == t]
    if existing:
        sizes = existing[0]["files"]
    elif t <= 0:
        sizes = {"events.jsonl": 0, RECORD: 0}
    else:
        sim = simulate_to(path, t, strict=True)
        used = sim.brain.served
        lines = iter(range(1, used + 2))
        sizes = {"events.jsonl": _offset(path / "events.jsonl", lambda line: json.loads(line)["t"] >= t),
                 RECORD: _offset(path / RECORD, lambda line: next(lines) > used)}   # the first `used` lines
    for name, size in sizes.items():
        with open(path / name, "r+b") as f:
            f.truncate(size)
    if not existing and t > 0:
        write_checkpoint(sim, path, sizes)


def _offset(file: Path, first_out) -> int:
    """Bytes before the first line for which `first_out(line)` holds (the whole file if none)."""
    offset = 0
    with open(file, "rb") as f:
        for line in f:
            if first_out(line):
                break
            offset += len(line)
    return offset


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


def _recorded_manifest(run_dir: str | Path) -> dict:
    """The manifest of a run to replay (its seed, duration and embedder are the defaults)."""
    from smallville.replay.record import read_manifest

    try:
        return read_manifest(run_dir)
    except SmallvilleError as exc:
        raise type(exc)(f"--replay-from: {exc}") from None


def _embedder_spec(manifest: dict) -> str | None:
    """The `--embedder` value that gives the embedder a manifest names."""
    name = (manifest.get("embedder") or {}).get("name", "")
    if name.startswith("litellm:"):
        return name.removeprefix("litellm:")
    if name.startswith("lexical"):
        return "lexical"
    return "use" if name.startswith("use") else None
