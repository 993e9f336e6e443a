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
`reflection`, `planning`, `sharing`, `index`, ...), `brain` (offline or a litellm model name), and
`ablate`: a list of parts to switch off (`memory` or `retrieval`, `reflection`, `planning`,
`sharing`).

Each run is a normal run directory, `OUT/CONDITION-seedS/`; a run is written under
`OUT/.partial/` and moved there when it completes, so re-running an experiment skips every
run that completed and redoes the others. Then `results.csv` (one row per run: condition,
seed and every metric of `smallville.metrics` as flat columns) and `summary.csv` (mean and
standard deviation of each metric per condition) are written to OUT. Runs go to a local process
pool, or as Ray tasks to a local Ray or a cluster (`executor="ray"`, docs/experiments.md).

    spec      the experiment file: `load_experiment` -> `Experiment` of `Condition`s
    runs      running it: `run_experiment`, in local processes or on Ray
    results   results.csv, summary.csv and a branch's pairs.csv (`compare_pairs`), `load_results`,
              `print_summary`, `plot_experiment`
"""

from smallville.errors import ExperimentError
from smallville.experiment.results import (
    FINISHED,
    Rows,
    compare_pairs,
    gather,
    is_completed,
    load_results,
    plot_experiment,
    print_summary,
    run_status,
    summarize,
)
from smallville.experiment.runs import MATH_THREADS, ExperimentResult, run_experiment
from smallville.experiment.spec import ABLATIONS, Condition, Experiment, load_experiment, slot_name
from smallville.metrics import SUMMARY_COLUMNS

__all__ = [
    "ABLATIONS",
    "FINISHED",
    "MATH_THREADS",
    "SUMMARY_COLUMNS",
    "Condition",
    "Experiment",
    "ExperimentError",
    "ExperimentResult",
    "Rows",
    "compare_pairs",
    "gather",
    "is_completed",
    "load_experiment",
    "load_results",
    "plot_experiment",
    "print_summary",
    "run_experiment",
    "run_status",
    "slot_name",
    "summarize",
]
