"""Evaluating believability spends its time on model calls, not on re-simulating: 5
conditions of the 25-agent town, every agent asked the whole protocol (25 questions, 26 in
The Ville: its two probes each get one) through a local OpenAI-compatible server
(tests/llmserver.py, in a process of its own) that answers every call after a fixed
latency, then every comparison judged through the same server. No model, no network.

    python benchmarks/evaluate.py [--latency 0.2] [--for 1h] [--concurrency 32] [--embedder lexical]

Prints, for the interviews and for the judging: the calls, the wall time, and its bound
(rounds of `concurrency` calls x latency), and the time it took to bring every run's state
back (checkpoints, no re-simulation) beside the time the runs took to simulate.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llm_brain import Server  # noqa: E402

from smallville.brain import LLMConfig  # noqa: E402
from smallville.evaluate import evaluate  # noqa: E402
from smallville.experiment import load_experiment, run_experiment  # noqa: E402

CONDITIONS = """\
conditions:
  full: {}
  no_reflection: {ablate: [reflection]}
  no_reflection_no_planning: {ablate: [reflection, planning]}
  no_memory_no_reflection_no_planning: {ablate: [memory, reflection, planning]}
  no_sharing: {ablate: [sharing]}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per call")
    parser.add_argument("--for", dest="duration", default="1h", help="simulated time of each run")
    parser.add_argument("--concurrency", type=int, default=32, help="calls in flight at once")
    parser.add_argument("--embedder", default="lexical", help="the runs' embedder (use or lexical)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "bench.yaml"
        spec.write_text(
            f"name: bench\nscenario: {ROOT / 'scenarios' / 'the_ville.yaml'}\nduration: {args.duration}\n"
            f"seeds: [1]\nembedder: {args.embedder}\nout: {Path(tmp) / 'out'}\n{CONDITIONS}"
        )
        runs = run_experiment(load_experiment(spec), workers=2, quiet=True)
        simulated = sum(r["wall_seconds"] for r in runs.rows)
        server = Server(seed=1, latency=args.latency)
        try:
            model = LLMConfig(
                model="openai/bench",
                api_base=server.api_base,
                echo_request=True,
                max_concurrency=args.concurrency,
                preflight=False,
            )
            result = evaluate([runs.out], brain_settings=model, judge_settings=model)
        finally:
            stats = server.close()
    interviews, judged = len(result.asked), len(result.matches)
    agents = len({a.request.agent for a in result.asked})
    print(
        f"{len(result.runs)} conditions x {agents} agents x {interviews // (len(result.runs) * agents)} questions "
        f"= {interviews:,} interviews, {judged:,} comparisons judged; latency {args.latency:g} s, "
        f"{args.concurrency} calls at once; server: {stats['chats']:,} calls, "
        f"{stats['mean_in_flight']:.1f} in flight on average"
    )
    print(
        f"states restored and memories recalled for every agent: {result.seconds['restore']:.1f} s "
        f"(simulating the runs took {simulated:.1f} s)"
    )
    for name, calls in (("interviews", interviews), ("judge", judged)):
        bound = math.ceil(calls / args.concurrency) * args.latency
        wall = result.seconds[name]
        print(
            f"{name}: {calls:,} calls in {wall:.1f} s; bound by the calls: {bound:.1f} s "
            f"({wall / bound:.2f}x the bound)"
        )
    print(
        json.dumps(
            {
                "seconds": {k: round(v, 2) for k, v in result.seconds.items()},
                "server": stats,
                "simulated_s": round(simulated, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
