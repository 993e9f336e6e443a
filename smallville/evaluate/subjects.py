"""Which runs an evaluation interviews, under which condition, and where it writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from smallville.errors import UsageError


@dataclass
class Subject:
    """A run to interview: its `Run`, the condition it stands for and the group whose
    conditions' answers are compared (an experiment's seed; all runs given by hand are one
    group)."""

    run: object
    condition: str
    group: str

    @property
    def name(self) -> str:
        return self.run.path.name


def find_subjects(paths: list[Path]) -> tuple[list[Subject], Path]:
    """The runs of `paths` (run folders, or one experiment's output folder) and the folder
    the evaluation goes to by default: EXPERIMENT/evaluation, or `evaluation/` beside the
    runs given."""
    from smallville.run import Run

    if not paths:
        raise UsageError("evaluate: name run folders or an experiment's output folder")
    if len(paths) == 1 and paths[0].is_dir() and not (paths[0] / "manifest.json").exists():
        folder = paths[0]
        runs = sorted(p for p in folder.iterdir() if (p / "manifest.json").exists())
        if not runs:
            raise UsageError(f"{folder} is neither a run nor an experiment's folder of runs")
        default_out = folder / "evaluation"
    else:
        runs = list(paths)
        default_out = Path(_common(runs)) / "evaluation"
    opened = [Run.open(p) for p in runs]
    finished = [r for r in opened if r.manifest.status in ("completed", "budget_exhausted", "interrupted")]
    if not finished:
        raise UsageError(f"no finished run among {', '.join(str(p) for p in runs)}")
    experiment = all((r.manifest.experiment or {}).get("condition") for r in finished)
    subjects = []
    for r in finished:
        condition = r.manifest.experiment["condition"] if experiment else r.path.name
        subjects.append(Subject(r, condition, f"seed{r.manifest.seed}" if experiment else "all"))
    seen = {(s.condition, s.group) for s in subjects}
    if len(seen) != len(subjects):
        raise UsageError("two runs stand for the same condition and seed: name each run once")
    agents = {frozenset(s.run.manifest.agents) for s in subjects}
    if len(agents) > 1:
        raise UsageError("the runs are of towns with different people: evaluate runs of one scenario together")
    return subjects, default_out


def _common(paths: list[Path]) -> str:
    import os

    try:
        return os.path.commonpath([str(Path(p).parent) for p in paths])
    except ValueError:  # relative and absolute paths mixed
        return os.path.commonpath([str(Path(p).resolve().parent) for p in paths])
