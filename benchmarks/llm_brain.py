"""The LLM brain's concurrency, measured: the 25-agent town for one simulated hour against
a local OpenAI-compatible server (tests/llmserver.py, in a process of its own) that answers
every call after a fixed latency. Everything goes through litellm and HTTP on 127.0.0.1;
no model, no network.

    python benchmarks/llm_brain.py [--latency 0.2] [--for 1h] [--concurrency 32] [--sequential]

Runs the hour twice, in order (one batch of the clock at a time) and with run-ahead, checks
that both wrote the same event log, and prints for each: requests, model calls and tokens
per agent per game hour by request kind, the average number of calls in flight, the wall
time, its lower bounds, and the speed-up over sending the same calls one at a time (calls x
latency, or measured with --sequential). Lower bounds: in order, the rounds of calls the
clock sends (rounds x latency); with run-ahead, the longest chain of calls that wait for
each other (`Chain`: an agent's calls in order, and calls of agents sharing an arena),
and, looser, the longest chain of one agent's calls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENAI_API_KEY", "sk-local-benchmark")

from smallville.brain import LLMConfig  # noqa: E402
from smallville.runner import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402
from smallville.timefmt import parse_duration  # noqa: E402


class Server:
    """tests/llmserver.py in a subprocess."""

    def __init__(self, seed: int, latency: float) -> None:
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "llmserver.py"), "--seed", str(seed),
                                      "--latency", str(latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        self.api_base = self.proc.stdout.readline().strip()
        self.started_cpu = self.cpu()          # its start-up (importing litellm) is not the run's

    def cpu(self) -> float | None:
        """CPU seconds the server has used so far (Linux only)."""
        if not Path("/proc").is_dir():
            return None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> dict:
        used = self.cpu()
        self.proc.stdin.close()
        stats = json.loads(self.proc.stdout.readline())
        if used is not None:
            stats["cpu_s"] = used - self.started_cpu
        self.proc.wait()
        return stats


class Chain:
    """The longest chain of calls in a run that depend on each other, one after the other:
    an agent's call waits for its calls before it, and for the calls of every agent that
    shares its arena (agents see, talk to and change things for those in their own arena
    only, so a call there may change what it asks). Recorded batch by batch from the
    in-order run; at one call of latency per link, no schedule that respects who can meet
    whom can end sooner."""

    def __init__(self) -> None:
        self.agent: dict[str, int] = {}        # the depth of each agent's latest call
        self.arena: dict[str, int] = {}        # the deepest call made in each arena so far
        self.longest = 0

    def batch(self, world, agents, asking) -> None:
        where = {a: world.area_of(a) for a in agents}
        present: dict[str, int] = {}
        for a in agents:                       # what each arena's people carry now
            present[where[a]] = max(present.get(where[a], 0), self.agent.get(a, 0))
        depth = {a: 1 + max(self.agent.get(a, 0), present[where[a]], self.arena.get(where[a], 0)) for a in set(asking)}
        for a, d in depth.items():
            self.agent[a] = d
            self.arena[where[a]] = max(self.arena.get(where[a], 0), d)
            self.longest = max(self.longest, d)


def warm_up() -> None:
    """One call through litellm before timing: its import and first call load modules
    that each process pays for once; both runs are measured warm."""
    import litellm

    server = Server(0, 0.0)
    try:
        litellm.completion(model="openai/bench", api_base=server.api_base, max_tokens=4,
                           messages=[{"role": "user", "content": "warm up"}])
    finally:
        server.close()


def measure(scenario, duration: float, latency: float, concurrency: int, lookahead: float,
            chain: Chain | None = None) -> dict:
    from smallville.sim import dispatch, engine

    server = Server(scenario.seed, latency)
    if chain is not None:                      # watch the in-order run's batches
        plain_flush, plain_init = dispatch.Dispatcher._flush, engine.Simulation.__init__

        def init(sim, *args, **kwargs):
            plain_init(sim, *args, **kwargs)
            sim.dispatch.world, sim.dispatch.agent_names = sim.world, list(sim.agents)

        def flush(self, event):
            if getattr(self, "world", None) is not None:
                chain.batch(self.world, self.agent_names, [p[0] for p in self._pending])
            plain_flush(self, event)

        engine.Simulation.__init__, dispatch.Dispatcher._flush = init, flush
    try:
        with tempfile.TemporaryDirectory() as runs:
            config = LLMConfig(model="openai/bench", api_base=server.api_base, echo_request=True,
                               max_concurrency=concurrency, timeout=30.0, preflight=False, lookahead=lookahead)
            began, cpu, copies = time.perf_counter(), time.process_time(), _children_cpu()
            result = run_scenario(scenario, runs_dir=runs, duration=duration, brain=config, embedder="lexical")
            wall, cpu, copies = time.perf_counter() - began, time.process_time() - cpu, _children_cpu() - copies
            events = (result.path / "events.jsonl").read_bytes()
    finally:
        stats = server.close()
        if chain is not None:
            engine.Simulation.__init__, dispatch.Dispatcher._flush = plain_init, plain_flush
    return {"wall": wall, "cpu": cpu, "copies_cpu": copies, "usage": result.manifest["usage"], "server": stats,
            "batches": result.simulation.dispatch.batches, "events": hashlib.sha256(events).hexdigest()}


def _children_cpu() -> float:
    """CPU seconds of ended child processes (run-ahead's copies, once waited for)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(name: str, run: dict, agents: int, hours: float, latency: float, bound: float) -> None:
    usage = run["usage"]
    total = usage["total"]
    one_at_a_time = total["calls"] * latency
    print(f"\n{name}: wall {run['wall']:.1f} s; calls in flight {usage['in_flight']:.1f} on average "
          f"(server: {run['server']['mean_in_flight']:.1f}), {run['server']['max_in_flight']} at most")
    print(f"  lower bound {bound:.1f} s (wall / bound {run['wall'] / bound:.2f}); one call at a time "
          f"(calls x latency) {one_at_a_time:.1f} s; speed-up {one_at_a_time / run['wall']:.1f}x")
    print(f"  CPU: {run['cpu']:.1f} s in this process, {run['copies_cpu']:.1f} s in run-ahead copies, "
          f"{run['server'].get('cpu_s', 0.0):.1f} s in the server")
    if "run_ahead" in usage:
        ra = usage["run_ahead"]
        print(f"  run-ahead: {ra.get('forks', 0)} copies forked, {ra.get('sent', 0)} requests fetched, "
              f"{ra.get('unused', 0)} fetched but never used")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1h")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per call")
    parser.add_argument("--concurrency", type=int, default=32, help="max calls in flight")
    parser.add_argument("--lookahead", default="1h", help="how far copies run ahead (run-ahead run)")
    parser.add_argument("--sequential", action="store_true", help="also measure one call at a time")
    args = parser.parse_args()
    scenario = load_scenario(args.scenario)
    duration = parse_duration(args.duration)
    hours, agents = duration / 3600, len(scenario.agents)
    print(f"{scenario.name}: {agents} agents, {args.duration} simulated, server latency "
          f"{args.latency * 1000:.0f} ms, up to {args.concurrency} calls in flight; {os.cpu_count()} cores")
    warm_up()
    coupled = Chain()
    in_order = measure(scenario, duration, args.latency, args.concurrency, 0.0, coupled)
    ahead = measure(scenario, duration, args.latency, args.concurrency, parse_duration(args.lookahead))
    usage = ahead["usage"]
    scale = 1 / (agents * hours)
    print(f"\n{'request kind':<20}{'requests':>10}{'calls':>8}{'prompt tok':>12}{'tokens':>9}   (per agent per game hour)")
    for kind, row in list(usage["by_kind"].items()) + [("all", usage["total"])]:
        print(f"{kind:<20}{row['requests'] * scale:>10.2f}{row['calls'] * scale:>8.2f}"
              f"{row['prompt_tokens'] * scale:>12.0f}{(row['prompt_tokens'] + row['completion_tokens']) * scale:>9.0f}")
    print(f"ratings reused: {usage['total']['reused']}; most calls by one agent: "
          f"{max(a['calls'] for a in usage['by_agent'].values())}")
    longest = max(a["calls"] for a in usage["by_agent"].values())
    report("in order", in_order, agents, hours, args.latency, in_order["usage"]["rounds"] * args.latency)
    report("run-ahead", ahead, agents, hours, args.latency, coupled.longest * args.latency)
    print(f"  lower bounds for run-ahead: one agent's calls in a row: {longest} ({longest * args.latency:.1f} s); "
          f"calls linked by an agent's order or a shared arena: {coupled.longest} "
          f"({coupled.longest * args.latency:.1f} s, used above)")
    same = "identical" if in_order["events"] == ahead["events"] else "DIFFERENT"
    print(f"\nevent logs of the two runs: {same}; run-ahead is {in_order['wall'] / ahead['wall']:.1f}x faster")
    if args.sequential:
        seq = measure(scenario, duration, args.latency, 1, 0.0)
        print(f"measured one call at a time: {seq['wall']:.1f} s; run-ahead speed-up {seq['wall'] / ahead['wall']:.1f}x")


if __name__ == "__main__":
    main()
