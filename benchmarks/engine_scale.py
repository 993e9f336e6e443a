"""Engine throughput at 25, 250 and 1,000 agents, in generated towns, with the offline brain.

    python benchmarks/engine_scale.py [--sizes 25,250,1000] [--for 1d] [--seed 0] [--embedder lexical|use]

Each size runs in a fresh subprocess (so peak memory, ru_maxrss, is that size's own): it
generates a town (`smallville town generate`), loads it and runs it, logging to a temporary
runs folder. Prints, per size, the wall time of the run, simulated minutes per wall second,
wall seconds per agent, peak memory, memories per agent and wall time per memory stored
(the work an agent does grows with how many people it meets), then the cost per agent at the
largest size over the cost per agent at the smallest (1.0 = linear in the number of agents).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one(size: int, duration: float, seed: int, embedder: str) -> dict:
    """Generate, load and run one town; the measurements as a dict."""
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.town import generate_town, write_town

    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        write_town(generate_town(size, seed), Path(tmp) / "town.yaml")
        scenario = load_scenario(Path(tmp) / "town.yaml")
        loaded = time.perf_counter()
        result = run_scenario(scenario, runs_dir=Path(tmp) / "runs", duration=duration, embedder=embedder)
        wall = time.perf_counter() - loaded
    m = result.manifest
    return {"agents": size, "load_s": loaded - began, "wall_s": wall, "sim_min_per_s": duration / 60 / wall,
            "s_per_agent": wall / size, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "memories_per_agent": m.counts["memories"] / size,
            "ms_per_memory": 1000 * wall / max(1, m.counts["memories"]), "conversations": m.counts["conversations"],
            "events": m.counts["events"], "embedder": m.embedder["name"],
            "probes": {k: len(v["end"]) for k, v in m.probes.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="25,250,1000", help="comma-separated town sizes (default 25,250,1000)")
    parser.add_argument("--for", dest="duration", default="1d", help="simulated time per size (default 1d)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="lexical", help="lexical (default) or use")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)        # the child process
    args = parser.parse_args()
    from smallville.timefmt import parse_duration

    duration = parse_duration(args.duration)
    if args.one:
        print(json.dumps(one(args.one, duration, args.seed, args.embedder)))
        return
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        child = [sys.executable, __file__, "--one", str(size), "--for", args.duration, "--seed", str(args.seed),
                 "--embedder", args.embedder]
        out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{size} agents: {r['wall_s']:.1f} s", file=sys.stderr, flush=True)
    print(f"{args.duration} simulated, offline brain, embedder {rows[0]['embedder']}, seed {args.seed}\n")
    print("| agents | wall | simulated min / wall s | wall s per agent | peak memory | memories per agent | wall ms per memory | conversations |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['agents']:,} | {r['wall_s']:.1f} s | {r['sim_min_per_s']:.1f} | {r['s_per_agent']:.3f} "
              f"| {r['peak_mib']:.0f} MiB | {r['memories_per_agent']:.0f} | {r['ms_per_memory']:.3f} | {r['conversations']:,} |")
    first, last = rows[0], rows[-1]
    print(f"\ncost per agent at {last['agents']:,} / at {first['agents']:,}: "
          f"{last['s_per_agent'] / first['s_per_agent']:.2f}x; cost per memory: "
          f"{last['ms_per_memory'] / first['ms_per_memory']:.2f}x")


if __name__ == "__main__":
    main()
