"""A run's manifest, typed: what was run, how it ended, and its totals (docs/run-format.md).

Only `Run` writes it; `to_dict` gives the JSON, in a fixed key order, leaving out what a run
has not got (no `fork` for a run that is not one). Keys this version does not know are kept
as they were (`extra`). Everything that reads a run's manifest reads it through `read_manifest`.
"""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path

from smallville import __version__
from smallville.errors import RunError, UsageError
from smallville.timefmt import format_sim

MANIFEST_SCHEMA = 1
SUPPORTED_SCHEMAS = (1,)


@dataclass
class Manifest:
    run_id: str
    scenario: dict  # path, name, sha256
    seed: int
    brain: dict  # the brain's settings (`describe()`): the one that answers now
    embedder: dict  # name, dim, api_base (never a key)
    agents: list[str]
    sim_start: str
    sim_end: str
    duration_s: float
    schema: int = MANIFEST_SCHEMA
    status: str = "running"
    smallville_version: str = __version__
    python: str = field(default_factory=platform.python_version)
    wall: dict = field(default_factory=dict)
    config: dict | None = None  # the SimConfig knobs
    experiment: dict | None = None
    fork: dict | None = None
    brains: list[dict] = field(default_factory=list)  # a run that changed brains: each from its time on
    resumed: list[dict] = field(default_factory=list)
    sim_reached: str | None = None
    counts: dict | None = None
    probes: dict | None = None
    requests: dict | None = None
    usage: dict | None = None  # model usage over all sessions (resumes add up)
    answers: dict | None = None  # by request kind: answers valid, repaired, fallen back, cut
    spend: dict | None = None
    budget_stop: dict | None = None
    error: str | None = None
    extra: dict = field(default_factory=dict)

    ORDER = (
        "schema",
        "run_id",
        "status",
        "scenario",
        "seed",
        "brain",
        "brains",
        "embedder",
        "agents",
        "sim_start",
        "sim_end",
        "duration_s",
        "sim_reached",
        "smallville_version",
        "python",
        "config",
        "experiment",
        "fork",
        "resumed",
        "counts",
        "probes",
        "requests",
        "usage",
        "answers",
        "spend",
        "budget_stop",
        "error",
        "wall",
    )

    def to_dict(self) -> dict:
        out = {}
        for name in self.ORDER:
            value = getattr(self, name)
            if value is not None and value != []:
                out[name] = value
        return {**out, **self.extra}

    @classmethod
    def from_dict(cls, data: dict) -> Manifest:
        known = {f.name for f in fields(cls)} - {"extra"}
        return cls(
            **{k: v for k, v in data.items() if k in known}, extra={k: v for k, v in data.items() if k not in known}
        )

    def brain_at(self, t: float) -> dict:
        """The brain that answered at `t` seconds since the start (the last to take over by then)."""
        return next((b["brain"] for b in reversed(self.brains) if b["t"] <= t), self.brain)

    def switch_brain(self, t: float, brain: dict) -> None:
        """From `t` seconds since the start on, `brain` answers: it becomes the run's `brain`,
        and `brains` says which answered when ({"t", "at", "brain"} each, in order)."""
        earlier = [b for b in self.brains if b["t"] < t] or [{"t": 0.0, "at": self.sim_start, "brain": self.brain}]
        self.brains = earlier + [{"t": t, "at": self.when(t), "brain": brain}]
        self.brain = brain

    # ---- simulated time ---------------------------------------------------------------

    @property
    def start(self) -> datetime:
        return datetime.fromisoformat(self.sim_start)

    def seconds(self, when: str) -> float:
        """Seconds since the start of a simulated date-time `YYYY-MM-DD HH:MM[:SS]`."""
        return (datetime.fromisoformat(when) - self.start).total_seconds()

    def when(self, t: float) -> str:
        return format_sim(self.start, t)


def read_manifest(path: str | Path) -> Manifest:
    """The manifest of the run directory `path`. Not a run directory: UsageError (the user
    named the wrong folder); an unreadable manifest or a foreign schema: RunError."""
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(f"{path} is not a run directory: it has no manifest.json")
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{manifest_path}: cannot read the manifest: {exc}") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema not in SUPPORTED_SCHEMAS:
        raise RunError(
            f"{path}: run format schema {schema!r} is not supported by this smallville "
            f"(it reads schema {', '.join(map(str, SUPPORTED_SCHEMAS))}); use the version that wrote it"
        )
    try:
        return Manifest.from_dict(data)
    except TypeError as exc:
        raise RunError(f"{manifest_path}: not a whole manifest: {exc}") from None
