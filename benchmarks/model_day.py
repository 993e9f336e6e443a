"""A town's day against a model that behaves as providers do: the integration check of issue 32.

The test server (tests/llmserver.py, in a process of its own) refuses a strict schema outside
OpenAI's subset (`strict`), answers at a capable model's size and cuts answers at max_tokens
(`capable`), and with `--reasoning` reasons first (a `<think>` block, `reasoning_content`, or
the answer at the end of the reasoning). Prompts carry the request (`echo_request`), so the
server answers as the offline brain would, at a capable model's size, and the town lives its
usual day. No model, no network.

    python benchmarks/model_day.py                         # the_ville, a day, strict + capable
    python benchmarks/model_day.py --for 1h --reasoning think
    python benchmarks/model_day.py --modes capable --scenario scenarios/cafe_trio.yaml

Prints, by request kind, the requests and how they were answered (valid, repaired, fallen
back, cut at max_tokens, schemas refused), whether every stored day plan covers the day from
its start without a gap, and the wall time; exits 1 if anything was refused, fell back or was
cut (the preflight's first probe of a reasoning model aside: it is cut, then asked again with
room to reason) or a plan has a gap.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from llm_brain import Server  # noqa: E402

from smallville.brain import LLMConfig  # noqa: E402
from smallville.brain.wrappers import ModelUnusable  # noqa: E402
from smallville.run import run_scenario  # noqa: E402
from smallville.run.manifest import read_manifest  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402
from smallville.timefmt import parse_duration  # noqa: E402

DAY = 24 * 60


def minutes(hhmm: str) -> int:
    hours, mins = hhmm.split(":")
    return int(hours) * 60 + int(mins)


def gaps(blocks: list) -> list[str]:
    """Where a stored plan ([start, end, activity, where], HH:MM) leaves time unplanned from
    its first block to midnight: blocks that do not meet, or a last one that ends before."""
    out, at = [], None
    for start, end, *_ in blocks:
        begin, finish = minutes(start), minutes(end)
        if at is not None:
            begin += DAY * round((at - begin) / DAY)  # the time nearest to where the plan got to
            if begin != at:
                out.append(f"{at % DAY // 60:02d}:{at % 60:02d}-{start}")
        at = begin + (finish - begin) % DAY
    if at is not None and at < DAY:
        out.append(f"{blocks[-1][1]}-24:00")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1d")
    parser.add_argument("--modes", default="strict,capable")
    parser.add_argument(
        "--reasoning",
        choices=("think", "field", "only"),
        help="the model reasons first, this way (adds `reasoning` to the modes)",
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    modes = args.modes + (",reasoning" if args.reasoning else "")
    server = Server(args.seed, 0.0, "--modes", modes, "--reasoning", args.reasoning or "think")
    scenario = load_scenario(args.scenario)
    began, stopped = time.perf_counter(), ""
    try:
        with tempfile.TemporaryDirectory() as runs:
            config = LLMConfig(model="openai/test-model", api_base=server.api_base, backoff=0.0, echo_request=True)
            try:
                run_scenario(
                    scenario, runs_dir=runs, duration=parse_duration(args.duration), brain=config, embedder="lexical"
                )
            except ModelUnusable as exc:  # the run stops; what it did is in its folder
                stopped = str(exc)
            (path,) = Path(runs).iterdir()
            m = read_manifest(path)
            plans = [e for e in map(json.loads, (path / "events.jsonl").open()) if e["kind"] == "plan"]
    finally:
        stats = server.close()
    wall = time.perf_counter() - began
    refused = stats.get("refusals", {})
    if stopped:
        print(f"stopped: {stopped}")
    print(
        f"{scenario.name}, {args.duration}, modes {modes}: {m.status} in {wall:.0f} s wall; "
        f"{m.usage['total']['calls']:,} calls, {m.usage['total']['reasoning_tokens']:,} reasoning tokens"
    )
    print(f"{'request':<18}{'requests':>9}{'valid':>8}{'repaired':>9}{'fallbacks':>10}{'cut':>6}{'refused':>9}")
    for kind, row in m.answers.items():
        print(
            f"{kind:<18}{row['requests']:>9,}{row['valid']:>8,}{row['repaired']:>9,}{row['fallbacks']:>10,}"
            f"{row['cut']:>6,}{refused.get(kind, 0):>9,}"
        )
    holes = {(p["agent"], p["time"]): gaps(p["data"]["blocks"]) for p in plans}
    holes = {k: v for k, v in holes.items() if v}
    print(f"plans stored: {len(plans)}; with time left unplanned: {len(holes)}")
    for (agent, when), where in sorted(holes.items())[:10]:
        print(f"  {agent} at {when}: {', '.join(where)}")
    preflight_cut = m.usage["by_kind"].get("preflight", {}).get("cut", 0)
    bad = (
        m.status != "completed"
        or refused
        or holes
        or m.usage["total"]["cut"] > preflight_cut
        or any(row["fallbacks"] for row in m.answers.values())
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
