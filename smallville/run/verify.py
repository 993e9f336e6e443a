"""`smallville verify RUN_DIR`: the proof that a run reproduces. It re-simulates the run from
its start with the answers of its own record (no model), and checks the event log byte for
byte and every checkpoint's state as it goes (its digest as the checkpoint's schema defines
it, `smallville.checkpoint.hashing`), stopping at the first difference.

It is a proof, not the way back into a run (that is a checkpoint, `Run.start_point`): so a
run written before a change in the engine's behaviour still resumes, forks and is
inspected, though it no longer verifies.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from smallville.errors import Differs, RunError
from smallville.run.fork import Stops


@dataclass
class Verdict:
    """What `verify` found: `difference` is None when the run reproduced."""

    events: int
    checkpoints: int
    difference: str | None = None


class _Compare:
    """A log file that compares each line written to the run's own, in order."""

    def __init__(self, path: Path, start) -> None:
        self.lines = open(path, "rb")
        self.start = start
        self.count = 0

    def write(self, text: str) -> None:
        self.count += 1
        want = self.lines.readline().decode("utf-8")
        if text != want:
            got = json.loads(text)
            raise Differs(
                f"events.jsonl line {self.count} ({got['time']}): the run has "
                f"{want.strip() or 'no line'}; re-simulated: {text.strip()}"
            )

    def flush(self) -> None:
        pass

    def rest(self) -> bytes:
        return self.lines.read()


def first_difference(a, b, path: str = "") -> str:
    """Where two JSON values first differ, as a dotted path (`agents.ann_lee.plan[3]`)."""
    if type(a) is not type(b):
        return path or "(the whole state)"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b or a[key] != b[key]:
                return first_difference(a.get(key), b.get(key), f"{path}.{key}" if path else key)
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path} (length {len(a)}, re-simulated {len(b)})"
    return path or "(the whole state)"


class _Checked:
    """The run's checkpoints, by time, each compared with the re-simulated state as it is reached."""

    def __init__(self, run_dir: Path) -> None:
        from smallville.checkpoint import checkpoints

        self.run_dir, self.count = run_dir, 0
        self.saved = {c.t: c for c in checkpoints(run_dir)}
        if not self.saved and any(True for _ in checkpoints(run_dir, schema=None)):
            raise RunError(f"{run_dir} was written by an older smallville: its checkpoints hold no state to compare")

    def compare(self, sim, now: float) -> None:
        from smallville.checkpoint import digest, load_state

        head = self.saved.get(now)
        if head is None:
            return
        state = sim.get_state()
        if digest(state, head.schema) != head.digest:  # as its schema defines it
            raise Differs(
                f"checkpoint {head.time}: the state differs at "
                f"{first_difference(load_state(self.run_dir, head), json.loads(json.dumps(state)))}"
            )
        self.count += 1


def verify(run_dir: str | Path) -> Verdict:
    """Re-simulate a run from its start and compare it with what it wrote."""
    from smallville.brain.record import Replaying
    from smallville.run.run import Run
    from smallville.sim import SimConfig, Simulation
    from smallville.sim.log import EventLog

    run = Run.open(run_dir)
    checked = _Checked(run.path)
    log = _Compare(run.path / "events.jsonl", run.scenario.start)
    sim = Simulation(
        run.scenario,
        Replaying(run.path),
        run.embedder(write=False),
        seed=run.manifest.seed,
        config=SimConfig.from_dict(run.manifest.config),
        log=EventLog(run.scenario.start, log),
    )
    stops = Stops()
    if run.fork:
        run.fork.schedule(stops, 0.0, lambda: run.fork.apply(sim))

    def step(now: float) -> None:
        checked.compare(sim, now)  # the state before a fork changes it
        stops.reach(now)

    try:
        sim.run(run.reached(), on_step=step, stops=tuple(sorted(set(checked.saved) | set(stops.times()))))
        _no_more(log)
    except Differs as exc:
        return Verdict(log.count, checked.count, str(exc))
    except RunError:
        raise
    except Exception as exc:  # a request the record lacks, ...
        return Verdict(log.count, checked.count, f"the re-simulation could not go on: {exc}")
    finally:
        log.lines.close()
        sim.close()
    return Verdict(log.count, checked.count)


def _no_more(log: _Compare) -> None:
    """Differs if the run's log goes on past where the re-simulation ended."""
    rest = log.rest()
    if rest.strip():
        first = rest.splitlines()[0].decode("utf-8", "replace")
        raise Differs(f"events.jsonl line {log.count + 1}: the run goes on past where the re-simulation ended: {first}")
