"""Running an experiment: every (condition, seed) not yet done, in local processes or as Ray tasks."""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from smallville.csvfile import write_csv
from smallville.errors import ExperimentError
from smallville.experiment.results import (
    FINISHED,
    Rows,
    compare_pairs,
    gather,
    is_completed,
    print_pairs,
    print_summary,
    summarize,
)
from smallville.experiment.spec import Experiment, slot_name

MATH_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class ExperimentResult:
    """What `run_experiment` did: the slots it ran, skipped (done already) and saw fail, and
    the rows it gathered."""

    out: Path
    rows: Rows
    summary: Rows
    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    failed: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def _same_run(run_dir: Path, job: dict) -> bool:
    """Whether a completed run was made with this job's settings (an edited condition is redone)."""
    from smallville.errors import SmallvilleError
    from smallville.run.manifest import read_manifest

    try:
        recorded = read_manifest(run_dir).experiment or {}
    except SmallvilleError:
        return False
    return all(recorded.get(k) == job.get(k) for k in ("knobs", "brain", "duration", "embedder", "branch", "inject"))


def _run_one(job: dict) -> dict:
    """One run, in a worker process: written under OUT/.partial/, moved to OUT/SLOT when completed."""
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.sim.engine import SimConfig

    out, slot = Path(job["out"]), job["slot"]
    partial = out / ".partial" / slot
    if partial.exists():
        shutil.rmtree(partial)
    began = time.perf_counter()
    recorded = {k: job[k] for k in ("condition", "seed", "knobs", "brain", "duration", "embedder")}
    recorded.update({k: job[k] for k in ("branch", "inject") if job.get(k) is not None})
    try:
        if job.get("branch"):
            result = _fork_one(job, partial, {"name": job["experiment"], **recorded})
        else:
            result = run_scenario(
                load_scenario(job["scenario"]),
                folder=partial,
                seed=job["seed"],
                duration=job["duration"],
                brain=job["brain"],
                embedder=job["embedder"],
                config=SimConfig.from_dict(job["knobs"]),
                budget=job.get("budget"),
                experiment={"name": job["experiment"], **recorded},
            )
    except Exception as exc:  # noqa: BLE001 - reported, the experiment goes on
        return {
            "slot": slot,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
            "seconds": round(time.perf_counter() - began, 3),
        }
    status = result.manifest.status
    if status in FINISHED:
        final = out / slot
        if final.exists():
            shutil.rmtree(final)
        os.replace(result.path, final)
    return {"slot": slot, "status": status, "seconds": round(time.perf_counter() - began, 3)}


def _fork_one(job: dict, folder: Path, experiment: dict):
    """A branched condition's run: its parent forked at the branch's time onto the condition's
    brain (settings over the parent's) with its thoughts, to the experiment's end."""
    from smallville.brain.assembly import settings_of
    from smallville.run import Run, fork_run
    from smallville.timefmt import parse_duration

    branch, parent = job["branch"], Run.open(job["parent"])
    if parent.manifest.status not in FINISHED:
        raise ExperimentError(f"its parent run {parent.path} did not complete")
    try:
        at = parent.seconds(branch["at"])
    except ValueError:
        at = parse_duration(branch["at"])
    brain = job["brain"]
    if isinstance(brain, dict):  # brain settings over the parent's
        brain = settings_of(parent.manifest.brain_at(at)).merged(brain, f"condition {job['condition']}: brain")
    duration = job["duration"] - at if job["duration"] else None
    return fork_run(
        parent.path,
        at,
        seed=job["fork_seed"],
        inject=[tuple(i) for i in job.get("inject") or ()],
        duration=duration,
        brain=brain,
        folder=folder,
        budget=job.get("budget"),
        experiment=experiment,
    )


def _jobs(exp: Experiment, out: Path, budget: dict | None) -> tuple[list[list[dict]], list[str]]:
    """The runs to make, in phases (a branch's parents before the runs that fork them), and
    the slots done already."""
    branch = exp.branch or {}
    phases: list[list[dict]] = [[], []]
    skipped, redone = [], set()
    for cond, seed in sorted(exp.slots(), key=lambda slot: slot[0].name != branch.get("condition")):
        slot = slot_name(cond.name, seed)
        job = {
            "out": str(out.resolve()),
            "slot": slot,
            "scenario": str(Path(exp.scenario).resolve()),
            "seed": seed,
            "duration": exp.duration,
            "brain": cond.brain,
            "embedder": exp.embedder,
            "knobs": cond.knobs,
            "experiment": exp.name,
            "condition": cond.name,
            "budget": budget,
        }
        parent = None
        if branch and cond.name != branch["condition"]:
            parent = branch["run"] or str(out.resolve() / slot_name(branch["condition"], seed))
            job.update(
                branch={"from": branch["from"], "at": branch["at"]},
                parent=parent,
                fork_seed=seed if branch["run"] else None,
                inject=[list(i) for i in cond.inject] or None,
            )
        if parent not in redone and is_completed(out / slot) and _same_run(out / slot, job):
            skipped.append(slot)
            continue
        redone.add(str(out.resolve() / slot))
        phases[parent is not None].append(job)
    return [p for p in phases if p], skipped


def run_experiment(
    exp: Experiment,
    *,
    workers: int | None = None,
    out: Path | None = None,
    quiet: bool = False,
    executor: str = "process",
    address: str | None = None,
    console=None,
    budget: dict | None = None,
) -> ExperimentResult:
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
    phases, skipped = _jobs(exp, out, budget)
    jobs = [job for phase in phases for job in phase]
    if not quiet:
        console.print(
            f"[bold]{exp.name}[/]: {len(exp.conditions)} conditions x {len(exp.seeds)} seeds "
            f"= {len(exp.conditions) * len(exp.seeds)} runs of {exp.scenario}; {len(skipped)} done already, "
            f"{len(jobs)} to run "
            + ("as Ray tasks" if executor == "ray" else f"on {min(workers, max(1, len(jobs)))} worker(s)")
            + f"; writing {out}"
        )
    done: list[dict] = []
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=True,
    )
    with progress:
        task = progress.add_task("running", total=len(jobs))

        def finished(report: dict) -> None:
            done.append(report)
            progress.advance(task)
            if not quiet:
                style = "green" if report["status"] == "completed" else "red"
                console.print(
                    f"  [{style}]{report['status']}[/] {report['slot']} ({report['seconds']:.1f} s)"
                    + (f": {report['error']}" if report.get("error") else "")
                )

        for phase in phases:  # a branch's parents first
            for report in _dispatch(
                phase, executor, workers, address, lambda job: progress.update(task, description=job["slot"])
            ):
                finished(report)
    rows = gather(exp, out)
    rated = {}
    if exp.evaluate is not None and rows:
        from smallville.evaluate.experiment import believability

        rated = believability(exp.evaluate, out, rows, exp.source, console, quiet, budget)
    summary = summarize(Rows(r for r in rows if r["status"] == "completed"))
    for row in summary:
        row.update(rated.get(row["condition"], {}))
    write_csv(out / "results.csv", rows)
    write_csv(out / "summary.csv", summary)
    pairs = compare_pairs(Rows(r for r in rows if r["status"] == "completed")) if exp.branch else None
    if pairs is not None:
        write_csv(out / "pairs.csv", pairs)
    if not quiet:
        print_summary(summary, console)
        if pairs:
            print_pairs(pairs, console)
        console.print(
            f"results: {out / 'results.csv'}, summary: {out / 'summary.csv'}"
            + (f", pairs: {out / 'pairs.csv'}" if pairs is not None else "")
        )
    failed = [r["slot"] for r in done if r["status"] not in FINISHED]
    return ExperimentResult(out, rows, summary, [r["slot"] for r in done], skipped, failed)


def _dispatch(jobs: list[dict], executor: str, workers: int, address: str | None, starting):
    """Each job's report as it finishes: as Ray tasks, one after another here (`starting(job)`
    first), or in a local pool of `workers` processes."""
    if not jobs:
        return
    if executor == "ray":
        yield from _run_ray(jobs, workers, address)
    elif workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            starting(job)
            yield _run_one(job)
    else:
        import multiprocessing

        # One math thread per worker: several workers each running multi-threaded BLAS and
        # OpenMP on the same cores slowed runs down about sevenfold.
        for var in MATH_THREADS:
            os.environ.setdefault(var, "1")
        with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            futures = [pool.submit(_run_one, job) for job in jobs]
            for future in as_completed(futures):
                yield future.result()


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
            except ray.exceptions.RayError as exc:  # the worker died: that run failed, the rest go on
                report = {
                    "slot": job["slot"],
                    "status": "failed",
                    "seconds": 0.0,
                    "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}",
                }
            if report["status"] in FINISHED and not is_completed(Path(job["out"]) / job["slot"]):
                report = dict(
                    report,
                    status="failed",
                    error=f"it ran on a node that does not share {job['out']} with this one (see docs/experiments.md)",
                )
            yield report
    finally:
        if started:
            ray.shutdown()


def _ray_init(ray, workers: int, address: str | None) -> None:
    """Join the cluster at `address` or RAY_ADDRESS, else start a local Ray; quietly either way."""
    import logging

    address = address or os.environ.get("RAY_ADDRESS")
    if address and re.fullmatch(r"[\w.\-]+:\d+", address):  # a head's HOST:PORT: fail fast, not after minutes
        host, port = address.rsplit(":", 1)
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
        except OSError as exc:
            raise ExperimentError(
                f"--executor ray: no Ray head answers at {address} ({exc.strerror or exc}); "
                "start one there with `ray start --head`"
            ) from None
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR}
    try:
        if address:
            ray.init(address=address, **quiet)
        else:
            ray.init(address="local", num_cpus=workers, include_dashboard=False, **quiet)  # even if one runs
    except (ConnectionError, ValueError, RuntimeError) as exc:
        hint = (
            "; a cluster with token authentication (the default of recent Ray) also needs RAY_AUTH_MODE=token "
            "here, and its token in ~/.ray/auth_token or RAY_AUTH_TOKEN"
            if address not in (None, "auto") and not os.environ.get("RAY_AUTH_MODE")
            else ""
        )
        where = address or "a local Ray"
        raise ExperimentError(f"--executor ray: cannot start or reach {where}: {exc}{hint}") from None
