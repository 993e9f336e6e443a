"""How long `smallville serve`'s agent panel and `smallville interview` take at a time between
checkpoints and in a run's first hour, exact (the state simulated on from the saved state
before, as before) and as they do now (the saved state itself, a checkpoint's or the town's
start, when going on would cost more than `EXACT_WORK` agent-seconds).
Goal: a 1,000-agent town's panel under 1 s at any time; the_ville's still exact.

    python benchmarks/panel.py [--agents 1000] [--for 2h] [--past 30] [--early 10] [--runs-dir DIR]

Generates a town (`smallville town generate`), runs it offline (lexical embedder), runs the_ville
as long, and asks each run's panel of its first agent PAST minutes after its last checkpoint but
one and EARLY minutes into the run, each in a fresh process once it has imported smallville (a
server's first look at a time); then times the whole `smallville interview` command PAST minutes
after that checkpoint, with `--exact` (as before) and without.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def child(run: str, t: float, work: float, opened: bool) -> dict:
    """One panel, timed, in this fresh process; `opened`: after the page has read the town
    (`/api/town`), so the server holds the scenario, as the version before did not."""
    from smallville.run import Run
    from smallville.serve.minds import Minds

    run_path = Path(run)
    agent = Run.open(run_path).manifest.agents[0]
    minds = Minds(exact_work=work)
    if opened:
        minds.run(run_path)
    began = time.perf_counter()
    panel = minds.panel(run_path, t, agent)
    seconds = time.perf_counter() - began
    minds.close()
    return {"seconds": seconds, "t": panel["t"], "asked": panel["asked"], "note": panel.get("note", "")}


def measured(run: Path, t: float, work: float, opened: bool = True) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(run), str(t), str(work), str(int(opened))],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.splitlines()[-1])


def ville_run(duration: float, runs: Path) -> Path:
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    existing = sorted(p for p in runs.glob("*") if (p / "manifest.json").exists()) if runs.exists() else []
    if existing:
        return existing[-1]
    scenario = load_scenario(ROOT / "scenarios" / "the_ville.yaml")
    return run_scenario(scenario, runs_dir=runs, duration=duration, embedder="lexical").path


def row(name: str, run: Path, t: float) -> str:
    from smallville.serve.minds import EXACT_WORK

    before = measured(run, t, float("inf"), opened=False)
    cold, now = measured(run, t, EXACT_WORK, opened=False), measured(run, t, EXACT_WORK)
    shown = "exact" if now["t"] == t and not now["note"] else f"as of {now['t']:g} s: {now['note']}"
    return (
        f"{name:<22} t={t:>6g} s  before (exact) {before['seconds']:6.2f} s   now {now['seconds']:5.2f} s"
        f"  (the town not yet read: {cold['seconds']:5.2f} s)  {shown}"
    )


def interview_row(name: str, run: Path, t: float) -> str:
    """The whole `smallville interview` command at `t`, `--exact` (as before) and as now."""
    from smallville.run import Run

    manifest = Run.open(run).manifest
    asked = ["interview", str(run), manifest.agents[0], "What are you doing today?", "--at", manifest.when(t), "--json"]
    seconds, said = {}, {}
    for how, extra in (("before", ["--exact"]), ("now", [])):
        began = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "smallville", *asked, *extra], capture_output=True, text=True)
        seconds[how] = time.perf_counter() - began
        said[how] = json.loads(out.stdout) if out.returncode == 0 else {"state": out.stderr.strip()}
    now = said["now"]
    shown = now["state"] + (f": {now['note']}" if "note" in now else "")
    return f"{name:<22} t={t:>6g} s  before (--exact) {seconds['before']:6.2f} s   now {seconds['now']:5.2f} s  {shown}"


def past_checkpoint(run: Path, past: float) -> float:
    """`past` seconds after the run's last checkpoint but one."""
    from smallville.checkpoint import checkpoints

    saved = [c.t for c in checkpoints(run)]
    return (saved[-2] if len(saved) > 1 else 0.0) + past


def main() -> None:
    from serve_draw import a_run

    from smallville.timefmt import parse_duration

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--for", dest="duration", default="2h", help="simulated time of the runs (default 2h)")
    parser.add_argument("--past", type=float, default=30, help="minutes past a checkpoint (default 30)")
    parser.add_argument("--early", type=float, default=10, help="minutes into the run (default 10)")
    parser.add_argument("--runs-dir", type=Path, help="keep the runs here (and use the ones there, if any)")
    args = parser.parse_args()
    duration = parse_duration(args.duration)
    with tempfile.TemporaryDirectory() as scratch:
        where = args.runs_dir or Path(scratch)
        big = a_run(args.agents, duration, where / "town" / "runs")
        ville = ville_run(duration, where / "ville")
        runs = ((f"{args.agents}-agent town", big), ("the_ville (25 agents)", ville))
        print(f"the agent panel, {args.past:g} minutes past a checkpoint (seconds in a fresh process):")
        for name, run in runs:
            print(row(name, run, past_checkpoint(run, args.past * 60)))
        print(f"the agent panel, {args.early:g} minutes into the run, before its first checkpoint:")
        for name, run in runs:
            print(row(name, run, args.early * 60))
        print(f"`smallville interview`, {args.past:g} minutes past a checkpoint (the whole command):")
        for name, run in runs:
            print(interview_row(name, run, past_checkpoint(run, args.past * 60)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5] == "1")))
    else:
        main()
