"""The experiment file: reading and checking it into an `Experiment` of `Condition`s."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields
from pathlib import Path

from smallville.errors import ExperimentError

ABLATIONS = {
    "memory": "retrieval",
    "retrieval": "retrieval",
    "reflection": "reflection",
    "planning": "planning",
    "sharing": "sharing",
}


@dataclass
class Condition:
    """A named set of knobs (SimConfig fields) and the brain its runs use (None: offline). In
    an experiment with `branch:`, a condition differs only after the branch's time: its
    `brain` (None: the parent's; a model name, `offline`, or a mapping of brain settings
    over the parent's) and the thoughts it `inject`s (agent id, thought)."""

    name: str
    brain: str | dict | None
    knobs: dict
    inject: tuple[tuple[str, str], ...] = ()


@dataclass
class Experiment:
    """An experiment file as read: a scenario run for every condition and seed."""

    name: str
    scenario: Path
    duration: float | None
    seeds: list[int]
    conditions: list[Condition]
    out: Path
    embedder: str | None = None
    workers: int = 1
    source: Path | None = None
    evaluate: dict | None = None  # the `evaluate:` block (smallville.evaluate.experiment)
    branch: dict | None = None  # the `branch:` block, read (see `_branch_block`)

    def slots(self) -> list[tuple[Condition, int]]:
        return [(c, s) for c in self.conditions for s in self.seeds]


def load_experiment(path: str | Path) -> Experiment:
    import yaml

    from smallville.timefmt import parse_duration

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ExperimentError(f"{path}: cannot read the experiment file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ExperimentError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ExperimentError(f"{path}: an experiment file is a mapping (name, scenario, seeds, conditions)")
    known = {
        "name",
        "scenario",
        "duration",
        "seeds",
        "embedder",
        "brain",
        "workers",
        "out",
        "base",
        "conditions",
        "grid",
        "description",
        "evaluate",
        "branch",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ExperimentError(f"{path}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    name = str(data.get("name") or path.stem)
    if "scenario" not in data:
        raise ExperimentError(f"{path}: `scenario:` is required (a scenario file)")
    scenario = _find(Path(data["scenario"]), path)
    duration = data.get("duration")
    if duration is not None:
        try:
            duration = parse_duration(str(duration)) if not isinstance(duration, (int, float)) else float(duration)
        except ValueError as exc:
            raise ExperimentError(f"{path}: duration: {exc}") from None
    seeds = _seeds(data.get("seeds", [1]), path)
    base = dict(data.get("base") or {})
    conditions_data = data.get("conditions") or {"default": {}}
    if isinstance(conditions_data, list):
        conditions_data = {str(c): {} if isinstance(c, str) else c for c in conditions_data}
    grid = data.get("grid") or {}
    if not isinstance(grid, dict) or any(not isinstance(v, list) or not v for v in grid.values()):
        raise ExperimentError(f"{path}: `grid:` maps a knob to a non-empty list of values")
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] if grid else [{}]
    conditions = []
    branched = data.get("branch") is not None
    for cname, spec in conditions_data.items():
        if spec is not None and not isinstance(spec, dict):
            raise ExperimentError(f"{path}: condition {cname!r}: expected a mapping of knobs")
        for point in points:
            label = str(cname) + "".join(f"_{k}{_short(v)}" for k, v in point.items())
            merged = {**base, **(spec or {}), **point}
            conditions.append(_condition(label, merged, data.get("brain"), path, branched))
    names = [c.name for c in conditions]
    if len(set(names)) != len(names):
        raise ExperimentError(f"{path}: two conditions share a name")
    out = Path(data["out"]) if data.get("out") else Path("runs") / "experiments" / name
    workers = int(data.get("workers") or 1)
    evaluate = _evaluate_block(data.get("evaluate"), path)
    branch = _branch_block(data.get("branch"), path, conditions)
    return Experiment(
        name, scenario, duration, seeds, conditions, out, data.get("embedder"), workers, path, evaluate, branch
    )


def _branch_block(block, path: Path, conditions: list[Condition]) -> dict | None:
    """`branch: {from: RUN_OR_CONDITION, at: TIME}`: every condition's runs start from the same
    recorded prefix, up to `at` (a date-time, or a duration since the start), and differ
    only after it. From a condition of the experiment: its run of each seed is the parent
    of the others' (which keep the seed); from a run folder: every condition forks it, each
    seed the fork's seed from `at` on. Only a brain, brain settings and injected thoughts
    may differ after the branch: knobs shape the prefix too."""
    from smallville.timefmt import parse_datetime, parse_duration

    if block is None:
        return None
    if not isinstance(block, dict) or set(block) != {"from", "at"}:
        raise ExperimentError(f"{path}: branch: expected {{from: RUN_OR_CONDITION, at: TIME}}")
    at = str(block["at"])
    try:
        parse_datetime(at)
    except ValueError:
        try:
            parse_duration(at)
        except ValueError:
            raise ExperimentError(
                f"{path}: branch.at {at!r}: a simulated date-time (2023-02-13 09:00) or a duration since the start (2h)"
            ) from None
    names = {c.name: c for c in conditions}
    source = str(block["from"])
    if source in names:
        parent, run = names[source], None
    else:
        parent, run = (
            None,
            next((p for p in (Path(source), path.parent / source) if (p / "manifest.json").is_file()), None),
        )
        if run is None:
            raise ExperimentError(
                f"{path}: branch.from {source!r}: neither a condition of this experiment "
                f"({', '.join(names)}) nor a run folder"
            )
    for c in conditions:
        if c.knobs and (parent is None or c.knobs != parent.knobs):
            raise ExperimentError(
                f"{path}: condition {c.name!r}: knobs cannot differ after a branch (they shape the "
                "prefix too); a branched condition sets brain or inject"
            )
    return {"from": source, "at": at, "condition": source if parent else None, "run": str(run) if run else None}


EVALUATE_KEYS = ("judge", "at", "questions", "judge_config", "judge_api_base", "brain", "api_base", "seed")


def _evaluate_block(block, path: Path) -> dict | None:
    """The `evaluate:` block (smallville.evaluate.experiment runs it), its keys checked."""
    if block is None or block is False:
        return None
    if block is True:
        return {}
    if not isinstance(block, dict):
        raise ExperimentError(f"{path}: evaluate: expected a mapping such as {{judge: MODEL, at: TIME}}")
    unknown = sorted(set(block) - set(EVALUATE_KEYS))
    if unknown:
        raise ExperimentError(
            f"{path}: evaluate: unknown key(s) {', '.join(unknown)} (known: {', '.join(EVALUATE_KEYS)})"
        )
    return dict(block)


def _find(scenario: Path, source: Path) -> Path:
    for candidate in (scenario, source.parent / scenario, source.parent.parent / scenario):
        if candidate.is_file():
            return candidate
    raise ExperimentError(f"{source}: scenario {scenario} not found (looked in the working folder and beside the file)")


def _seeds(value, path: Path) -> list[int]:
    try:
        if isinstance(value, int):
            return list(range(1, value + 1))
        if isinstance(value, str) and "-" in value:
            lo, hi = (int(x) for x in value.split("-", 1))
            return list(range(lo, hi + 1))
        seeds = [int(s) for s in (value if isinstance(value, list) else [value])]
    except (TypeError, ValueError):
        raise ExperimentError(f'{path}: seeds: expected a list of whole numbers, a range "1-5" or a count') from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ExperimentError(f"{path}: seeds: expected distinct seeds")
    return seeds


def _short(v) -> str:
    return "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _condition(name: str, spec: dict, default_brain, path: Path, branched: bool = False) -> Condition:
    from smallville.sim.engine import SimConfig

    allowed = {f.name for f in fields(SimConfig)}
    knobs, brain = {}, spec.get("brain", default_brain)
    inject = _inject(spec.get("inject"), name, path, branched)
    if isinstance(brain, dict) and not branched:
        raise ExperimentError(
            f"{path}: condition {name!r}: brain: a model name (brain settings, a mapping, go "
            "with branch:, over the parent's)"
        )
    for key, value in spec.items():
        if key in ("brain", "inject"):
            continue
        if key == "ablate":
            for part in value if isinstance(value, list) else [value]:
                if part not in ABLATIONS:
                    raise ExperimentError(
                        f"{path}: condition {name!r}: cannot ablate {part!r} (one of {', '.join(ABLATIONS)})"
                    )
                knobs[ABLATIONS[part]] = False
        elif key in allowed:
            knobs[key] = list(value) if isinstance(value, (list, tuple)) else value
        else:
            raise ExperimentError(
                f"{path}: condition {name!r}: unknown knob {key!r} "
                f"(brain, ablate or one of {', '.join(sorted(allowed))})"
            )
    try:
        SimConfig.from_dict(knobs)
    except (TypeError, ValueError) as exc:
        raise ExperimentError(f"{path}: condition {name!r}: {exc}") from None
    if branched:  # None: the parent's brain; "offline" switches to it
        return Condition(name, brain if isinstance(brain, dict) or brain is None else str(brain), knobs, inject)
    return Condition(name, None if brain in (None, "offline") else str(brain), knobs)


def _inject(value, name: str, path: Path, branched: bool) -> tuple[tuple[str, str], ...]:
    """A condition's thoughts put into heads at the branch: `{agent: thought}` or `[[agent, thought]]`."""
    if value is None:
        return ()
    if not branched:
        raise ExperimentError(f"{path}: condition {name!r}: inject goes with branch: (the thoughts come at its time)")
    pairs = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(pairs, list) or any(not isinstance(p, (list, tuple)) or len(p) != 2 for p in pairs):
        raise ExperimentError(f"{path}: condition {name!r}: inject: {{agent: thought}} or [[agent, thought], ...]")
    return tuple((str(a), str(t)) for a, t in pairs)


def slot_name(condition: str, seed: int) -> str:
    """The folder of a condition's run with `seed`, inside the experiment's OUT (`full-seed3`)."""
    from smallville.run import seed_label

    return f"{condition}-{seed_label(seed)}"
