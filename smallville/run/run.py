"""`Run`: one run folder and everything in it. It owns the typed manifest, the event log,
the records of answers and embeddings and the checkpoints; while it goes, a `Session` holds
its brain stack and its `Simulation`. Every way into a run goes through it: `run`,
`resume`, `fork`, `inspect`, `interview`, `verify`, experiments and the Python API.

The way back into a run is a checkpoint: `start_point(t)` finds the nearest one at or
before `t` (a fork's parent's, before the fork's own first), and `state_at(t)` loads it and
simulates on to `t` with the run's recorded answers, in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from smallville.checkpoint.head import Head
from smallville.errors import RunError, SmallvilleError, UnknownAgent, UsageError
from smallville.run.folder import EMBEDDINGS, RECORD, sizes
from smallville.run.fork import Fork, Stops
from smallville.run.manifest import Manifest, read_manifest


@dataclass(frozen=True)
class StartPoint:
    """Where a way back into a run begins: the checkpoint `head` in the folder of `run` (the
    run's own, or a fork's parent's before the fork's own first checkpoint)."""

    run: Path
    head: Head

    @property
    def t(self) -> float:
        return self.head.t

    def offset(self, name: str) -> int:
        """How long the log `name` (events.jsonl, answers.jsonl) of `run` was at the checkpoint."""
        return self.head.files.get(name, 0)


class Run:
    """A run folder: `path`, its `manifest` (typed) and its `scenario` (the copy it keeps,
    read when first needed: following a fork's parents needs only their manifests)."""

    def __init__(self, path: Path, manifest: Manifest, scenario=None) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._scenario = scenario

    @classmethod
    def open(cls, path: str | Path, scenario=None) -> Run:
        """The run in folder `path` (`scenario`: its scenario, if already read: a server keeps
        it). Not a run: UsageError; a damaged one: RunError."""
        path = Path(path)
        manifest = read_manifest(path)
        if not any((path / "scenario").glob("*.yaml")):
            raise RunError(f"{path} keeps no copy of its scenario (it was written by an older smallville)")
        return cls(path, manifest, scenario)

    @property
    def scenario(self):
        if self._scenario is None:
            from smallville.scenario import load_scenario

            self._scenario = load_scenario(str(sorted((self.path / "scenario").glob("*.yaml"))[0]))
        return self._scenario

    def agent_id(self, given: str) -> str:
        """The id of the agent `given` names (`agent_named`), reading the scenario only when
        `given` is not an id."""
        if given in self.manifest.agents:
            return given
        return agent_named(given, {spec.id: spec.name for spec in self.scenario.agents}, self.path)

    @classmethod
    def open_for(cls, path: str | Path, flag: str) -> Run:
        """`open`, with `flag` (such as `--replay-from`) named in its errors."""
        try:
            return cls.open(path)
        except SmallvilleError as exc:
            raise type(exc)(f"{flag}: {exc}") from None

    # ---- time -------------------------------------------------------------------------

    @property
    def start(self) -> datetime:
        return self.manifest.start

    def seconds(self, when: str) -> float:
        return self.manifest.seconds(when)

    def when(self, t: float) -> str:
        return self.manifest.when(t)

    def reached(self) -> float:
        """Seconds since the start that the run covers: where it ended, or, for a run that
        died without saying (killed, a power cut), its last checkpoint."""
        from smallville.checkpoint import last_checkpoint

        if self.manifest.sim_reached:
            return self.seconds(self.manifest.sim_reached)
        saved = last_checkpoint(self.path, schema=None)
        return saved.t if saved else 0.0

    @property
    def fork(self) -> Fork | None:
        """Where the run went its own way from its parent (None: it is no fork)."""
        return Fork.of(self.manifest.fork)

    @property
    def seed_now(self) -> int:
        """The seed its brain answers with now: a fork's own, else the run's."""
        fork = self.fork
        return fork.seed if fork and fork.seed is not None else self.manifest.seed

    def parent(self) -> Run | None:
        """A fork's parent run, if it is still where it was."""
        where = self.fork.parent_path if self.fork else ""
        if where and (Path(where) / "manifest.json").exists():
            return Run.open(where)
        return None

    # ---- the way back in --------------------------------------------------------------

    def start_point(self, at: float) -> StartPoint | None:
        """The checkpoint to start from for time `at`: the run's last at or before `at` whose
        files are all on disk, else (a fork's time before its own first checkpoint) its
        parent's; None: from the beginning. A run whose checkpoints are all of an older
        format cannot be restored: a RunError says so."""
        from smallville.checkpoint import CHECKPOINT_SCHEMA, last_checkpoint

        on_disk = sizes(self.path)
        usable = last_checkpoint(self.path, at, accept=lambda c: all(c.files.get(n, 0) <= on_disk[n] for n in on_disk))
        if usable:
            return StartPoint(self.path, usable)
        parent = self.parent() if self.fork and at <= self.fork.t else None
        if parent is not None:
            return parent.start_point(at)
        old = last_checkpoint(self.path, at, schema=None)
        if old:
            raise RunError(
                f"{self.path} was written by an older smallville: its checkpoints (schema "
                f"{old.schema}) hold no state this version can restore (schema "
                f"{CHECKPOINT_SCHEMA}); run its scenario again, or use the smallville that wrote it"
            )
        return None

    def embedder(self, write: bool = True, process: bool = False):
        """The run's embedder, answering from the run's record of embeddings (and its
        parents') first; `write`: add what it computes to the record; `process`: a model
        that runs here runs in a process of its own (`smallville.embed.process`)."""
        from smallville.embed import make_embedder

        spec, api_base = embedder_spec(self.manifest.embedder)
        bases, run = [], self
        while (run := run.parent()) is not None:
            bases.append(run.path / EMBEDDINGS)
        return make_embedder(
            spec, api_base=api_base, record=self.path / EMBEDDINGS, base=bases, write=write, process=process
        )

    def state_at(self, at: float | None = None, strict: bool = False):
        """The run's `Simulation` at `at` seconds since its start (default: where it got
        to), rebuilt in memory from the nearest checkpoint before: nothing of the run is
        written or changed. Answers come from the record of the run whose checkpoint it is;
        what that lacks goes to the run's brain or, with `strict`, is an error. Close it
        (`close`, or `with run.state_at(t) as sim:`) to end the threads its brain holds."""
        at = self.reached() if at is None else at
        self._covered(at)
        start = self.start_point(at)
        sim = self._rebuilt(start, strict)
        try:
            stops = Stops()
            own = start is None or start.run == self.path  # else the parent's history, before the fork
            if self.fork and own:
                self.fork.schedule(stops, start.t if start else 0.0, lambda: self.fork.apply(sim))
            sim.run(max(at, 1e-6), on_step=stops.reach, stops=stops.times())
        except BaseException:
            sim.close()
            raise
        return sim

    def saved_state(self, at: float):
        """The run's nearest saved state at or before `at` seconds, as it was saved: a checkpoint
        restored and not simulated on or, before the first checkpoint, the town at its start
        (seed memories stored, no one's day begun). Cheap on any town; `smallville.run.shown`
        says when to use it instead of `state_at`. Close it as `state_at`'s."""
        self._covered(at)
        start = self.start_point(at)
        sim = self._rebuilt(start, strict=False)
        try:
            if start is None:
                sim.seeded()
        except BaseException:
            sim.close()
            raise
        return sim

    def _covered(self, at: float) -> None:
        """Refuse a time outside the run (a UsageError that says what it covers)."""
        reached = self.reached()
        if not 0 <= at <= reached:
            raise UsageError(
                f"{self.when(at)} is outside the time {self.path} covers: "
                f"{self.manifest.sim_start} to {self.when(reached)}"
            )

    def _rebuilt(self, start: StartPoint | None, strict: bool):
        """A simulation of the run in memory, at `start` (None: its beginning), answering from
        the record of the run whose checkpoint that is (see `state_at`)."""
        from smallville.brain.assembly import assemble, settings_of
        from smallville.checkpoint import restore
        from smallville.sim import SimConfig, Simulation
        from smallville.sim.log import EventLog, Nowhere

        source = start.run if start else self.path
        seed = self.seed_now if source == self.path else self.manifest.seed
        stack = assemble(
            settings_of(self.manifest.brain),
            seed,
            replay=(source, start.offset(RECORD) if start else 0),
            live=not strict,
        )
        try:
            sim = Simulation(
                self.scenario,
                stack.brain,
                self.embedder(write=False),
                seed=self.manifest.seed,
                config=SimConfig.from_dict(self.manifest.config),
                log=EventLog(self.scenario.start, Nowhere()),
            )
        except BaseException:
            stack.close()
            raise
        sim.on_close(stack.close)
        try:
            if start:
                restore(sim, start.run, start.head)
        except BaseException:
            sim.close()
            raise
        return sim

    # ---- provenance -------------------------------------------------------------------

    def why(
        self, agent: str, at: float | None = None, event: int | None = None, depth: int = 1, kind: str | None = None
    ) -> dict:
        """Why `agent` did what it did at log line `event` (1-based), or in its last decision at
        or before `at` seconds (of `kind`, if given: `say`, `plan`, ...): the request, the
        memories it was shown with their scores, and where each came from, followed back `depth`
        steps (`smallville.why`). From the run's files alone: nothing is restored or asked."""
        from smallville.why import explain

        return explain(self, agent, at=at, event=event, depth=depth, kind=kind)

    def probe_chain(self, probe: str, agent: str) -> dict:
        """How the news of the scenario's probe `probe` reached `agent`: the conversations from
        its source, with times (`smallville.why.probe_chain`)."""
        from smallville.why import probe_chain

        return probe_chain(self, probe, agent)

    def probe_tree(self, probe: str) -> dict:
        """Who told whom the news of the scenario's probe `probe`, and when: every agent who came
        to know it (`smallville.why.probe_tree`)."""
        from smallville.why import probe_tree

        return probe_tree(self, probe)

    def cut_back(self, t: float) -> None:
        """Cut a run that stopped during the instant `t` back to the instant's start: the
        logs lose the instant's lines, and a checkpoint at `t` (made by simulating from the
        checkpoint before to `t` with the run's own record, no model asked) lets `resume`
        go on from there."""
        import json

        from smallville.checkpoint import checkpoints, write_checkpoint
        from smallville.run.folder import EVENTS, TEXTS, offset, truncate

        existing = [c for c in checkpoints(self.path) if c.t == t]
        if existing:
            lengths = existing[0].files
        elif t <= 0:
            lengths = {EVENTS: 0, RECORD: 0, TEXTS: 0}
        else:
            with self.state_at(t, strict=True) as sim:  # (still readable once closed)
                used = sim.brain.served
            lines = iter(range(1, used + 2))
            lengths = {
                EVENTS: offset(self.path / EVENTS, lambda line: json.loads(line)["t"] >= t),
                RECORD: offset(self.path / RECORD, lambda line: next(lines) > used),
                TEXTS: sizes(self.path)[TEXTS],  # (texts the cut lines alone used are kept: unused)
            }  # the first `used` lines
        for name, size in lengths.items():
            truncate(self.path / name, size)
        if not existing and t > 0:
            write_checkpoint(sim, self.path, lengths)


def agent_named(given: str, names: dict[str, str], where: Path) -> str:
    """The id of the agent `given` names among `names` (id -> name, as the run's tables show
    them): its id, or its id or name in any case; UnknownAgent, listing the ids, if none is."""
    if given in names:
        return given
    folded = given.strip().casefold()
    found = [a for a in names if a.casefold() == folded] or [a for a, n in names.items() if n.casefold() == folded]
    if not found:
        raise UnknownAgent(f"unknown agent {given!r} in {where}: it has {', '.join(sorted(names))}")
    return found[0]


def embedder_spec(recorded: dict) -> tuple[str, str | None]:
    """The `--embedder` value and api base that give the embedder a manifest names."""
    name = (recorded or {}).get("name", "")
    if name.startswith("litellm:"):
        return name.removeprefix("litellm:"), recorded.get("api_base")
    if name.startswith("lexical"):
        return "lexical", None
    return "use", None
