"""What recording recall costs: a day of the_ville, offline brain, with this checkout and with
another (an older smallville, before recall was recorded), in turns, in fresh processes.

    python benchmarks/recall_cost.py --before DIR [--for 1d] [--rounds 2] [--embedder use]
    python benchmarks/recall_cost.py --switch [--for 6h] [--rounds 3] [--embedder lexical]

Prints each run's wall time (with `--switch`, its CPU time too) and the size of its run folder
(and of its event log), and the ratios of this checkout's to the other's (the medians of the
rounds). `--switch` compares in one process, in turns, this checkout with its recording of
recall switched off (retrievals noted nowhere, no `recall` events): the cost of recording
alone, less exposed to a busy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ONE_RUN = """
import json, sys, time
from pathlib import Path
from smallville.run import run_scenario
from smallville.scenario import load_scenario
from smallville.timefmt import parse_duration
scenario, duration, embedder, runs = sys.argv[1], parse_duration(sys.argv[2]), sys.argv[3], sys.argv[4]
began = time.perf_counter()
result = run_scenario(load_scenario(scenario), runs_dir=runs, duration=duration, embedder=embedder)
wall = time.perf_counter() - began
files = [p for p in Path(result.path).rglob("*") if p.is_file()]
print(json.dumps({"wall": wall, "disk": sum(p.stat().st_size for p in files),
                  "events": (Path(result.path) / "events.jsonl").stat().st_size}))
"""


def one(tree: Path, scenario: str, duration: str, embedder: str) -> dict:
    """One run with the smallville of `tree`, in a process of its own."""
    with tempfile.TemporaryDirectory() as runs:
        out = subprocess.run(
            [sys.executable, "-c", ONE_RUN, scenario, duration, embedder, runs],
            cwd=tree,
            env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            check=True,
        )
    return json.loads(out.stdout.splitlines()[-1])


def switched(duration: str, embedder: str, rounds: int) -> None:
    """This checkout with recall recorded and with it switched off, in turns, in this process."""
    import time

    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.sim.recalls import RecallNotes
    from smallville.timefmt import parse_duration

    scenario = load_scenario(str(ROOT / "scenarios" / "the_ville.yaml"))
    recording = (RecallNotes.note, RecallNotes.take)
    off = (lambda self, agent, queries, found: None, lambda self, agent: [])
    rows: dict[str, list[dict]] = {"off": [], "on": []}
    for _ in range(rounds):
        for name, (note, take) in (("off", off), ("on", recording)):
            RecallNotes.note, RecallNotes.take = note, take
            with tempfile.TemporaryDirectory() as runs:
                began, began_cpu = time.perf_counter(), time.process_time()
                result = run_scenario(scenario, runs_dir=runs, duration=parse_duration(duration), embedder=embedder)
                wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
                files = [p for p in Path(result.path).rglob("*") if p.is_file()]
                rows[name].append(
                    {
                        "wall": wall,
                        "cpu": cpu,
                        "disk": sum(p.stat().st_size for p in files),
                        "events": (Path(result.path) / "events.jsonl").stat().st_size,
                    }
                )
            print(name, rows[name][-1], flush=True)
    RecallNotes.note, RecallNotes.take = recording
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    for k in ("wall", "cpu", "disk", "events"):
        print(f"{k}: off {med['off'][k]:.6g}, on {med['on'][k]:.6g}, on/off {med['on'][k] / med['off'][k]:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a checkout of the smallville to compare with")
    parser.add_argument("--switch", action="store_true", help="compare with recording switched off, in one process")
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1d")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embedder", default="use")
    args = parser.parse_args()
    if args.switch:
        return switched(args.duration, args.embedder, args.rounds)
    if not args.before:
        parser.error("give --before DIR or --switch")
    trees = {"before": Path(args.before).resolve(), "after": ROOT}
    rows: dict[str, list[dict]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            rows[name].append(one(tree, args.scenario, args.duration, args.embedder))
            print(name, rows[name][-1], flush=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    for k in ("wall", "disk", "events"):
        print(
            f"{k}: before {med['before'][k]:.6g}, after {med['after'][k]:.6g}, "
            f"after/before {med['after'][k] / med['before'][k]:.3f}"
        )


if __name__ == "__main__":
    main()
