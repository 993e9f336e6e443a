"""An experiment's results: which runs finished, results.csv and summary.csv, the summary
table, reading results back, and the plots of the conditions side by side."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from smallville.errors import ExperimentError
from smallville.experiment.spec import Experiment, load_experiment, slot_name
from smallville.metrics import run_metrics, summary_measures


class Rows(list):
    """Plain rows (a list of dicts), with `.to_pandas()` when pandas is installed."""

    def to_pandas(self):
        from smallville.metrics import require_pandas

        return require_pandas().DataFrame(list(self))


FINISHED = ("completed", "budget_exhausted")  # a run stopped by its budget is finished too


def run_status(run_dir: Path) -> str | None:
    """The status its manifest gives a run folder (None: no readable manifest)."""
    from smallville.errors import SmallvilleError
    from smallville.run.manifest import read_manifest

    try:
        return read_manifest(run_dir).status
    except SmallvilleError:
        return None


def is_completed(run_dir: Path) -> bool:
    """Whether a run folder holds a finished run (completed, or stopped by its budget)."""
    return run_status(run_dir) in FINISHED


def gather(exp: Experiment, out: Path) -> Rows:
    """One row per completed run: condition, seed, run, then every flat metric."""
    rows = Rows()
    for cond, seed in exp.slots():
        path = out / slot_name(cond.name, seed)
        if not is_completed(path):
            continue
        m = run_metrics(path)
        rows.append(
            {
                "condition": cond.name,
                "seed": seed,
                "run": path.name,
                "status": m.info["status"],
                "wall_seconds": m.info["wall_seconds"],
                **m.flat(),
            }
        )
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


def compare_pairs(rows: list[dict]) -> Rows:
    """Each pair of conditions (in order: `a`, `b`) compared seed by seed: for every numeric
    metric the mean and (sample) standard deviation of `b - a` over the seeds both have. In
    an experiment with `branch:` the two runs of a seed share their history up to the branch,
    so a difference is the condition's, not chance's before it."""
    order = list(dict.fromkeys(r["condition"] for r in rows))
    by = {(r["condition"], r["seed"]): r for r in rows}
    out = Rows()
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            seeds = [s for (c, s) in by if c == a and (b, s) in by]
            row: dict = {"a": a, "b": b, "seeds": len(seeds)}
            for key in by[a, seeds[0]] if seeds else {}:
                diffs = [by[b, s].get(key) - by[a, s].get(key) for s in seeds if _number_pair(by[a, s], by[b, s], key)]
                if key in ("condition", "seed", "run") or len(diffs) < len(seeds) or not diffs:
                    continue
                mean = sum(diffs) / len(diffs)
                std = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)) if len(diffs) > 1 else 0.0
                row[f"{key}_diff_mean"], row[f"{key}_diff_std"] = round(mean, 4), round(std, 4)
            out.append(row)
    return out


def _number_pair(a: dict, b: dict, key: str) -> bool:
    return all(isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool) for r in (a, b))


def print_pairs(pairs: list[dict], console=None) -> None:
    """The pairwise comparison of the summary's measures: `b - a`, mean ± standard deviation over seeds."""
    from smallville.metrics import SUMMARY_COLUMNS
    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    keys = list(
        dict.fromkeys(
            k.removesuffix("_diff_mean")
            for r in pairs
            for k in r
            if k.endswith("_diff_mean") and any(k.removesuffix("_diff_mean").endswith(c) for c in SUMMARY_COLUMNS)
        )
    )
    table = Table(title="Pairs, seed by seed: b - a, mean ± standard deviation")
    table.add_column("metric")
    for r in pairs:
        table.add_column(f"{r['b']} - {r['a']} ({r['seeds']})", justify="right")
    for k in keys:
        table.add_row(
            k.replace("_", " "),
            *(f"{r[k + '_diff_mean']:+.2f} ± {r[k + '_diff_std']:.2f}" if k + "_diff_mean" in r else "" for r in pairs),
        )
    print_table(console, table)


def print_summary(summary: list[dict], console=None) -> None:
    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    keys = summary_measures(summary)
    table = Table(title="Summary: mean ± standard deviation per condition")
    table.add_column("metric")
    for r in summary:
        table.add_column(r["condition"], justify="right")
    table.add_row("runs", *(str(r["runs"]) for r in summary))
    for k in keys:
        table.add_row(
            k.replace("_", " "),
            *(f"{r[k + '_mean']:.2f} ± {r[k + '_std']:.2f}" if k + "_mean" in r else "" for r in summary),
        )
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
