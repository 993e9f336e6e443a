"""A run going on: the simulation stepped forward, appending to the run's logs and writing a
checkpoint every interval, until its end, its budget, a model that cannot serve it, or
Ctrl-C; then the manifest says how it ended. Progress displays observe it through
`on_start` and `on_step`; nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Callable

from smallville import events
from smallville.errors import BudgetExhausted, ModelUnusable, Stopped
from smallville.run.folder import EVENTS, RECORD, write_json_atomic
from smallville.run.manifest import Manifest
from smallville.run.run import Run, apply_fork
from smallville.timefmt import format_sim


@dataclass
class RunResult:
    path: object
    manifest: Manifest
    simulation: object


def go(run: Run, stack, embedder, until: float, *, on_start: Callable | None = None,
       on_step: Callable[[float], None] | None = None, checkpoint_every: float = 3600.0,
       restore: tuple | None = None, fork: dict | None = None, fork_stack=None, config=None,
       ceiling: int | None = None) -> RunResult:
    """Simulate `run` to `until` with `stack` (a brain `Stack`), appending to its logs. With
    `restore` (a run folder and one of its checkpoints) the simulation starts from that
    state, and the logs are taken to hold everything before it. A `fork` ({"t", "seed",
    "inject"}) changes history at its time; from then on `fork_stack` (if given) answers.
    `config` (a SimConfig) defaults to the one the manifest records, else the paper's.
    `ceiling` caps each agent's requests per simulated hour (the runaway guard; default: the
    model's settings'). `on_start(sim, path, manifest)` is called once the simulation is
    built, `on_step(now)` after every step."""
    from smallville.brain.budget import Spend
    from smallville.brain.record import Recording, recorded_keys, teach
    from smallville.checkpoint import fault_point, restore as restore_checkpoint, write_checkpoint
    from smallville.sim import Simulation
    from smallville.sim.engine import SimConfig
    from smallville.sim.log import EventLog

    manifest, path, scenario = run.manifest, run.path, run.scenario
    if config is None and manifest.config:
        config = SimConfig.from_dict(manifest.config)
    if ceiling is None and not stack.settings.is_offline:
        ceiling = stack.settings.max_requests_per_agent_hour
    began = time.perf_counter()
    spent_before = Spend.from_dict(manifest.spend)
    usage_before = manifest.usage
    stopped: BudgetExhausted | ModelUnusable | None = None
    start = restore[1]["t"] if restore else 0.0
    stacks = [stack] + ([fork_stack] if fork_stack is not None else [])
    with open(path / EVENTS, "a", encoding="utf-8") as out, open(path / RECORD, "a", encoding="utf-8") as rec:
        written = recorded_keys(path, os.fstat(rec.fileno()).st_size) if restore else set()
        sim = Simulation(scenario, Recording(stack.brain, rec, written), embedder, seed=manifest.seed,
                         log=EventLog(scenario.start, out), config=config)
        if ceiling is not None:                       # the runaway guard
            sim.dispatch.ceiling = ceiling
            sim.dispatch.on_refused = lambda agent, request, limit: sim.emit(
                events.BRAIN_REFUSED, agent, kind=request.kind, ceiling=limit)
        if restore:
            restore_checkpoint(sim, *restore)
            teach(stack.brain, path, os.fstat(rec.fileno()).st_size)

        def lengths() -> dict[str, int]:
            return {EVENTS: os.fstat(out.fileno()).st_size, RECORD: os.fstat(rec.fileno()).st_size}

        def answer_with(this) -> None:
            sim.use_brain(Recording(this.brain, rec, sim.brain.written))
            if this.ahead is not None:                # run-ahead (sim/runahead.py)
                from smallville.sim.runahead import RunAheadDispatcher

                sim.use_dispatcher(RunAheadDispatcher(sim, this.ahead, sim.dispatch))

        def fork_now() -> None:
            apply_fork(sim, fork)
            if fork_stack is not None:
                rec.flush()
                teach(fork_stack.brain, path, os.fstat(rec.fileno()).st_size)
                answer_with(fork_stack)

        saved = [start if restore else None]          # the time of the last checkpoint written

        def checkpoint() -> None:
            for f in (out, rec):
                f.flush()
                os.fsync(f.fileno())
            write_checkpoint(sim, path, lengths())
            saved[0] = sim.env.now

        if stack.ahead is not None:
            answer_with(stack)
        if fork and fork["t"] == start:
            if restore[0] != path:                    # a new fork: its first checkpoint, before it changes history
                checkpoint()
            fork_now()
        manifest.config = sim.config.to_dict()
        sim.ledger = stacks[-1].ledger                 # for live spend in progress displays
        if on_start:
            on_start(sim, path, manifest)

        def step(now: float) -> None:
            if checkpoint_every and now % checkpoint_every == 0 or fork and now == fork["t"]:
                checkpoint()                          # a fork's point is a checkpoint too: its state before the fork
            if fork and now == fork["t"]:
                fork_now()
            fault_point("kill-at", now)
            if on_step:
                on_step(now)
            if ctrl_c.pressed:
                raise Stopped

        stops = (fork["t"],) if fork and fork["t"] > start else ()
        ctrl_c = CtrlC()
        try:
            with ctrl_c:
                sim.run(until, on_step=step, stops=stops)
            manifest.status = "completed"
            if saved[0] != sim.env.now:
                checkpoint()                          # where a longer run (resume --for) goes on from
        except Stopped:                              # Ctrl-C, at the end of a step: the state is whole
            manifest.status = "interrupted"
            if saved[0] != sim.env.now:
                checkpoint()
        except BudgetExhausted as exc:
            stopped = exc
            manifest.status = "budget_exhausted"
            manifest.budget_stop = {**exc.data(), "at": format_sim(scenario.start, sim.env.now)}
        except ModelUnusable as exc:             # kept and resumable, like a budget stop
            stopped = exc
            manifest.status, manifest.error = "failed", str(exc)
        except KeyboardInterrupt:
            manifest.status = "interrupted"
        except BaseException as exc:
            manifest.status, manifest.error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            sim.log.flush()
            for each in stacks:
                each.close()                           # (copies of run-ahead killed first)
            sim.dispatch.close()
            sim.close()                                # its streams' search threads (a later search starts them again)
            _final(manifest, sim)
            if manifest.status == "interrupted":   # Ctrl-C may land between an event's line and its count
                out.flush()
                with open(path / EVENTS, "rb") as lines:
                    manifest.counts["events"] = sum(1 for _ in lines)
            if not stacks[-1].settings.is_offline:
                total = stacks[-1].ledger.total()
                manifest.spend = Spend(spent_before.requests + total["calls"],
                                       spent_before.tokens + total["prompt_tokens"] + total["completion_tokens"],
                                       spent_before.usd + total["cost"]).to_dict()
            _usage(manifest, stacks, usage_before, len(sim.agents), sim.env.now / 3600)
            if stopped is not None:
                manifest.sim_reached = format_sim(scenario.start, sim.env.now)
                if manifest.spend and isinstance(stopped, BudgetExhausted):   # calls under way included
                    manifest.budget_stop["spent"] = manifest.spend[stopped.which]
            manifest.wall.update(finished=datetime.now().isoformat(timespec="seconds"),
                                 seconds=round(time.perf_counter() - began, 3))
            write_json_atomic(path / "manifest.json", manifest.to_dict())
            if hasattr(embedder, "close"):
                embedder.close()
    if stopped is not None:
        run.cut_back(sim.env.now)
    if isinstance(stopped, ModelUnusable):
        raise ModelUnusable(f"{stopped}. What ran is kept: once that is set, go on with: smallville resume {path}")
    return RunResult(path, manifest, sim)


def _final(manifest, sim) -> None:
    manifest.counts = {k: sim.counts.get(k, 0) for k in ("memories", "reflections", "conversations", "actions",
                                                         "replans")}
    if sim.memory.salience:                     # memories held in working memory only, then gone
        manifest.counts["forgotten"] = sim.counts.get("forgotten", 0)
    manifest.counts["events"] = sim.log.count
    end = sim.probe_knowers()
    manifest.sim_reached = format_sim(sim.scenario.start, sim.env.now)
    manifest.probes = {name: {"start": sim.probe_start.get(name, []), "end": end[name]} for name in end}
    manifest.requests = dict(sorted(sim.dispatch.requests.items()))


def _usage(manifest, stacks, before: dict | None, agents: int, hours: float) -> None:
    """The model's usage over all the run's sessions: this one's added to what the
    manifest had (a resumed run's usage adds up)."""
    ledger = stacks[-1].ledger
    for other in stacks[:-1]:
        if other.ledger is not ledger:
            ledger.absorb(other.ledger.to_dict())
    if not ledger.by_kind and not before:
        return
    if before:
        ledger.absorb(before)
    usage = ledger.to_dict(agents, hours)
    aheads = [s.ahead for s in stacks if s.ahead is not None]
    if aheads:
        stats = Counter((before or {}).get("run_ahead", {}))
        for ahead in aheads:
            stats.update(ahead.stats)               # (adding Counters would drop the zeros)
        usage["run_ahead"] = dict(sorted(stats.items()))
    manifest.usage = usage


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
