"""Where a run's time goes: a run under cProfile, its time summed by phase of the agent loop,
by the kind of request the offline brain answered, and by the engine's other parts.

Each figure is the inclusive CPU time of the functions named (what they call counts too, so the
rows overlap and do not add up to the whole), as a share of the profiled run. Profile counts
are of this process alone and stay steady on a loaded machine, where wall times do not; the
profiler roughly doubles the run's time, so time a run without it.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Callable

PARTS = (
    ("phase: perceive", "sim/life.py", ("perceive",)),
    ("phase: react", "sim/life.py", ("react",)),
    ("phase: store (keep a memory)", "sim/engine.py", ("keep",)),
    ("phase: reflect", "sim/life.py", ("reflect",)),
    ("phase: plan (day, decompose, replan)", "sim/life.py", ("plan_day", "decompose", "replan")),
    ("phase: act (act, walk, use)", "sim/life.py", ("act", "walk", "use")),
    ("phase: talk", "sim/life.py", ("converse", "talk_on")),
    ("retrieval", "sim/engine.py", ("retrieve", "retrieve_many")),
    ("embedding", "embed/record.py", ("embed",)),
    ("brain: the whole stack (dispatch)", "sim/dispatch.py", ("answer_batch",)),
    ("brain: offline answers", "brain/offline.py", ("answer",)),
    ("checkpoints", "checkpoint/__init__.py", ("write_checkpoint",)),
    ("event log", "sim/log.py", ("emit",)),
    ("run-ahead copies (in this process)", "sim/copies.py", ("run",)),
)
"""(label, the module's path ending, its functions) of each row."""


def profiled(work: Callable[[], object]) -> tuple[object, pstats.Stats]:
    """`work()` run under cProfile counting CPU time, not wall: its result and the profile."""
    profile = cProfile.Profile(time.process_time)
    result = profile.runcall(work)
    return result, pstats.Stats(profile)


def breakdown(stats: pstats.Stats) -> dict[str, float]:
    """Seconds in each row of PARTS, in each kind of request the offline brain answered
    ("kind: NAME"), and in the whole run ("total")."""
    from smallville.brain.requests import Message

    out, kinds = {"total": stats.total_tt}, set(Message.registry)
    for (path, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.stats.items():
        path = path.replace("\\", "/")
        for label, ending, names in PARTS:
            if path.endswith(ending) and name in names:
                out[label] = out.get(label, 0.0) + cumulative
        if path.endswith("brain/offline.py") and name[1:] in kinds:
            key = f"kind: {name[1:]}"
            out[key] = out.get(key, 0.0) + cumulative
    return out


def table(columns: dict[str, dict[str, float]]) -> str:
    """The breakdowns side by side (a column each: label -> breakdown), as seconds and shares."""
    labels = [label for label, _, _ in PARTS]
    labels += sorted({k for b in columns.values() for k in b if k.startswith("kind: ")})
    out = ["| where (inclusive) | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for label in labels:
        cells = []
        for b in columns.values():
            seconds = b.get(label, 0.0)
            cells.append(f"{seconds:.1f} s ({100 * seconds / b['total']:.1f}%)" if seconds else "-")
        if any(cell != "-" for cell in cells):
            out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("| whole run, profiled | " + " | ".join(f"{b['total']:.1f} s" for b in columns.values()) + " |")
    return "\n".join(out)
