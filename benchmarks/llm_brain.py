"""The LLM brain's concurrency, measured: the 25-agent town for one simulated hour against
a local OpenAI-compatible server (tests/llmserver.py) that answers every call after a fixed
latency. Everything goes through litellm and HTTP on 127.0.0.1; no model, no network.

    python benchmarks/llm_brain.py [--latency 0.2] [--for 1h] [--concurrency 32] [--sequential]

Prints requests, model calls and tokens per agent per game hour by request kind, the
average number of calls in flight, the wall time, its lower bound (rounds x latency) and
the speed-up over sending the same calls one at a time (calls x latency, or measured with
--sequential).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-local-benchmark")

from llmserver import LLMServer  # noqa: E402
from smallville.brain import LLMConfig  # noqa: E402
from smallville.runner import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402
from smallville.timefmt import parse_duration  # noqa: E402


def measure(scenario, duration: float, latency: float, concurrency: int) -> dict:
    with LLMServer(seed=scenario.seed, latency=latency) as server, tempfile.TemporaryDirectory() as runs:
        config = LLMConfig(model="openai/bench", api_base=server.api_base, echo_request=True,
                           max_concurrency=concurrency, timeout=30.0, preflight=False)
        began = time.perf_counter()
        result = run_scenario(scenario, runs_dir=runs, duration=duration, brain=config, embedder="lexical")
        wall = time.perf_counter() - began
        return {"wall": wall, "manifest": result.manifest, "max_in_flight": server.max_in_flight,
                "batches": result.simulation.dispatch.batches}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1h")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per call")
    parser.add_argument("--concurrency", type=int, default=32, help="max calls in flight")
    parser.add_argument("--sequential", action="store_true", help="also measure one call at a time")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    duration = parse_duration(args.duration)
    hours = duration / 3600
    agents = len(scenario.agents)
    print(f"{scenario.name}: {agents} agents, {args.duration} simulated, server latency "
          f"{args.latency * 1000:.0f} ms, up to {args.concurrency} calls in flight")
    run = measure(scenario, duration, args.latency, args.concurrency)
    usage = run["manifest"]["usage"]
    print(f"{'request kind':<20}{'requests':>10}{'calls':>8}{'tokens':>9}   (per agent per game hour)")
    for kind, row in usage["by_kind"].items():
        scale = 1 / (agents * hours)
        print(f"{kind:<20}{row['requests'] * scale:>10.2f}{row['calls'] * scale:>8.2f}"
              f"{(row['prompt_tokens'] + row['completion_tokens']) * scale:>9.0f}")
    total = usage["total"]
    scale = 1 / (agents * hours)
    print(f"{'all':<20}{total['requests'] * scale:>10.2f}{total['calls'] * scale:>8.2f}"
          f"{(total['prompt_tokens'] + total['completion_tokens']) * scale:>9.0f}")
    print(f"ratings reused: {total['reused']}; engine batches: {run['batches']}; rounds sent to the model: "
          f"{usage['rounds']}")
    bound = usage["rounds"] * args.latency
    one_at_a_time = total["calls"] * args.latency
    print(f"calls in flight: {usage['in_flight']:.1f} on average, {run['max_in_flight']} at most")
    print(f"wall time: {run['wall']:.1f} s; lower bound (rounds x latency): {bound:.1f} s; "
          f"one call at a time (calls x latency): {one_at_a_time:.1f} s; speed-up {one_at_a_time / run['wall']:.1f}x")
    if args.sequential:
        seq = measure(scenario, duration, args.latency, 1)
        print(f"measured one call at a time: {seq['wall']:.1f} s; speed-up {seq['wall'] / run['wall']:.1f}x")


if __name__ == "__main__":
    main()
