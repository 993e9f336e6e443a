"""A pilot: a short run on the real model, read as rates that the estimate scales up.

A model's answers change what agents do next, so the offline brain's window can be far
from what a model sends. A pilot measures the model: the calls, prompt and completion
tokens of each request kind per agent per simulated hour, after the first instant. The
first instant (each agent's day plan, the ratings of its seed memories, its first
breakdown: once per agent per day, not per hour) is not a rate. Its requests and prompts
come from the offline simulation, because they do not depend on any answer yet. Its
completions are sized at the pilot's average for each kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from smallville.errors import RunError, SmallvilleError, UsageError
from smallville.run.fork import Fork
from smallville.run.manifest import read_manifest
from smallville.timefmt import parse_datetime

FIGURES = ("requests", "prompt_tokens", "completion_tokens")


@dataclass(frozen=True)
class Pilot:
    """What a recorded run on a model sent (`requests` are model calls, retries included)."""

    path: Path
    agents: int
    hours: float  # simulated hours its usage covers
    from_start: bool  # its usage includes the scenario's first instant
    by_kind: dict  # kind -> {requests, prompt_tokens, completion_tokens}

    @classmethod
    def load(cls, run_dir: str | Path) -> Pilot:
        """The pilot of run directory `run_dir`. A resumed or forked run's usage covers only
        what it ran since its last resume or its fork."""
        run_dir = Path(run_dir)
        try:
            manifest = read_manifest(run_dir)
            usage = manifest.usage["by_kind"]
            start, reached = parse_datetime(manifest.sim_start), parse_datetime(manifest.sim_reached)
            agents = len(manifest.agents)
            fork = Fork.of(manifest.fork)
            began = parse_datetime(fork.at if fork else manifest.resumed[-1]["from"] if manifest.resumed else start)
        except (SmallvilleError, ValueError, KeyError, TypeError, IndexError):
            raise UsageError(
                f"--from {run_dir}: not a run on a model (its manifest has no usage by request kind)"
            ) from None
        hours = (reached - began).total_seconds() / 3600
        if hours <= 0 or not agents:
            raise RunError(f"--from {run_dir}: its usage covers no simulated time ({began} to {reached})")
        rows = {
            kind: {
                "requests": row["calls"],
                "prompt_tokens": row["prompt_tokens"],
                "completion_tokens": row["completion_tokens"],
            }
            for kind, row in usage.items()
            if row.get("calls")
        }
        return cls(run_dir, agents, hours, began == start, rows)

    def project(self, first: dict, agents: int, hours: float) -> dict:
        """By kind, what a window of `hours` from the start with `agents` agents sends:
        `first` (the offline first instant, kind -> figures) with completions at the
        pilot's average, plus the pilot's rates after its own first instant. The
        preflight happens once a run, as in the pilot."""
        share = self.agents / agents if self.from_start else 0.0  # of `first`, the pilot's own first instant
        out = {}
        for kind in sorted(set(first) | set(self.by_kind)):
            pilot = self.by_kind.get(kind, dict.fromkeys(FIGURES, 0))
            if kind == "preflight":
                out[kind] = dict(pilot)
                continue
            once = dict(first.get(kind, dict.fromkeys(FIGURES, 0)))
            if pilot["requests"]:
                once["completion_tokens"] = once["requests"] * pilot["completion_tokens"] / pilot["requests"]
            scale = agents * hours / (self.agents * self.hours)
            out[kind] = {f: round(once[f] + max(0.0, pilot[f] - share * once[f]) * scale) for f in FIGURES}
        return {kind: row for kind, row in out.items() if row["requests"] > 0}

    def describe(self) -> dict:
        return {
            "run": str(self.path),
            "agents": self.agents,
            "hours": round(self.hours, 3),
            "from_start": self.from_start,
        }
