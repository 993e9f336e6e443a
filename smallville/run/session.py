"""A run going on: the simulation stepped forward, appending to the run's logs and writing a
checkpoint every interval, until its end, its budget, a model that cannot serve it, or
Ctrl-C; then the manifest says how it ended. Displays observe it: `on_start(session)` once
it is built, `on_step(now)` after every step, reading the attributes `Session` declares;
nothing here prints.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from smallville import events
from smallville.brain.texts import Texts
from smallville.errors import BudgetExhausted, ModelUnusable, Stopped
from smallville.run.ctrlc import CtrlC
from smallville.run.folder import EVENTS, RECORD, TEXTS, write_json_atomic
from smallville.run.fork import Fork, Stops
from smallville.run.manifest import Manifest
from smallville.run.run import Run, StartPoint
from smallville.timefmt import format_sim

if TYPE_CHECKING:
    from smallville.brain.assembly import Stack
    from smallville.brain.ledger import Ledger
    from smallville.embed.record import RecordedEmbedder
    from smallville.sim import SimConfig, Simulation


@dataclass
class RunResult:
    """A run as a session left it: its folder, its manifest, and its simulation (readable,
    its threads ended)."""

    path: Path
    manifest: Manifest
    simulation: Simulation


class Session:
    """One sitting of a run: its logs open for appending, the recording of the brain's
    answers, the runaway guard, the checkpoints, the fork point and the steps, then the
    manifest written. Made with the brain `stack` that answers first, the run's `embedder`
    and, to go on from a checkpoint, the `start` point; `fork` schedules a change of history.
    `config` (a SimConfig) defaults to the one the manifest records, else the paper's;
    `ceiling` caps each agent's requests per simulated hour (default: the model's settings').

    Declared for displays: `run` (its `path` and `manifest`), `sim`, `ledger` (the spend of
    the brain that answers from now on) and, once it ends, `stopped` (what stopped it early:
    a BudgetExhausted or ModelUnusable, else None)."""

    def __init__(
        self,
        run: Run,
        stack: Stack,
        embedder: RecordedEmbedder,
        *,
        start: StartPoint | None = None,
        config: SimConfig | None = None,
        ceiling: int | None = None,
    ) -> None:
        self.run, self.embedder, self.start = run, embedder, start
        self.stacks = [stack]
        self.stopped: BudgetExhausted | ModelUnusable | None = None
        self.began, self.before = time.perf_counter(), (run.manifest.spend, run.manifest.usage)
        self.saved = start.t if start and start.run == run.path else None  # the last checkpoint in this folder
        self.stops, self.ctrl_c = Stops(), CtrlC()
        self.every: float = 3600.0
        self.on_step: Callable[[float], None] | None = None
        self.out = open(run.path / EVENTS, "a", encoding="utf-8")
        self.rec = open(run.path / RECORD, "a", encoding="utf-8")
        self.texts = Texts(run.path / TEXTS)
        try:
            self.sim = self._simulation(stack, config, ceiling)
        except BaseException:
            self.close()
            raise

    @property
    def ledger(self) -> Ledger:
        return self.stacks[-1].ledger

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the logs (what was written is on disk) and end the embedder's process."""
        self.out.close()
        self.rec.close()
        self.texts.close()
        self.embedder.close()

    # ---- building ------------------------------------------------------------------

    def _simulation(self, stack: Stack, config: SimConfig | None, ceiling: int | None) -> Simulation:
        from smallville.brain.record import Recording, recorded_keys, teach
        from smallville.checkpoint import restore
        from smallville.sim import SimConfig, Simulation
        from smallville.sim.log import EventLog

        manifest, scenario = self.run.manifest, self.run.scenario
        if config is None and manifest.config:
            config = SimConfig.from_dict(manifest.config)
        written = recorded_keys(self.run.path, self._length(self.rec)) if self.start else set()
        sim = Simulation(
            scenario,
            Recording(stack.brain, self.rec, written, self.texts),
            self.embedder,
            seed=manifest.seed,
            log=EventLog(scenario.start, self.out),
            config=config,
        )
        self._guard(sim, stack, ceiling)
        if self.start:
            restore(sim, self.start.run, self.start.head)
            teach(stack.brain, self.run.path, self._length(self.rec))
        if stack.ahead is not None:
            self._answer_with(sim, stack)
        return sim

    @staticmethod
    def _guard(sim: Simulation, stack: Stack, ceiling: int | None) -> None:
        """The runaway guard: a refused request is answered with its safe default, and logged."""
        if ceiling is None and not stack.settings.is_offline:
            ceiling = stack.settings.max_requests_per_agent_hour
        if ceiling is None:
            return
        sim.dispatch.ceiling = ceiling
        sim.dispatch.on_refused = lambda agent, request, limit: sim.emit(
            events.BRAIN_REFUSED, agent, kind=request.kind, ceiling=limit
        )

    def _answer_with(self, sim: Simulation, stack: Stack) -> None:
        """Have `stack` answer from now on, recorded in the run; fetching ahead if it does."""
        from smallville.brain.record import Recording

        sim.use_brain(Recording(stack.brain, self.rec, sim.brain.written, self.texts))
        if stack.ahead is not None:
            from smallville.sim.runahead import RunAheadDispatcher

            sim.use_dispatcher(RunAheadDispatcher(sim, stack.ahead, sim.dispatch))

    @staticmethod
    def _length(f) -> int:
        return os.fstat(f.fileno()).st_size

    # ---- the fork --------------------------------------------------------------------

    def fork(self, fork: Fork, stack: Stack | None = None) -> None:
        """Change history at `fork`'s time (now, if the session begins there); from then on
        `stack`, if given, answers (a new fork's own brain, after its parent's record)."""
        if stack is not None:
            self.stacks.append(stack)
        fork.schedule(self.stops, self.sim.env.now, lambda: self._fork_now(fork, stack))

    def _fork_now(self, fork: Fork, stack: Stack | None) -> None:
        if self.saved != self.sim.env.now:
            self.checkpoint()  # a fork's point is a checkpoint too: its state before the fork
        fork.apply(self.sim)
        if stack is not None:
            from smallville.brain.record import teach

            self.rec.flush()
            teach(stack.brain, self.run.path, self._length(self.rec))
            self._answer_with(self.sim, stack)

    # ---- going -----------------------------------------------------------------------

    def go_to(
        self,
        until: float,
        *,
        checkpoint_every: float = 3600.0,
        on_start: Callable | None = None,
        on_step: Callable[[float], None] | None = None,
    ) -> RunResult:
        """Simulate to `until` seconds since the start, a checkpoint every `checkpoint_every`
        (0: only where the run stops), calling `on_start(self)` first and `on_step(now)` after
        every step. What stopped it early is kept and resumable: a budget, Ctrl-C, and a model
        that cannot serve the run (raised again, saying how to go on, once all is written)."""
        self.every, self.on_step = checkpoint_every, on_step
        self.run.manifest.config = self.sim.config.to_dict()
        # on disk from the start: a killed run resumes with the settings it had (`--set`, a SimConfig)
        write_json_atomic(self.run.path / "manifest.json", self.run.manifest.to_dict())
        if on_start:
            on_start(self)
        try:
            self._simulate(until)
        finally:
            try:
                self._finish()
            finally:
                self.close()
        return self._result()

    def _simulate(self, until: float) -> None:
        manifest = self.run.manifest
        try:
            with self.ctrl_c:
                self.sim.run(until, on_step=self.step, stops=self.stops.times())
            self._ended("completed")
        except Stopped:  # Ctrl-C, at the end of a step: the state is whole
            self._ended("interrupted")
        except (BudgetExhausted, ModelUnusable) as exc:
            self._stopped_by(exc)
        except KeyboardInterrupt:
            manifest.status = "interrupted"
        except BaseException as exc:
            manifest.status, manifest.error = "failed", f"{type(exc).__name__}: {exc}"
            raise

    def step(self, now: float) -> None:
        """The end of a step: what is due now (a fork), a checkpoint if one is due, then the
        displays; Ctrl-C, pressed meanwhile, stops the run here."""
        from smallville.checkpoint import fault_point

        self.stops.reach(now)
        if self.every and now % self.every == 0 and self.saved != now:
            self.checkpoint()
        fault_point("kill-at", now)
        if self.on_step:
            self.on_step(now)
        if self.ctrl_c.pressed:
            raise Stopped

    def checkpoint(self) -> None:
        """The state now, with the logs' lengths, once the logs are on disk."""
        from smallville.checkpoint import write_checkpoint

        for f in (self.texts, self.out, self.rec):  # the texts first: the record refers to them
            f.flush()
            if f.fileno() is not None:
                os.fsync(f.fileno())
        lengths = {EVENTS: self._length(self.out), RECORD: self._length(self.rec), TEXTS: self.texts.size()}
        write_checkpoint(self.sim, self.run.path, lengths)
        self.saved = self.sim.env.now

    def _ended(self, status: str) -> None:
        """It ended whole: a checkpoint where it ended, for a longer run (`resume --for`) to go on from."""
        self.run.manifest.status = status
        if self.saved != self.sim.env.now:
            self.checkpoint()

    def _stopped_by(self, exc: BudgetExhausted | ModelUnusable) -> None:
        """Stopped mid-instant, by its budget or its model: kept and resumable."""
        manifest = self.run.manifest
        self.stopped = exc
        if isinstance(exc, BudgetExhausted):
            manifest.status = "budget_exhausted"
            manifest.budget_stop = {**exc.data(), "at": format_sim(self.run.scenario.start, self.sim.env.now)}
        else:
            manifest.status, manifest.error = "failed", str(exc)

    # ---- finishing -------------------------------------------------------------------

    def _finish(self) -> None:
        """End the brains and threads, then write the manifest: counts, spend and usage."""
        sim, manifest = self.sim, self.run.manifest
        sim.log.flush()
        for each in self.stacks:
            each.close()  # (copies of run-ahead killed first)
        sim.dispatch.close()
        sim.close()  # its streams' search threads (a later search starts them again)
        _final(manifest, sim)
        if manifest.status == "interrupted":  # Ctrl-C may land between an event's line and its count
            self.out.flush()
            with open(self.run.path / EVENTS, "rb") as lines:
                manifest.counts["events"] = sum(1 for _ in lines)
        self._spend()
        _usage(manifest, self.stacks, self.before[1], len(sim.agents), sim.env.now / 3600)
        manifest.answers = _answers(manifest, sim)
        if self.stopped is not None:
            manifest.sim_reached = format_sim(sim.scenario.start, sim.env.now)
            if manifest.spend and isinstance(self.stopped, BudgetExhausted):  # calls under way included
                manifest.budget_stop["spent"] = manifest.spend[self.stopped.which]
        manifest.wall.update(
            finished=datetime.now().isoformat(timespec="seconds"), seconds=round(time.perf_counter() - self.began, 3)
        )
        write_json_atomic(self.run.path / "manifest.json", manifest.to_dict())
        self.embedder.close()

    def _spend(self) -> None:
        """What the model was sent over all the run's sessions: this one's added to the manifest's."""
        from smallville.brain.budget import Spend

        if self.stacks[-1].settings.is_offline:
            return
        before, total = Spend.from_dict(self.before[0]), self.ledger.total()
        self.run.manifest.spend = Spend(
            before.requests + total["calls"],
            before.tokens + total["prompt_tokens"] + total["completion_tokens"],
            before.usd + total["cost"],
        ).to_dict()

    def _result(self) -> RunResult:
        """The result, once the logs are closed: a run stopped mid-instant is cut back to its start."""
        path = self.run.path
        if self.stopped is not None:
            self.run.cut_back(self.sim.env.now)
        if isinstance(self.stopped, ModelUnusable):
            raise ModelUnusable(
                f"{self.stopped}. What ran is kept: once that is set, go on with: smallville resume {path}"
            )
        return RunResult(path, self.run.manifest, self.sim)


def _final(manifest: Manifest, sim: Simulation) -> None:
    """The manifest's counts, probes and requests as the simulation ends."""
    manifest.counts = {
        k: sim.counts.get(k, 0) for k in ("memories", "reflections", "conversations", "actions", "replans")
    }
    if sim.memory.salience:  # memories held in working memory only, then gone
        manifest.counts["forgotten"] = sim.counts.get("forgotten", 0)
    manifest.counts["events"] = sim.log.count
    end = sim.probe_knowers()
    manifest.sim_reached = format_sim(sim.scenario.start, sim.env.now)
    manifest.probes = {name: {"start": sim.probe_start.get(name, []), "end": end[name]} for name in end}
    manifest.requests = dict(sorted(sim.dispatch.requests.items()))


def _usage(manifest: Manifest, stacks: list[Stack], before: dict | None, agents: int, hours: float) -> None:
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
            stats.update(ahead.stats)  # (adding Counters would drop the zeros)
        usage["run_ahead"] = dict(sorted(stats.items()))
    manifest.usage = usage


def _answers(manifest, sim) -> dict | None:
    """How well the model served the run, by request kind (none for the offline brain):
    the answers valid as given, repaired, fallen back or given by the runaway guard, and the
    calls whose answer was cut off at max_tokens (`usage`)."""
    if (manifest.brain or {}).get("name") == "offline":
        return None
    usage = (manifest.usage or {}).get("by_kind", {})
    return {
        kind: {**row, "cut": int(usage.get(kind, {}).get("cut", 0))} for kind, row in sim.dispatch.outcomes().items()
    }
