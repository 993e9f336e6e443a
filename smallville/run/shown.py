"""Which state of a run answers for a time asked (the serve panel, `interview`): the exact one,
simulated on from the nearest saved state, or, when going on would cost too much (a big town),
that saved state as it is, said so: a checkpoint's, or before the first, the town's start."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta

from smallville.run.run import Run

# Going on from a saved state costs each agent its first instant (its stream loaded, the hour's
# block decomposed: as much as about 40 simulated minutes, measured on the_ville and a generated
# 1,000-agent town, about 2 us an agent-second on a 2-core machine), then each second to go.
FIRST = 2400.0
# The most agent-seconds simulated before the saved state is shown instead (about 0.5 s): the_ville's
# 25 agents always go on (150,000 at most with hourly checkpoints, the first hour included).
EXACT_WORK = 250_000.0


@dataclass(frozen=True)
class Shown:
    """The state for the time `asked`: of time `t`; `saved`: a saved state as it is (a
    checkpoint's or, with `t` 0 and no checkpoint before `asked`, the town's start: seed
    memories stored, no one's day begun), not simulated on to `asked`."""

    asked: float
    t: float
    saved: bool = False

    @property
    def kind(self) -> str:
        """`exact`, `checkpoint` or `start`: the state used, as the JSON says it."""
        if not self.saved:
            return "exact"
        return "checkpoint" if self.t > 0 else "start"

    def fields(self, run: Run) -> dict:
        """What a panel or an interview says of its state: `t`, `asked`, `state` (`kind`), and a
        `note` for people when it is not the time asked."""
        out = {"t": self.t, "asked": self.asked, "state": self.kind}
        if self.kind == "checkpoint":
            out["note"] = f"as of {clock(run, self.t)}, the last saved state; the clock is at {clock(run, self.asked)}"
        elif self.kind == "start":
            out["note"] = (
                f"as of {clock(run, 0.0)}, the town's start (seed memories, no one's day begun); "
                f"the clock is at {clock(run, self.asked)}"
            )
        return out


def shown(run: Run, t: float, most: float = EXACT_WORK) -> Shown:
    """The state for `t`: exact, or the nearest saved state at or before it when going on from
    there to `t` would cost more than `most` agent-seconds (`FIRST` and the seconds to go, for
    each agent; `math.inf`: always exact). A time outside the run is left to `state` to refuse."""
    if math.isinf(most) or not 0 <= t <= run.reached():
        return Shown(t, t)
    start = run.start_point(t)
    since = start.t if start else 0.0
    if start is not None and since == t:
        return Shown(t, t)
    if len(run.manifest.agents) * (FIRST + t - since) > most:
        return Shown(t, since, saved=True)
    return Shown(t, t)


def state(run: Run, choice: Shown):
    """The run's `Simulation` for `choice`, in memory (close it after: `Run.state_at`)."""
    return run.saved_state(choice.t) if choice.saved else run.state_at(choice.t)


def clock(run: Run, t: float) -> str:
    """Simulated second `t` of `run` as the clock shows it, `14:30`."""
    return (run.start + timedelta(seconds=t)).strftime("%H:%M")
