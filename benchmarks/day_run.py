"""Time the default one-day run of the_ville, as a user's first command runs it.

    python benchmarks/day_run.py [--scenario scenarios/the_ville.yaml] [--for 1d] [--seed N]

Prints simulated minutes per wall second, memories per agent and brain requests per agent
per game hour, for the default embedder and, as the baseline measured in the same run,
for the lexical embedder (no model at all), with the ratio between the two.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smallville.run import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402
from smallville.timefmt import parse_duration  # noqa: E402


def measure(scenario, duration: float, seed: int | None, embedder: str) -> dict:
    with tempfile.TemporaryDirectory() as runs:
        began = time.perf_counter()
        result = run_scenario(scenario, runs_dir=runs, seed=seed, duration=duration, embedder=embedder)
        wall = time.perf_counter() - began
    agents = len(scenario.agents)
    m = result.manifest
    requests = sum(m.requests.values())
    return {"embedder": m.embedder["name"], "wall": wall, "sim_min_per_s": duration / 60 / wall,
            "memories_per_agent": m.counts["memories"] / agents,
            "requests_per_agent_hour": requests / agents / (duration / 3600), "events": m.counts["events"],
            "conversations": m.counts["conversations"], "reflections": m.counts["reflections"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1d")
    parser.add_argument("--seed", type=int)
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    duration = parse_duration(args.duration)
    print(f"{scenario.name}: {len(scenario.agents)} agents, {args.duration} simulated, offline brain")
    rows = [measure(scenario, duration, args.seed, e) for e in ("use", "lexical")]
    print(f"{'embedder':<22}{'wall s':>8}{'sim min/s':>11}{'x real time':>13}{'memories/agent':>16}"
          f"{'requests/agent/h':>18}{'talks':>7}{'reflections':>13}")
    for r in rows:
        print(f"{r['embedder']:<22}{r['wall']:>8.1f}{r['sim_min_per_s']:>11.0f}{r['sim_min_per_s'] * 60:>13.0f}"
              f"{r['memories_per_agent']:>16.0f}{r['requests_per_agent_hour']:>18.1f}{r['conversations']:>7}"
              f"{r['reflections']:>13}")
    print(f"default / lexical baseline wall time: {rows[0]['wall'] / rows[1]['wall']:.2f}x")
    print(f"peak memory (RSS): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
