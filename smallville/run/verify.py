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
            raise Differs(f"events.jsonl line {self.count} ({got['time']}): the run has "
                          f"{want.strip() or 'no line'}; re-simulated: {text.strip()}")

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


def verify(run_dir: str | Path) -> Verdict:
    """Re-simulate a run from its start and compare it with what it wrote."""
    from smallville.brain.record import Replaying
    from smallville.checkpoint import checkpoints, digest, load_state
    from smallville.run.run import Run, apply_fork
    from smallville.sim import SimConfig, Simulation
    from smallville.sim.log import EventLog

    run = Run.open(run_dir)
    run_dir, scenario, manifest = run.path, run.scenario, run.manifest
    saved = {c["t"]: c for c in checkpoints(run_dir)}
    if not saved and any(True for _ in checkpoints(run_dir, schema=None)):
        raise RunError(f"{run_dir} was written by an older smallville: its checkpoints hold no state to compare")
    until = run.reached()
    log = _Compare(run_dir / "events.jsonl", scenario.start)
    sim = Simulation(scenario, Replaying(run_dir), run.embedder(write=False), seed=manifest.seed,
                     config=SimConfig.from_dict(manifest.config), log=EventLog(scenario.start, log))
    fork = manifest.fork
    checked = 0

    def step(now: float) -> None:
        nonlocal checked
        if now in saved:
            state = sim.get_state()
            if digest(state, saved[now]["schema"]) != saved[now]["digest"]:     # as its schema defines it
                raise Differs(f"checkpoint {saved[now]['time']}: the state differs at "
                              f"{first_difference(load_state(run_dir, saved[now]), json.loads(json.dumps(state)))}")
            checked += 1
        if fork and now == fork["t"]:
            apply_fork(sim, fork)

    try:
        sim.run(until, on_step=step, stops=tuple(sorted(saved)) + ((fork["t"],) if fork else ()))
        rest = log.rest()
        if rest.strip():
            first = rest.splitlines()[0].decode("utf-8", "replace")
            raise Differs(f"events.jsonl line {log.count + 1}: the run goes on past where the re-simulation "
                          f"ended: {first}")
    except Differs as exc:
        return Verdict(log.count, checked, str(exc))
    except RunError:
        raise
    except Exception as exc:           # a request the record lacks, ...
        return Verdict(log.count, checked, f"the re-simulation could not go on: {exc}")
    finally:
        log.lines.close()
        sim.close()
    return Verdict(log.count, checked)
