"""A fork, typed: the time a run's history changes (another seed from then on, thoughts put
into heads), and the stops at which a session acts between steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


class Stops:
    """Simulated times at which the simulation stops between steps for an action, as SimPy's
    `run(until)` schedules its stop: a fork's change of history is one. `times()` go to
    `Simulation.run` as its stops; `reach(now)` at each step does what is due then."""

    def __init__(self) -> None:
        self.due: dict[float, Callable[[], None]] = {}

    def at(self, t: float, action: Callable[[], None]) -> None:
        self.due[t] = action

    def times(self) -> tuple[float, ...]:
        return tuple(sorted(self.due))

    def reach(self, now: float) -> None:
        action = self.due.pop(now, None)
        if action is not None:
            action()


@dataclass(frozen=True)
class Fork:
    """Where a fork goes its own way: at `t` seconds since the start (`at`, the date-time),
    with `seed` (None: the parent's) and `inject`ed thoughts (agent id, thought); its
    `parent` run (id and path) and the time of the checkpoint it `restored` from."""

    t: float
    at: str
    seed: int | None = None
    inject: tuple[tuple[str, str], ...] = ()
    parent_id: str = ""
    parent_path: str = ""
    restored: str | None = None

    @classmethod
    def of(cls, data: dict | None) -> Fork | None:
        """The fork a manifest's `fork` records (None: the run is no fork)."""
        if not data:
            return None
        parent = data.get("parent") or {}
        return cls(
            data["t"],
            data.get("at", ""),
            data.get("seed"),
            tuple(tuple(i) for i in data.get("inject", ())),
            parent.get("run_id", ""),
            parent.get("path", ""),
            data.get("restored"),
        )

    def to_dict(self) -> dict:
        """As the manifest keeps it."""
        return {
            "t": self.t,
            "at": self.at,
            "seed": self.seed,
            "inject": [list(i) for i in self.inject],
            "parent": {"run_id": self.parent_id, "path": self.parent_path},
            "restored": self.restored,
        }

    def apply(self, sim) -> None:
        """Change history now: another seed from now on (the fork's brain is made with it),
        thoughts put into heads."""
        if self.seed is not None:
            sim.reseed(self.seed)
        for agent_id, thought in self.inject:
            sim.inject(agent_id, thought)

    def schedule(self, stops: Stops, begin: float, change: Callable[[], None]) -> None:
        """Have `change` (the fork applied, and what goes with it) happen at the fork's time,
        for a simulation that begins at `begin`: at once if that is the fork's time, at a
        stop if it comes later, never if it has passed."""
        if self.t == begin:
            change()
        elif self.t > begin:
            stops.at(self.t, change)
