"""Generated towns at scale with the offline brain: making the town, loading it, and running it.

    python benchmarks/engine_scale.py [--sizes 1000,5000,10000] [--for 1h] [--seed 0] [--embedder lexical|use]
                                      [--before DIR] [--profile]

Each size runs in a fresh subprocess (so peak memory, ru_maxrss, is that size's own): it
generates the town and writes its files as `smallville town generate` does, loads it (every
agent file read and checked), and runs it for the simulated time asked, logging to a temporary
runs folder. The table puts, per size, the time to generate and to load, the run's wall time
and CPU time (on a shared machine the CPU time is the steadier figure), simulated minutes per
wall second, wall seconds per agent, the peak memory of the whole, memories per agent and
conversations beside each other, then the run's cost per agent at the largest size over the
smallest (1.0 = linear in the number of agents). A size that takes long can be run
alone (`--sizes 10000`); `--rows FILE` adds each size's measurements to FILE as a JSON line as
soon as it is done, and the table is printed from every row in FILE, so sizes run one at a time
still come out side by side. `--before DIR` runs each size a second time with the smallville
in DIR (a checkout of an earlier version: `git archive COMMIT | tar -x -C DIR`), in the same
run, and prints its rows and the ratio of the two versions' CPU times; `--profile` runs each
size under cProfile and prints where the time went (`benchmarks/where.py`), for both versions
(times under the profiler are about twice the plain ones). The figures of a simulated day
(`--sizes 25,250,1000 --for 1d`) are in docs/performance.md.
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

from where import table as where_table  # noqa: E402


def one(size: int, duration: float, seed: int, embedder: str, profile: bool = False) -> dict:
    """Generate, load and run one town; the measurements as a dict."""
    from where import breakdown, profiled

    from smallville.run import run_scenario
    from smallville.scenario import load_scenario
    from smallville.town import generate_town, write_town

    with tempfile.TemporaryDirectory() as tmp:
        began, began_cpu = time.perf_counter(), time.process_time()
        write_town(generate_town(size, seed), Path(tmp) / "town.yaml")
        generated, generated_cpu = time.perf_counter(), time.process_time()
        scenario = load_scenario(Path(tmp) / "town.yaml")
        loaded, loaded_cpu = time.perf_counter(), time.process_time()

        def work():
            return run_scenario(scenario, runs_dir=Path(tmp) / "runs", duration=duration, embedder=embedder)

        result, stats = profiled(work) if profile else (work(), None)
        wall, cpu = time.perf_counter() - loaded, time.process_time() - loaded_cpu
    m = result.manifest
    return {
        "where": stats and breakdown(stats),
        "agents": size,
        "for": duration,
        "seed": seed,
        "generate_s": generated - began,
        "generate_cpu_s": generated_cpu - began_cpu,
        "load_s": loaded - generated,
        "wall_s": wall,
        "cpu_s": cpu,
        "sim_min_per_s": duration / 60 / wall,
        "s_per_agent": wall / size,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "memories_per_agent": m.counts["memories"] / size,
        "ms_per_memory": 1000 * wall / max(1, m.counts["memories"]),
        "conversations": m.counts["conversations"],
        "events": m.counts["events"],
        "embedder": m.embedder["name"],
        "probes": {k: len(v["end"]) for k, v in m.probes.items()},
    }


def table(rows: list[dict], label: str) -> str:
    """The measurements side by side, one row a size (and version), smallest first."""
    rows = sorted(rows, key=lambda r: (r["agents"], r.get("code", "")))
    out = [
        f"{label}, offline brain, embedder {rows[0]['embedder']}, seed {rows[0]['seed']}",
        "",
        "| agents | version | generate | load | run | run CPU | simulated min / wall s | run s per agent "
        "| peak memory "
        "| memories per agent | conversations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    out += [
        f"| {r['agents']:,} | {r.get('code', 'this')} | {r['generate_s']:.1f} s | {r['load_s']:.1f} s "
        f"| {r['wall_s']:.1f} s "
        f"| {r['cpu_s']:.1f} s | {r['sim_min_per_s']:.2f} | {r['s_per_agent']:.4f} | {r['peak_mib']:,.0f} MiB "
        f"| {r['memories_per_agent']:.0f} | {r['conversations']:,} |"
        for r in rows
    ]
    out.append("")
    for code in dict.fromkeys(r.get("code", "this") for r in rows):
        mine = [r for r in rows if r.get("code", "this") == code]
        first, last = mine[0], mine[-1]
        if len(mine) > 1:
            out.append(
                f"{code}: run cost per agent at {last['agents']:,} / at {first['agents']:,}: "
                f"{last['s_per_agent'] / first['s_per_agent']:.2f}x wall, "
                f"{last['cpu_s'] / last['agents'] / (first['cpu_s'] / first['agents']):.2f}x CPU"
            )
    for size in dict.fromkeys(r["agents"] for r in rows):
        pair = {r.get("code", "this"): r for r in rows if r["agents"] == size}
        if "this" in pair and "before" in pair:
            out.append(
                f"{size:,} agents: run CPU before / this version: "
                f"{pair['before']['cpu_s'] / pair['this']['cpu_s']:.2f}x "
                f"(wall {pair['before']['wall_s'] / pair['this']['wall_s']:.2f}x)"
            )
        wheres = {f"{size:,} {code}": r["where"] for code, r in pair.items() if r.get("where")}
        if wheres:
            out += ["", where_table(wheres), ""]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default="1000,5000,10000", help="comma-separated town sizes (default 1000,5000,10000)"
    )
    parser.add_argument("--for", dest="duration", default="1h", help="simulated time per size (default 1h)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--embedder", default="lexical", help="lexical (default) or use")
    parser.add_argument(
        "--rows",
        type=Path,
        metavar="FILE.jsonl",
        help="add each size's row to FILE and print the table of every row in it",
    )
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run each size with the smallville in DIR")
    parser.add_argument("--profile", action="store_true", help="run under cProfile and print where the time goes")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--code", help=argparse.SUPPRESS)  # the child's smallville, if not this one
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, args.code)
    from smallville.timefmt import parse_duration

    duration = parse_duration(args.duration)
    if args.one:
        print(json.dumps(one(args.one, duration, args.seed, args.embedder, args.profile)))
        return
    rows = []
    versions = {"this": None, **({"before": str(args.before.resolve())} if args.before else {})}
    for size, (code, path) in ((int(s), v) for s in args.sizes.split(",") for v in versions.items()):
        child = (
            [
                sys.executable,
                __file__,
                "--one",
                str(size),
                "--for",
                args.duration,
                "--seed",
                str(args.seed),
                "--embedder",
                args.embedder,
            ]
            + (["--code", path] if path else [])
            + (["--profile"] * args.profile)
        )
        out = subprocess.run(child, check=True, capture_output=True, text=True).stdout
        rows.append({**json.loads(out.strip().splitlines()[-1]), "code": code})
        r = rows[-1]
        print(
            f"{size:,} agents ({code}): generated in {r['generate_s']:.1f} s, loaded in {r['load_s']:.1f} s, "
            f"ran in {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        if args.rows:
            with args.rows.open("a", encoding="utf-8") as f:
                f.write(json.dumps(r) + "\n")
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines() if line.strip()]
        rows = [r for r in rows if r["for"] == duration and r["seed"] == args.seed]
    print(table(rows, f"{args.duration} simulated"))


if __name__ == "__main__":
    main()
