"""How close `smallville estimate` comes, and how fast it is: the estimate of a window
against what the same window really sends to the local test server (tests/llmserver.py),
for the 25-agent town over two simulated hours and cafe_trio over three; then the time to
estimate the 25-agent town for a whole simulated day, offline.

    python benchmarks/estimate.py [--skip-day]
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
from smallville.estimate import estimate  # noqa: E402
from smallville.runner import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402


def compare(path: Path, hours: float) -> None:
    scenario = load_scenario(str(path))
    config = LLMConfig(model="openai/bench", echo_request=True, preflight=False, max_concurrency=16)
    began = time.perf_counter()
    est = estimate(scenario, config, duration=hours * 3600, embedder="lexical").to_dict()
    took = time.perf_counter() - began
    with LLMServer(seed=scenario.seed) as server, tempfile.TemporaryDirectory() as runs:
        # In order: run-ahead would add calls fetched but never used, as timing has it.
        live = LLMConfig(model="openai/bench", api_base=server.api_base, echo_request=True, preflight=False,
                         max_concurrency=16, lookahead=0)
        run_scenario(scenario, runs_dir=runs, duration=hours * 3600, brain=live, embedder="lexical")
        actual = {"requests": server.chats, "prompt_tokens": sum(u["prompt_tokens"] for u in server.usages),
                  "completion_tokens": sum(u["completion_tokens"] for u in server.usages)}
    print(f"\n{scenario.name}, {len(scenario.agents)} agents, {hours:g} simulated hours (estimated in {took:.1f} s)")
    print(f"{'':<20}{'estimate':>12}{'range':>22}{'actual':>12}{'estimate/actual':>18}")
    for name in ("requests", "prompt_tokens", "completion_tokens"):
        lo, hi = est["range"][name]
        print(f"{name:<20}{est[name]:>12,}{f'{lo:,}-{hi:,}':>22}{actual[name]:>12,}{est[name] / actual[name]:>18.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-day", action="store_true", help="skip timing the estimate of a whole day")
    args = parser.parse_args()
    compare(ROOT / "scenarios" / "the_ville.yaml", 2)
    compare(ROOT / "scenarios" / "cafe_trio.yaml", 3)
    if not args.skip_day:
        scenario = load_scenario(str(ROOT / "scenarios" / "the_ville.yaml"))
        began = time.perf_counter()
        est = estimate(scenario, LLMConfig(model="openai/gpt-4o-mini"), duration=86400).to_dict()
        print(f"\nthe 25-agent town for a simulated day on openai/gpt-4o-mini: {est['requests']:,} requests, "
              f"{est['prompt_tokens']:,} prompt tokens, ${est['cost_usd']:.2f}; estimated offline in "
              f"{time.perf_counter() - began:.1f} s (target: under a minute)")


if __name__ == "__main__":
    main()
