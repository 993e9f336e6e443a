"""How close `smallville estimate` comes, and how fast it is: the estimate of a window
against what the same window really sends to the local test server (tests/llmserver.py),
for the 25-agent town over two simulated hours and cafe_trio over three; then models that
act unlike the offline brain (the server's random valid answers, plain or sociable, several
seeds): a 3-hour window against the plain estimate and against `--from` a 2-hour pilot;
then the time to estimate the 25-agent town for a whole simulated day, offline.

    python benchmarks/estimate.py [--skip-pilot] [--skip-day]
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

from smallville.brain import LLMConfig  # noqa: E402
from smallville.estimate import estimate  # noqa: E402
from smallville.run import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402

from llmserver import SOCIABLE, LLMServer  # noqa: E402


def compare(path: Path, hours: float) -> None:
    scenario = load_scenario(str(path))
    config = LLMConfig(model="openai/bench", echo_request=True, preflight=False, max_concurrency=16)
    began = time.perf_counter()
    est = estimate(scenario, config, duration=hours * 3600, embedder="lexical").to_dict()
    took = time.perf_counter() - began
    with LLMServer(seed=scenario.seed) as server, tempfile.TemporaryDirectory() as runs:
        # In order: run-ahead would add calls fetched but never used, as timing has it.
        live = LLMConfig(
            model="openai/bench",
            api_base=server.api_base,
            echo_request=True,
            preflight=False,
            max_concurrency=16,
            lookahead=0,
        )
        run_scenario(scenario, runs_dir=runs, duration=hours * 3600, brain=live, embedder="lexical")
        actual = sent(server)
    print(f"\n{scenario.name}, {len(scenario.agents)} agents, {hours:g} simulated hours (estimated in {took:.1f} s)")
    print(f"{'':<20}{'estimate':>12}{'range':>22}{'actual':>12}{'estimate/actual':>18}")
    for name in ("requests", "prompt_tokens", "completion_tokens"):
        lo, hi = est["range"][name]
        print(f"{name:<20}{est[name]:>12,}{f'{lo:,}-{hi:,}':>22}{actual[name]:>12,}{est[name] / actual[name]:>18.2f}")


def sent(server: LLMServer) -> dict:
    return {
        "requests": server.chats,
        "prompt_tokens": sum(u["prompt_tokens"] for u in server.usages),
        "completion_tokens": sum(u["completion_tokens"] for u in server.usages),
    }


def pilots(pilot_h: float = 2, window_h: float = 3) -> None:
    """Plain and piloted estimates of `window_h` hours against runs on models that act
    unlike the offline brain (in order, so that every count is exact and repeatable)."""
    figures = ("requests", "prompt_tokens", "completion_tokens")
    ratios: dict[str, dict[str, list[float]]] = {m: {f: [] for f in figures} for m in ("plain", "pilot")}
    print(f"\nmodels unlike the offline brain: estimate/actual of {window_h:g} h, plain / --from a {pilot_h:g} h pilot")
    print(f"{'':<34}" + "".join(f"{f:>26}" for f in figures))
    for name, seeds in (("cafe_trio", range(1, 8)), ("the_ville", range(1, 4))):
        scenario = load_scenario(str(ROOT / "scenarios" / f"{name}.yaml"))
        plain = estimate(scenario, LLMConfig(model="openai/bench"), duration=window_h * 3600, embedder="lexical")
        for seed in seeds:
            for prefer in (None, SOCIABLE):
                with tempfile.TemporaryDirectory() as runs:
                    actual = {}
                    for hours in (pilot_h, window_h):
                        with LLMServer(seed=seed, prefer=prefer) as server:
                            live = LLMConfig(model="openai/bench", api_base=server.api_base, backoff=0, lookahead=0)
                            run = run_scenario(
                                scenario, runs_dir=runs, duration=hours * 3600, brain=live, embedder="lexical"
                            )
                            actual[hours] = (run.path, sent(server))
                    piloted = estimate(
                        scenario,
                        LLMConfig(model="openai/bench"),
                        duration=window_h * 3600,
                        embedder="lexical",
                        from_run=actual[pilot_h][0],
                    ).to_dict()
                truth = actual[window_h][1]
                cells = []
                for f in figures:
                    ratios["plain"][f].append(plain.to_dict()[f] / truth[f])
                    ratios["pilot"][f].append(piloted[f] / truth[f])
                    cells.append(f"{ratios['plain'][f][-1]:.2f} / {ratios['pilot'][f][-1]:.2f}")
                label = f"{name} seed {seed} {'sociable' if prefer else 'random'}"
                print(f"{label:<34}" + "".join(f"{c:>26}" for c in cells))
    for method, by_figure in ratios.items():
        print(
            f"{method + ': range, within 30%':<34}"
            + "".join(
                f"{f'{min(xs):.2f}-{max(xs):.2f}, {sum(0.7 <= x <= 1.3 for x in xs)}/{len(xs)}':>26}"
                for xs in by_figure.values()
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-pilot", action="store_true", help="skip the models unlike the offline brain")
    parser.add_argument("--skip-day", action="store_true", help="skip timing the estimate of a whole day")
    args = parser.parse_args()
    compare(ROOT / "scenarios" / "the_ville.yaml", 2)
    compare(ROOT / "scenarios" / "cafe_trio.yaml", 3)
    if not args.skip_pilot:
        pilots()
    if not args.skip_day:
        scenario = load_scenario(str(ROOT / "scenarios" / "the_ville.yaml"))
        began = time.perf_counter()
        est = estimate(scenario, LLMConfig(model="openai/gpt-4o-mini"), duration=86400).to_dict()
        print(
            f"\nthe 25-agent town for a simulated day on openai/gpt-4o-mini: {est['requests']:,} requests, "
            f"{est['prompt_tokens']:,} prompt tokens, ${est['cost_usd']:.2f}; estimated offline in "
            f"{time.perf_counter() - began:.1f} s (target: under a minute)"
        )


if __name__ == "__main__":
    main()
