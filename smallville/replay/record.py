"""A run directory read back: its manifest, its events and, where it can be found, its scenario."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from smallville.errors import RunError, ScenarioError
from smallville.run.manifest import Manifest, read_manifest
from smallville.run.run import agent_named


@dataclass
class RunRecord:
    path: Path
    manifest: Manifest
    events: list[dict]
    scenario: object | None  # smallville.scenario.Scenario, when its files are at hand
    scenario_note: str = ""  # why the scenario is missing or differs, if it does

    @property
    def agents(self) -> dict[str, str]:
        """Agent id -> name (ids alone when the scenario is not at hand)."""
        if self.scenario is not None:
            return {a.id: a.name for a in self.scenario.agents}
        return {a: a for a in self.manifest.agents}

    def agent_id(self, given: str) -> str:
        """The id of the agent `given` names: its id, or its name as `agents` has it, in any case."""
        return agent_named(given, self.agents, self.path)


def load_run(path: str | Path) -> RunRecord:
    """Read a run directory; a torn last line of the event log (a crash mid-write) is ignored."""
    path = Path(path)
    manifest = read_manifest(path)
    events = _read_events(path / "events.jsonl")
    scenario, note = _find_scenario(path, manifest)
    return RunRecord(path, manifest, events, scenario, note)


def _read_events(path: Path) -> list[dict]:
    if not path.is_file():
        raise RunError(f"{path.parent}: the run has no events.jsonl")
    events = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            try:
                events.append(json.loads(line))
            except ValueError:
                if line.endswith("\n"):
                    raise RunError(f"{path}:{number}: not a JSON event") from None
                break  # a torn last line: the run died mid-write
    return events


def _find_scenario(path: Path, manifest: Manifest):
    """The run's own copy of its scenario if it has one, else the file it was run from."""
    from smallville.scenario import load_scenario

    info = manifest.scenario or {}
    candidates = sorted(path.glob("scenario/*.yaml")) + [Path(info.get("path", ""))]
    for candidate in candidates:
        if not candidate.is_file():
            continue
        try:
            scenario = load_scenario(str(candidate))
        except ScenarioError as exc:
            return None, f"the scenario {candidate} no longer loads ({len(exc.problems)} problems)"
        note = (
            ""
            if scenario.sha256 == info.get("sha256")
            else f"the scenario {candidate} has changed since the run; the map may not match"
        )
        return scenario, note
    return None, f"the scenario file {info.get('path')} is not at hand"
