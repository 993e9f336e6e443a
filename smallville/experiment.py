"""Experiments: many runs of one scenario over seeds and conditions, measured.

An experiment file (`experiments/NAME.yaml`)::

    name: paper                          # default: the file's stem
    scenario: scenarios/the_ville.yaml   # relative to the working folder, else to the file
    duration: 2d
    seeds: [1, 2, 3, 4, 5]               # or "1-5", or a number n (seeds 1..n)
    embedder: lexical                    # optional (default: the run's default, use)
    brain: offline                       # default for every condition
    workers: 2                           # optional; --workers overrides
    out: runs/experiments/paper          # optional (this is the default)
    base: {decay: 0.99}                  # optional: knobs every condition starts from
    conditions:                          # named conditions (default: one, `default`)
      full: {}
      no_reflection: {ablate: [reflection]}
      low_threshold: {reflection_threshold: 100, weights: [1, 1, 2]}
    grid:                                # optional: crossed with every condition
      decay: [0.99, 0.995]

A condition's keys are SimConfig fields (`weights`, `decay`, `reflection_threshold`, `retrieval`,
`reflection`, `planning`, `sharing`, ...), `brain` (offline or a litellm model name), and
`ablate`: a list of parts to switch off (`memory` or `retrieval`, `reflection`, `planning`,
`sharing`).

Each run is a normal run directory, `OUT/CONDITION-seedS/`; a run is written under
`OUT/.partial/` and moved there when it completes, so re-running an experiment skips every
run that completed and redoes the others. Then `results.csv` (one row per run: condition,
seed and every metric of `smallville.metrics` as flat columns) and `summary.csv` (mean and
standard deviation of each metric per condition) are written to OUT. Runs go to a local process
pool, or as Ray tasks to a local Ray or a cluster (`executor="ray"`, docs/experiments.md).
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
import shutil
import socket
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, fields
from pathlib import Path

from smallville.errors import UsageError

ABLATIONS = {"memory": "retrieval", "retrieval": "retrieval", "reflection": "reflection",
             "planning": "planning", "sharing": "sharing"}
MATH_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SUMMARY_COLUMNS = ("known_end", "density_end", "attended", "told_and_attended", "conversations", "reflections",
                   "replans", "memories_per_agent")


class ExperimentError(UsageError):
    """An experiment file or its flags cannot be run as written (exit 2)."""


class Rows(list):
    """Plain rows (a list of dicts), with `.to_pandas()` when pandas is installed."""

    def to_pandas(self):
        from smallville.metrics import _pandas

        return _pandas().DataFrame(list(self))


@dataclass
class Condition:
    name: str
    brain: str | None
    knobs: dict


@dataclass
class Experiment:
    name: str
    scenario: Path
    duration: float | None
    seeds: list[int]
    conditions: list[Condition]
    out: Path
    embedder: str | None = None
    workers: int = 1
    source: Path | None = None

    def slots(self) -> list[tuple[Condition, int]]:
        return [(c, s) for c in self.conditions for s in self.seeds]


@dataclass
class ExperimentResult:
    out: Path
    rows: Rows
    summary: Rows
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


# ---- loading ------------------------------------------------------------------------------


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
    known = {"name", "scenario", "duration", "seeds", "embedder", "brain", "workers", "out", "base", "conditions",
             "grid", "description"}
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
    for cname, spec in conditions_data.items():
        if spec is not None and not isinstance(spec, dict):
            raise ExperimentError(f"{path}: condition {cname!r}: expected a mapping of knobs")
        for point in points:
            label = str(cname) + "".join(f"_{k}{_short(v)}" for k, v in point.items())
            merged = {**base, **(spec or {}), **point}
            conditions.append(_condition(label, merged, data.get("brain"), path))
    names = [c.name for c in conditions]
    if len(set(names)) != len(names):
        raise ExperimentError(f"{path}: two conditions share a name")
    out = Path(data["out"]) if data.get("out") else Path("runs") / "experiments" / name
    workers = int(data.get("workers") or 1)
    return Experiment(name, scenario, duration, seeds, conditions, out, data.get("embedder"), workers, path)


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
        raise ExperimentError(f"{path}: seeds: expected a list of whole numbers, a range \"1-5\" or a count") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ExperimentError(f"{path}: seeds: expected distinct seeds")
    return seeds


def _short(v) -> str:
    return "-".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)


def _condition(name: str, spec: dict, default_brain, path: Path) -> Condition:
    from smallville.sim.engine import SimConfig

    allowed = {f.name for f in fields(SimConfig)}
    knobs, brain = {}, spec.get("brain", default_brain)
    for key, value in spec.items():
        if key == "brain":
            continue
        if key == "ablate":
            for part in value if isinstance(value, list) else [value]:
                if part not in ABLATIONS:
                    raise ExperimentError(f"{path}: condition {name!r}: cannot ablate {part!r} "
                                          f"(one of {', '.join(ABLATIONS)})")
                knobs[ABLATIONS[part]] = False
        elif key in allowed:
            knobs[key] = list(value) if isinstance(value, (list, tuple)) else value
        else:
            raise ExperimentError(f"{path}: condition {name!r}: unknown knob {key!r} "
                                  f"(brain, ablate or one of {', '.join(sorted(allowed))})")
    try:
        SimConfig.from_dict(knobs)
    except (TypeError, ValueError) as exc:
        raise ExperimentError(f"{path}: condition {name!r}: {exc}") from None
    return Condition(name, None if brain in (None, "offline") else str(brain), knobs)


# ---- running ------------------------------------------------------------------------------


def slot_name(condition: str, seed: int) -> str:
    from smallville.run import seed_label

    return f"{condition}-{seed_label(seed)}"


FINISHED = ("completed", "budget_exhausted")      # a run stopped by its budget is finished too


def run_status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("status")
    except (OSError, ValueError):
        return None


def is_completed(run_dir: Path) -> bool:
    return run_status(run_dir) in FINISHED


def _same_run(run_dir: Path, job: dict) -> bool:
    """Whether a completed run was made with this job's settings (an edited condition is redone)."""
    try:
        recorded = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get("experiment") or {}
    except (OSError, ValueError):
        return False
    return all(recorded.get(k) == job[k] for k in ("knobs", "brain", "duration", "embedder"))


def _run_one(job: dict) -> dict:
    """One run, in a worker process: written under OUT/.partial/, moved to OUT/SLOT when completed."""
    from smallville.run import run_scenario, write_json_atomic
    from smallville.scenario import load_scenario
    from smallville.sim.engine import SimConfig

    out, slot = Path(job["out"]), job["slot"]
    partial = out / ".partial" / slot
    if partial.exists():
        shutil.rmtree(partial)
    began = time.perf_counter()
    try:
        result = run_scenario(load_scenario(job["scenario"]), runs_dir=partial, seed=job["seed"],
                              duration=job["duration"], brain=job["brain"], embedder=job["embedder"],
                              config=SimConfig.from_dict(job["knobs"]), budget=job.get("budget"))
    except Exception as exc:            # noqa: BLE001 - reported, the experiment goes on
        return {"slot": slot, "status": "failed", "error": f"{type(exc).__name__}: {exc}",
                "seconds": round(time.perf_counter() - began, 3)}
    status = result.manifest["status"]
    if status in FINISHED:
        final = out / slot
        if final.exists():
            shutil.rmtree(final)
        os.replace(result.path, final)
        manifest = dict(result.manifest, run_id=slot,
                        experiment={"name": job["experiment"], "condition": job["condition"], "seed": job["seed"],
                                    "knobs": job["knobs"], "brain": job["brain"], "duration": job["duration"],
                                    "embedder": job["embedder"]})
        write_json_atomic(final / "manifest.json", manifest)
        shutil.rmtree(partial, ignore_errors=True)
    return {"slot": slot, "status": status, "seconds": round(time.perf_counter() - began, 3)}


def run_experiment(exp: Experiment, *, workers: int | None = None, out: Path | None = None, quiet: bool = False,
                   executor: str = "process", address: str | None = None, console=None,
                   budget: dict | None = None) -> ExperimentResult:
    """Run every (condition, seed) not yet completed, then gather results.csv and summary.csv.

    `budget` ({"usd", "requests", "tokens"}) limits each run of a model on its own; a run
    that reaches it ends `budget_exhausted`, is listed so in results.csv and left out of the
    summary (it covers less time than the others).

    executor "process" runs them in a local pool of `workers` processes; "ray" as Ray tasks, on
    the cluster at `address` (else RAY_ADDRESS, else a local Ray of `workers` CPUs)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from smallville.tables import make_console

    if address and executor != "ray":
        raise ExperimentError(f"a Ray address ({address}) is for the ray executor: add --executor ray")
    out = Path(out) if out is not None else exp.out
    out.mkdir(parents=True, exist_ok=True)
    workers = workers or exp.workers or 1
    console = console or make_console(stderr=True)
    jobs, skipped = [], []
    for cond, seed in exp.slots():
        slot = slot_name(cond.name, seed)
        job = {"out": str(out.resolve()), "slot": slot, "scenario": str(Path(exp.scenario).resolve()), "seed": seed,
               "duration": exp.duration, "brain": cond.brain, "embedder": exp.embedder,
               "knobs": cond.knobs, "experiment": exp.name, "condition": cond.name, "budget": budget}
        if is_completed(out / slot) and _same_run(out / slot, job):
            skipped.append(slot)
            continue
        jobs.append(job)
    if not quiet:
        console.print(f"[bold]{exp.name}[/]: {len(exp.conditions)} conditions x {len(exp.seeds)} seeds "
                      f"= {len(exp.conditions) * len(exp.seeds)} runs of {exp.scenario}; {len(skipped)} done already, "
                      f"{len(jobs)} to run " + ("as Ray tasks" if executor == "ray" else
                                                f"on {min(workers, max(1, len(jobs)))} worker(s)")
                      + f"; writing {out}")
    done: list[dict] = []
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, disable=quiet, transient=True)
    with progress:
        task = progress.add_task("running", total=len(jobs))

        def finished(report: dict) -> None:
            done.append(report)
            progress.advance(task)
            if not quiet:
                style = "green" if report["status"] == "completed" else "red"
                console.print(f"  [{style}]{report['status']}[/] {report['slot']} ({report['seconds']:.1f} s)"
                              + (f": {report['error']}" if report.get("error") else ""))

        if executor == "ray":
            if jobs:
                for report in _run_ray(jobs, workers, address):
                    finished(report)
        elif workers <= 1 or len(jobs) <= 1:
            for job in jobs:
                progress.update(task, description=job["slot"])
                finished(_run_one(job))
        else:
            import multiprocessing

            # One math thread per worker: several workers each running multi-threaded BLAS and
            # OpenMP on the same cores slowed runs down about sevenfold.
            for var in MATH_THREADS:
                os.environ.setdefault(var, "1")
            with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = [pool.submit(_run_one, job) for job in jobs]
                for future in as_completed(futures):
                    finished(future.result())
    rows = gather(exp, out)
    summary = summarize(Rows(r for r in rows if r["status"] == "completed"))
    _write_csv(out / "results.csv", rows)
    _write_csv(out / "summary.csv", summary)
    if not quiet:
        print_summary(summary, console)
        console.print(f"results: {out / 'results.csv'}, summary: {out / 'summary.csv'}")
    failed = [r["slot"] for r in done if r["status"] not in FINISHED]
    return ExperimentResult(out, rows, summary, [r["slot"] for r in done], skipped, failed)


def _run_ray(jobs: list[dict], workers: int, address: str | None):
    """Each job a Ray task; reports as tasks finish. Joins a running Ray (ray.init by the caller),
    else the cluster at `address` or RAY_ADDRESS, else starts a local Ray of `workers` CPUs and
    stops it afterwards."""
    try:
        import ray
    except ImportError:
        raise ExperimentError("--executor ray needs ray: pip install 'smallville[ray]'") from None
    started = not ray.is_initialized()
    if started:
        _ray_init(ray, workers, address)
    try:
        # One math thread per task (unless set here), as in the process pool; a task holds one CPU.
        threads = {var: os.environ.get(var, "1") for var in MATH_THREADS}
        remote = ray.remote(_run_one).options(runtime_env={"env_vars": threads})
        tasks = {remote.remote(job): job for job in jobs}
        pending = list(tasks)
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            job = tasks[ready[0]]
            try:
                report = ray.get(ready[0])
            except ray.exceptions.RayError as exc:          # the worker died: that run failed, the rest go on
                report = {"slot": job["slot"], "status": "failed", "seconds": 0.0,
                          "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"}
            if report["status"] in FINISHED and not is_completed(Path(job["out"]) / job["slot"]):
                report = dict(report, status="failed", error=f"it ran on a node that does not share {job['out']} "
                                                             "with this one (see docs/experiments.md)")
            yield report
    finally:
        if started:
            ray.shutdown()


def _ray_init(ray, workers: int, address: str | None) -> None:
    """Join the cluster at `address` or RAY_ADDRESS, else start a local Ray; quietly either way."""
    import logging

    address = address or os.environ.get("RAY_ADDRESS")
    if address and re.fullmatch(r"[\w.\-]+:\d+", address):   # a head's HOST:PORT: fail fast, not after minutes
        host, port = address.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
        except OSError as exc:
            raise ExperimentError(f"--executor ray: no Ray head answers at {address} ({exc.strerror or exc}); "
                                  "start one there with `ray start --head`") from None
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(address="local", num_cpus=workers, include_dashboard=False, **quiet)   # even if one runs
    except (ConnectionError, ValueError, RuntimeError) as exc:
        hint = ("; a cluster with token authentication (the default of recent Ray) also needs RAY_AUTH_MODE=token "
                "here, and its token in ~/.ray/auth_token or RAY_AUTH_TOKEN" if address not in (None, "auto")
                and not os.environ.get("RAY_AUTH_MODE") else "")
        where = address or "a local Ray"
        raise ExperimentError(f"--executor ray: cannot start or reach {where}: {exc}{hint}") from None


# ---- results ------------------------------------------------------------------------------


def gather(exp: Experiment, out: Path) -> Rows:
    """One row per completed run: condition, seed, run, then every flat metric."""
    from smallville.metrics import run_metrics

    rows = Rows()
    for cond, seed in exp.slots():
        path = out / slot_name(cond.name, seed)
        if not is_completed(path):
            continue
        m = run_metrics(path)
        manifest = json.loads((path / "manifest.json").read_text(encoding="utf-8"))
        rows.append({"condition": cond.name, "seed": seed, "run": path.name, "status": manifest["status"],
                     "wall_seconds": (manifest.get("wall") or {}).get("seconds"), **m.flat()})
    return rows


def summarize(rows: list[dict]) -> Rows:
    """Mean and (sample) standard deviation of every numeric metric, per condition."""
    summary = Rows()
    order: list[str] = []
    for r in rows:
        if r["condition"] not in order:
            order.append(r["condition"])
    for cond in order:
        group = [r for r in rows if r["condition"] == cond]
        row = {"condition": cond, "runs": len(group)}
        for key in group[0]:
            if key in ("condition", "seed", "run"):
                continue
            values = [r.get(key) for r in group]
            values = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not values:
                continue
            mean = sum(values) / len(values)
            std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
            row[f"{key}_mean"] = round(mean, 4)
            row[f"{key}_std"] = round(std, 4)
        summary.append(row)
    return summary


def _write_csv(path: Path, rows: list[dict]) -> None:
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns or ["condition"])
        writer.writeheader()
        for r in rows:
            writer.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    os.replace(tmp, path)


def print_summary(summary: list[dict], console=None) -> None:
    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    keys: list[str] = []
    for r in summary:
        for k in r:
            base = k[:-5] if k.endswith("_mean") else None
            if base and base not in keys and any(base.endswith(c) for c in SUMMARY_COLUMNS):
                keys.append(base)
    table = Table(title="Summary: mean ± standard deviation per condition")
    table.add_column("metric")
    for r in summary:
        table.add_column(r["condition"], justify="right")
    table.add_row("runs", *(str(r["runs"]) for r in summary))
    for k in keys:
        table.add_row(k.replace("_", " "),
                      *(f"{r[k + '_mean']:.2f} ± {r[k + '_std']:.2f}" if k + "_mean" in r else "" for r in summary))
    print_table(console, table)


def load_results(path: str | Path) -> Rows:
    """The rows of an experiment's results.csv: give the CSV, the output folder or the experiment
    file. Numbers come back as numbers; `.to_pandas()` makes a DataFrame."""
    path = Path(path)
    if path.suffix in (".yaml", ".yml"):
        path = load_experiment(path).out
    if path.is_dir():
        path = path / "results.csv"
    if not path.is_file():
        raise ExperimentError(f"{path}: no results (run the experiment first)")
    rows = Rows()
    with open(path, encoding="utf-8", newline="") as f:
        for raw in csv.DictReader(f):
            rows.append({k: _number(v) if k not in ("condition", "run") else v for k, v in raw.items()})
    return rows


def _number(text: str):
    if text == "" or text is None:
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def plot_experiment(exp: Experiment, out: str | Path, summary: list[dict]) -> list[Path]:
    """The plots of an experiment into OUT: summary.png, diffusion.png (knowers per hour, each
    condition over its seeds) and attendance.png (when the scenario has events somewhere)."""
    from smallville.metrics import run_metrics
    from smallville.plots import plot_attendance_by_condition, plot_diffusion_by_condition, plot_summary

    out = Path(out)
    written = [plot_summary(summary, out / "summary.png")]
    curves: dict[str, dict[str, list]] = {}
    for cond, seed in exp.slots():
        path = out / slot_name(cond.name, seed)
        if run_status(path) == "completed":
            for probe, d in run_metrics(path).diffusion.items():
                curves.setdefault(cond.name, {}).setdefault(probe, []).append(d["curve"])
    if curves:
        written.append(plot_diffusion_by_condition(curves, out / "diffusion.png"))
    attendance = plot_attendance_by_condition(summary, out / "attendance.png")
    return written + ([attendance] if attendance else [])
