"""The runs under the folder being served: found, summarised, and looked up by a path that
must stay inside the folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

from smallville.errors import Outside, SmallvilleError
from smallville.run.folder import EVENTS
from smallville.run.manifest import read_manifest

DEPTH = 4  # runs/NAME, runs/experiments/EXP/RUN, ... : how deep to look for runs


class RunsRoot:
    """The served folder: `find(rel)` is the run at a relative path, `summaries()` all of them."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()

    def find(self, rel: str | None) -> Path:
        """The run folder at `rel` (a path relative to the root, `/`-separated); anything
        absolute, leaving the root (`..`, a symbolic link out) or not a run: Outside."""
        if not rel or "\0" in rel:
            raise Outside(f"no run {rel!r} under {self.root.name}/")
        path = (self.root / rel).resolve()
        if rel.startswith(("/", "\\")) or ":" in rel or not path.is_relative_to(self.root):
            raise Outside(f"refused: {rel!r} leaves the folder served ({self.root.name}/)")
        if path == self.root or not (path / "manifest.json").is_file():
            raise Outside(f"no run {rel!r} under {self.root.name}/")
        return path

    def id_of(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def run_folders(self) -> list[Path]:
        found = []
        for folder, dirs, files in os.walk(self.root):
            depth = len(Path(folder).relative_to(self.root).parts)
            if "manifest.json" in files and depth:
                found.append(Path(folder))
                dirs[:] = []  # a run's own folders hold no runs
            elif depth >= DEPTH:
                dirs[:] = []
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        return found

    def summaries(self) -> list[dict]:
        """One line of the runs page per run, newest start first."""
        out = [summary(path, self.id_of(path)) for path in self.run_folders()]
        return sorted(out, key=lambda s: (s["started"] or "", s["id"]), reverse=True)


def summary(path: Path, rel: str) -> dict:
    """What the runs page says of a run: scenario, status, simulated time reached, brain, spend."""
    try:
        m = read_manifest(path)
        spend = m.spend or {}
        return {
            "id": rel,
            "run_id": m.run_id,
            "scenario": (m.scenario or {}).get("name", "?"),
            "status": m.status,
            "start": m.sim_start,
            "end": m.sim_end,
            "reached": m.sim_reached or last_time(path / EVENTS),
            "brain": (m.brain or {}).get("model", "offline"),
            "spend": spend.get("usd"),
            "requests": spend.get("requests"),
            "agents": len(m.agents),
            "fork": bool(m.fork),
            "started": (m.wall or {}).get("started"),
            "error": m.error,
        }
    except Exception as exc:  # (a manifest edited by hand: this run unreadable, not the list)
        error = (
            str(exc) if isinstance(exc, SmallvilleError) else f"{path.name}/manifest.json: {type(exc).__name__}: {exc}"
        )
        return {
            "id": rel,
            "scenario": "?",
            "status": "unreadable",
            "error": error,
            "started": None,
            "reached": None,
            "start": None,
            "end": None,
            "brain": None,
            "spend": None,
            "agents": 0,
        }


def last_time(events: Path, tail: int = 1 << 16) -> str | None:
    """The time of the last whole line of an event log, read from its end."""
    try:
        with open(events, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - tail))
            lines = f.read().split(b"\n")[:-1]  # what follows the last newline is torn
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)["time"]
        except (ValueError, KeyError, TypeError):
            continue
    return None
