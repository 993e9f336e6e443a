"""The line a run opens with: a new run, a resumed one or a fork, and how it got where it starts.

All the wording lives here and takes its facts from the run's manifest (its `fork`, its last
`resumed` entry), so what a continuation did is said the same way whatever does it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from smallville.run.fork import Fork
from smallville.timefmt import format_duration, parse_datetime


def brain_name(settings: dict) -> str:
    """The brain a manifest's `brain` settings name: `offline`, the model, or `replay`."""
    return settings.get("model") if settings.get("name") == "llm" else settings.get("name", "offline")


def opening(manifest, path, brain: str, embedder: str) -> str:
    """One line: the scenario, what this run is and where it starts, to when, its seed, brain,
    embedder and folder. `manifest` is the run's `Manifest`."""
    start = parse_datetime(manifest.sim_start)
    end = _when(start, manifest.duration_s)
    about = f"brain {brain}, embedder {embedder}; writing {path}"
    name = manifest.scenario["name"]
    resumed = (manifest.resumed or [None])[-1]
    if resumed:
        return f"{name}: {_resuming(resumed, end)}; seed {manifest.seed}, {about}"
    if manifest.fork:
        return f"{name}: {_forked(Fork.of(manifest.fork), manifest.seed, end)}, {about}"
    return (
        f"{name}: {len(manifest.agents)} agents, "
        f"{format_duration(manifest.duration_s)} from {_when(start)}, seed {manifest.seed}, {about}"
    )


def _forked(fork: Fork, seed: int, end: str) -> str:
    at = parse_datetime(fork.at)
    told = f", {count(len(fork.inject), 'injected thought')}" if fork.inject else ""
    seeded = f"seed {fork.seed} from the fork on" if fork.seed is not None else f"seed {seed}"
    return f"forked from {fork.parent_id} at {_when(at)} ({_rebuilt(at, fork.restored)}){told}; {seeded}, to {end}"


def _resuming(resumed: dict, end: str) -> str:
    if not resumed.get("checkpoint"):
        return f"resuming from the start (no checkpoint had been written) to {end}{_cut(resumed.get('cut') or {}, '')}"
    at = parse_datetime(resumed["from"])
    return f"resuming from the {_when(at)} checkpoint ({_rebuilt(at, resumed.get('restored'))}) to {end}" + _cut(
        resumed.get("cut") or {}, " past the checkpoint"
    )


def count(n: int, thing: str) -> str:
    """A number and a noun that agrees with it: `1 torn line`, `3 torn lines`."""
    return f"{n:,} {thing}{'' if n == 1 else 's'}"


def _when(start: datetime, seconds: float = 0.0) -> str:
    return (start + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M")


def _rebuilt(at: datetime, restored: str | None) -> str:
    """How the state at `at` was rebuilt: from a checkpoint restored (`restored`, its time),
    then re-simulated; or, with no `restored`, re-simulated from the start."""
    if restored is None:
        return "re-simulated from the start"
    checkpoint = parse_datetime(restored)
    if checkpoint == at:
        return "restored from its checkpoint"
    shown = checkpoint.strftime("%H:%M" if checkpoint.date() == at.date() else "%Y-%m-%d %H:%M")
    return f"checkpoint {shown} + {format_duration((at - checkpoint).total_seconds())} re-simulated"


def _cut(cut: dict, where: str) -> str:
    """What a resume cut from the end of the logs, to write it again."""
    parts = [
        count(n, thing)
        for n, thing in (
            (cut.get("torn", 0), "torn line"),
            (cut.get("events", 0), "event"),
            (cut.get("answers", 0), "recorded answer"),
        )
        if n
    ]
    if not parts:
        return ""
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"; log truncated by {listed}{where}"
