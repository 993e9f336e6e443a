"""The LLM brain's concurrency, measured: the 25-agent town for one simulated hour against
a local OpenAI-compatible server (tests/llmserver.py, in a process of its own) that answers
every call after a fixed latency. Everything goes through litellm and HTTP on 127.0.0.1;
no model, no network.

    python benchmarks/llm_brain.py [--latency 0.2] [--for 1h] [--concurrency N] [--sequential]
    python benchmarks/llm_brain.py --town 250          # a generated town of 250 agents
    python benchmarks/llm_brain.py --bounds --for 1d
    python benchmarks/llm_brain.py --memory salience   # under the salience memory model
    python benchmarks/llm_brain.py --town 250 --servers 1,2,4 --cap 8   # one model on several servers
    python benchmarks/llm_brain.py --before DIR [--before-python PYTHON]  # beside an earlier version

Without --concurrency the brain's default settings hold: the calls in flight are found as
the run goes (from 32, up to 64).

Runs the hour twice, in order (one batch of the clock at a time) and with run-ahead, checks
that both wrote the same event log, and prints for each: requests, model calls and tokens
per agent per game hour by request kind, the average number of calls in flight, the wall
time, its lower bounds, and the speed-up over sending the same calls one at a time (calls x
latency, or measured with --sequential), and the CPU per model call beside a bare
`litellm.completion`'s to the same kind of server, measured first in this process. Lower
bounds: in order, the rounds of calls the clock sends (rounds x latency); with run-ahead,
the longest chain of calls that wait for each other (`Chain`: an agent's calls in order,
and calls of agents sharing an arena), and, looser, the longest chain of calls that
certainly wait (an agent's calls in order, and a conversation's lines).

--before DIR runs the hour (in order and with run-ahead) with this version and with the
smallville in DIR (an earlier checkout: `git archive COMMIT | tar -x -C DIR`), each in a
process of its own with this benchmark's code, and prints each figure side by side with the
ratio, "-" where the earlier version cannot give one.

--servers 1,2,4 runs the hour (with run-ahead) once for each number of servers, the model
a list of that many deployments of at most --cap calls in flight each (litellm's Router
spreads the calls), and prints the wall time, the calls each server answered, and the
speed-up over one server; the event logs must be the same whatever the number of servers.

--bounds only counts: it runs the window in order at no latency and prints, for each game
hour, these chains (and the looser one without the links of ratings: importance, or the
salience model's tags) and the most any schedule could gain over one call at a time by each.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a child of --before measures the smallville in its --code DIR with this benchmark's code
sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1] if "--code" in sys.argv[:-1] else str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from smallville.brain import LLMConfig  # noqa: E402
from smallville.run import run_scenario  # noqa: E402
from smallville.scenario import load_scenario  # noqa: E402
from smallville.sim import SimConfig  # noqa: E402
from smallville.timefmt import parse_duration  # noqa: E402


class Server:
    """tests/llmserver.py in a subprocess."""

    def __init__(self, seed: int, latency: float, *more: str) -> None:
        """`more`: the server's other flags (`--modes strict,capable`, `--reasoning only`)."""
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "llmserver.py"),
                "--seed",
                str(seed),
                "--latency",
                str(latency),
                *more,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.api_base = self.proc.stdout.readline().strip()
        self.started_cpu = self.cpu()  # its start-up (importing litellm) is not the run's

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
    """The longest chain of calls in a run that wait for each other, one after the other:
    an agent's call waits for its calls before it, and (`arenas`) for the calls of every
    agent that shares its arena: agents see, talk to and change things for those in their
    own arena only, so a call there may change what it asks. At one call of latency per
    link, no schedule that respects who can meet whom can end sooner; run-ahead respects it.

    With `arenas=False` the chain links only what certainly waits: an agent's calls in
    order, and a conversation's lines, each of which the next speaker's request quotes.
    No schedule in which agents wait for their own answers can end sooner."""

    def __init__(self, arenas: bool = True) -> None:
        self.arenas = arenas
        self.agent: dict[str, int] = {}  # the depth of each agent's latest call
        self.arena: dict[str, int] = {}  # the deepest call made in each arena so far
        self.longest = 0

    def batch(self, world, agents, calls) -> None:
        """One batch of the in-order run: `calls` are (agent, listener or None) of the
        calls it made."""
        where = {a: world.area_of(a) for a in agents}
        present: dict[str, int] = {}
        if self.arenas:
            for a in agents:  # what each arena's people carry now
                present[where[a]] = max(present.get(where[a], 0), self.agent.get(a, 0))
        depth: dict[str, int] = {}
        for a, listener in calls:
            d = 1 + max(
                self.agent.get(a, 0),
                present.get(where[a], 0),
                self.arena.get(where[a], 0),
                self.agent.get(listener, 0) if listener else 0,
            )
            depth[a] = max(depth.get(a, 0), d)
            if listener:  # what the listener says next quotes this line
                depth[listener] = max(depth.get(listener, 0), d)
        for a, d in depth.items():
            self.agent[a] = max(self.agent.get(a, 0), d)
            if self.arenas:
                self.arena[where[a]] = max(self.arena.get(where[a], 0), d)
            self.longest = max(self.longest, d)


class Hours:
    """Watches an in-order run's batches: per game hour since the start, the calls made,
    the rounds they took, and the chain of `Chain` with and without arenas (`coupled`,
    `talk`), each counted from the hour's start; and, as `unrated`, `talk` as it would be
    if agents did not wait for their importance ratings (they do: a rating can change what
    the agent retrieves next)."""

    def __init__(self) -> None:
        self.hours: dict[int, dict] = {}

    def __enter__(self) -> Hours:
        from smallville.brain.llm import LLMBrain
        from smallville.sim import dispatch, engine

        self._plain = plain_init, plain_flush, plain_ask = (
            engine.Simulation.__init__,
            dispatch.Dispatcher._flush,
            LLMBrain._ask,
        )
        made: list[tuple[str, str | None, bool]] = []  # (agent, listener, a rating?) of each call
        hours = self.hours

        def init(sim, *args, **kwargs):
            plain_init(sim, *args, **kwargs)
            sim.dispatch.world, sim.dispatch.agent_names = sim.world, list(sim.agents)

        def ask(brain, request):
            made.append(
                (request.agent, getattr(request, "listener", None), request.kind in ("rate_importance", "tag_memories"))
            )
            return plain_ask(brain, request)

        def flush(self, event):
            made.clear()
            plain_flush(self, event)
            if made and getattr(self, "world", None) is not None:
                hour = hours.setdefault(
                    int(self.env.now // 3600),
                    {
                        "calls": 0,
                        "rounds": 0,
                        "coupled": Chain(),
                        "talk": Chain(arenas=False),
                        "unrated": Chain(arenas=False),
                    },
                )
                hour["calls"] += len(made)
                hour["rounds"] += 1
                calls = [(agent, listener) for agent, listener, _ in made]
                hour["coupled"].batch(self.world, self.agent_names, calls)
                hour["talk"].batch(self.world, self.agent_names, calls)
                hour["unrated"].batch(
                    self.world, self.agent_names, [(agent, listener) for agent, listener, rating in made if not rating]
                )

        engine.Simulation.__init__, dispatch.Dispatcher._flush, LLMBrain._ask = init, flush, ask
        return self

    def __exit__(self, *exc) -> None:
        from smallville.brain.llm import LLMBrain
        from smallville.sim import dispatch, engine

        engine.Simulation.__init__, dispatch.Dispatcher._flush, LLMBrain._ask = self._plain

    def longest(self, kind: str) -> int:
        """The chain over the whole run (meaningful for a run of one hour)."""
        return max((h[kind].longest for h in self.hours.values()), default=0)


def warm_up() -> None:
    """One call through litellm before timing: its import and first call load modules
    that each process pays for once; both runs are measured warm."""
    import litellm

    server = Server(0, 0.0)
    try:
        from smallville.brain.keys import PLACEHOLDER

        litellm.completion(
            model="openai/bench",
            api_base=server.api_base,
            max_tokens=4,
            api_key=PLACEHOLDER,
            messages=[{"role": "user", "content": "warm up"}],
        )
    finally:
        server.close()


def bare_call_cpu(calls: int = 200) -> float:
    """CPU seconds of this process per bare `litellm.completion` to a test server (warm, one
    at a time, a prompt of about a request's size): the baseline for the engine's CPU per call."""
    from smallville.brain.calls import import_litellm
    from smallville.brain.keys import PLACEHOLDER

    litellm, server = import_litellm(), Server(0, 0.0)
    messages = [{"role": "user", "content": "Isabella is at the cafe counter. " * 60}]
    try:
        began = time.process_time()
        for _ in range(calls):
            litellm.completion(
                model="openai/bench", api_base=server.api_base, api_key=PLACEHOLDER, max_tokens=64, messages=messages
            )
        return (time.process_time() - began) / calls
    finally:
        server.close()


def measure(
    scenario,
    duration: float,
    latency: float,
    concurrency: int | None,
    lookahead: float,
    hours: Hours | None = None,
    memory: str | None = None,
) -> dict:
    server = Server(scenario.seed, latency)
    reaped = _children_cpu()
    try:
        with tempfile.TemporaryDirectory() as runs, hours or contextlib.nullcontext():
            config = LLMConfig(
                model="openai/bench",
                api_base=server.api_base,
                echo_request=True,
                max_concurrency=concurrency,
                timeout=30.0,
                preflight=False,
                lookahead=lookahead,
            )
            began, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
            result = run_scenario(
                scenario,
                runs_dir=runs,
                duration=duration,
                brain=config,
                embedder="lexical",
                config=SimConfig(memory=memory),
            )
            wall, cpu, own = time.perf_counter() - began, time.process_time() - cpu, time.thread_time() - own
            events = (result.path / "events.jsonl").read_bytes()
    finally:
        stats = server.close()
    calls_cpu = _children_cpu() - reaped - stats.get("cpu_s", 0.0) - (server.started_cpu or 0.0)  # the calls' child
    return {
        "wall": wall,
        "cpu": cpu,
        "sim_cpu": own,  # the simulation's thread (copies included); the rest: the threads making calls
        "calls_cpu": calls_cpu,
        "child": _calls_in_child(config, len(scenario.agents)),  # else the calls are made in this process
        "usage": result.manifest.usage,
        "server": stats,
        "batches": result.simulation.dispatch.batches,
        "events": hashlib.sha256(events).hexdigest(),
    }


def cpu_per_call(run: dict) -> float:
    """CPU seconds per model call: the run's process (copies included) and the calls' child, if any."""
    return (run["cpu"] + (run["calls_cpu"] if run["child"] else 0.0)) / max(run["usage"]["total"]["calls"], 1)


def _calls_in_child(config, agents: int) -> bool:
    try:
        return bool(config.calls_in_child(agents))
    except AttributeError:  # a version before the calls' child: they are made in the run's process
        return False


def one_version(args, scenario) -> dict:
    """--before's child: the hour in order (its chains watched) and with run-ahead, as figures."""
    duration, latency = parse_duration(args.duration), args.latency
    watched = Hours()
    runs = {
        "in order": measure(scenario, duration, latency, args.concurrency, 0.0, watched, args.memory),
        "run-ahead": measure(
            scenario, duration, latency, args.concurrency, parse_duration(args.lookahead), memory=args.memory
        ),
    }
    bounds = {"in order": runs["in order"]["usage"].get("rounds"), "run-ahead": watched.longest("coupled")}
    out = {}
    for name, run in runs.items():
        usage, calls = run["usage"], max(run["usage"]["total"]["calls"], 1)
        ra = usage.get("run_ahead", {})
        out[name] = {
            "wall": run["wall"],
            "cpu_per_call": cpu_per_call(run),
            "calls": calls,
            "one_at_a_time": calls * latency,
            "bound": bounds[name] * latency if bounds[name] else None,
            "in_flight": usage.get("in_flight"),
            "copies": ra.get("copies") if name == "run-ahead" else None,
            "events": run["events"],
        }
    return out


def before_and_this(args, bare: float) -> None:
    """--before DIR: the hour with this version and with DIR's, each in a process of its own,
    figure by figure."""
    versions = {"this": str(ROOT), "before": str(args.before.resolve())}
    got = {}
    for name, code in versions.items():
        command = [args.before_python if name == "before" and args.before_python else sys.executable, __file__]
        command += ["--scenario", args.scenario, "--for", args.duration, "--latency", str(args.latency)]
        command += ["--lookahead", args.lookahead, "--one", "--code", code]
        command += (["--concurrency", str(args.concurrency)] if args.concurrency else []) + (
            ["--memory", args.memory] if args.memory else []
        )
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        got[name] = json.loads(out.strip().splitlines()[-1])
    figures = (
        ("wall, s", lambda r: r["wall"], "{:.1f}"),
        ("CPU per model call, ms", lambda r: 1000 * r["cpu_per_call"], "{:.1f}"),
        ("... over a bare litellm call's", lambda r: r["cpu_per_call"] / bare, "{:.1f}x"),
        ("speed-up over one call at a time", lambda r: r["one_at_a_time"] / r["wall"], "{:.1f}x"),
        ("wall over its lower bound", lambda r: r["wall"] / r["bound"] if r["bound"] else None, "{:.2f}"),
        ("calls in flight on average", lambda r: r["in_flight"], "{:.1f}"),
        ("model calls", lambda r: r["calls"], "{:.0f}"),
        ("copies built", lambda r: r["copies"], "{:.0f}"),
    )
    print(f"\na bare litellm call: {bare * 1000:.1f} ms of CPU; before: {versions['before']}")
    print(f"{'':<44}{'this':>10}{'before':>10}{'this/before':>13}")
    for run in ("in order", "run-ahead"):
        for label, figure, shape in figures:
            this, before = (_figure(figure, got[v][run]) for v in ("this", "before"))
            if this is None and before is None:
                continue
            ratio = f"{this / before:.2f}x" if this is not None and before else "-"
            cells = "".join(f"{shape.format(x) if x is not None else '-':>10}" for x in (this, before))
            print(f"{run + ': ' + label:<44}{cells}{ratio:>13}")
    same = {v: got[v]["in order"]["events"] == got[v]["run-ahead"]["events"] for v in versions}
    alike = got["this"]["in order"]["events"] == got["before"]["in order"]["events"]
    print(
        "event logs: in order and run-ahead the same in this version "
        f"{'yes' if same['this'] else 'NO'}, before {'yes' if same['before'] else 'NO'}; "
        f"this version's and before's the same: {'yes' if alike else 'no'}"
    )


def _figure(figure, run: dict):
    try:
        return figure(run)
    except (KeyError, TypeError, ZeroDivisionError):
        return None


def spread(scenario, duration: float, latency: float, cap: int, counts: list[int], lookahead: float) -> None:
    """--servers: the run-ahead hour on 1, 2, 4... servers of `cap` calls each."""
    walls, cpus, logs = {}, {}, set()
    for n in counts:
        servers = [Server(scenario.seed, latency) for _ in range(n)]
        try:
            deployments = [{"model": "openai/bench", "api_base": s.api_base, "max_concurrency": cap} for s in servers]
            config = LLMConfig(model=deployments, echo_request=True, timeout=30.0, preflight=False, lookahead=lookahead)
            with tempfile.TemporaryDirectory() as runs:
                began, cpu = time.perf_counter(), time.process_time()
                result = run_scenario(scenario, runs_dir=runs, duration=duration, brain=config, embedder="lexical")
                walls[n], cpus[n] = time.perf_counter() - began, time.process_time() - cpu
                logs.add(hashlib.sha256((result.path / "events.jsonl").read_bytes()).hexdigest())
        finally:
            stats = [s.close() for s in servers]
        usage = result.manifest.usage
        calls = usage["total"]["calls"]
        each = ", ".join(f"{row['calls']}" for row in usage["by_deployment"].values())
        flight = ", ".join(f"{s['mean_in_flight']:.1f}" for s in stats)
        print(
            f"{n} server(s) of {cap} calls: wall {walls[n]:.1f} s for {calls} calls (each server: {each}); "
            f"the run's own CPU {cpus[n]:.1f} s ({1000 * cpus[n] / calls:.0f} ms a call); "
            f"in flight on average {usage['in_flight']:.1f} (per server: "
            f"{flight}); at best {calls * latency / (n * cap):.1f} s; "
            f"speed-up over one server {walls[counts[0]] / walls[n]:.2f}x"
        )
    print(f"event logs: {'identical' if len(logs) == 1 else 'DIFFERENT'} over {', '.join(map(str, counts))} servers")


def _children_cpu() -> float:
    """CPU seconds of this process's children that have ended (the server, the calls' child)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def report(name: str, run: dict, agents: int, hours: float, latency: float, bound: float, bare: float) -> None:
    """`bare`: a bare litellm call's CPU seconds, beside the run's CPU per model call."""
    usage = run["usage"]
    total = usage["total"]
    one_at_a_time = total["calls"] * latency
    limit = usage.get("concurrency", {})
    print(
        f"\n{name}: wall {run['wall']:.1f} s; calls in flight {usage['in_flight']:.1f} on average "
        f"(server: {run['server']['mean_in_flight']:.1f}), {run['server']['max_in_flight']} at most; "
        f"limit {'found' if limit.get('adaptive') else 'pinned'}: reached {limit.get('reached')}"
    )
    print(
        f"  lower bound {bound:.1f} s (wall / bound {run['wall'] / bound:.2f}); one call at a time "
        f"(calls x latency) {one_at_a_time:.1f} s; speed-up {one_at_a_time / run['wall']:.1f}x"
    )
    print(
        f"  CPU: {run['cpu']:.1f} s in this process (run-ahead's copies included), "
        f"{run['calls_cpu']:.1f} s in its child making model calls (if any; importing litellm included), "
        f"{run['server'].get('cpu_s', 0.0):.1f} s in the server"
    )
    calls, child = max(total["calls"], 1), run["calls_cpu"] if run["child"] else 0.0
    per_call = cpu_per_call(run)
    where = (
        f"{child / calls * 1000:.1f} ms in the calls' child, its start-up included"
        if run["child"]
        else "calls made here"
    )
    print(
        f"  CPU per model call: {per_call * 1000:.1f} ms ({run['cpu'] / calls * 1000:.1f} ms in "
        f"this process and its copies, {where}); a bare litellm call {bare * 1000:.1f} ms: "
        f"{per_call / bare:.1f}x"
    )
    print(
        f"  CPU in this process: {run['sim_cpu']:.2f} s in the simulation's thread, "
        f"{run['cpu'] - run['sim_cpu']:.2f} s in the threads making calls"
    )
    if "run_ahead" in usage:
        ra = usage["run_ahead"]
        print(
            f"  run-ahead's share of the simulation's thread: copies {ra.get('copies_cpu_us', 0) / 1e6:.2f} s of CPU "
            f"(making and running them), snapshots {ra.get('snapshots_cpu_us', 0) / 1e6:.2f} s"
        )
        print(
            f"  run-ahead: {ra.get('copies', 0)} copies built ({ra.get('copies_ms', 0) / 1000:.1f} s of wall), "
            f"{ra.get('sent', 0)} requests fetched, "
            f"{ra.get('unused', 0)} fetched but never used, {ra.get('failed_copies', 0)} copies failed, "
            f"{ra.get('guessed_ratings', 0)} ratings and {ra.get('guessed_tags', 0)} tag requests guessed; "
            f"up to {ra.get('most_ahead_s', 0) / 60:.0f} simulated minutes ahead"
        )


def bounds(scenario, duration: float, concurrency: int, memory: str | None) -> None:
    """--bounds: the in-order run at no latency, and per game hour the speed-up over one call
    at a time that each chain of `Hours` leaves to any schedule (calls / links)."""
    watched = Hours()
    measure(scenario, duration, 0.0, concurrency, 0.0, watched, memory)
    kinds = {"coupled": "arena chain", "talk": "talk chain", "unrated": "unrated"}
    print(f"\n{'hour':<7}{'calls':>7}{'rounds':>8}" + "".join(f"{name:>13}{'best':>7}" for name in kinds.values()))
    best: dict[str, list[float]] = {kind: [] for kind in kinds}
    for h, hour in sorted(watched.hours.items()):
        line = f"{(scenario.start + timedelta(hours=h)).strftime('%H:%M'):<7}{hour['calls']:>7}{hour['rounds']:>8}"
        for kind in kinds:
            links = hour[kind].longest
            best[kind].append(hour["calls"] / links)
            line += f"{links:>13}{best[kind][-1]:>6.1f}x"
        print(line)
    for kind, name in kinds.items():
        print(
            f"{name}: best speed-up {min(best[kind]):.1f}-{max(best[kind]):.1f}x, "
            f"{statistics.median(best[kind]):.1f}x in the median hour; "
            f"{sum(b >= 10 for b in best[kind])} of {len(best[kind])} hours allow 10x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default=str(ROOT / "scenarios" / "the_ville.yaml"))
    parser.add_argument("--for", dest="duration", default="1h")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per call")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="pin the calls in flight (default: found as the run goes, the brain's default)",
    )
    parser.add_argument("--town", type=int, metavar="N", help="a generated town of N agents instead of --scenario")
    parser.add_argument("--lookahead", default="1h", help="how far copies run ahead (run-ahead run)")
    parser.add_argument("--sequential", action="store_true", help="also measure one call at a time")
    parser.add_argument("--bounds", action="store_true", help="only the chains per game hour (no timing)")
    parser.add_argument(
        "--memory", choices=("paper", "salience"), default=None, help="the memory model (default: the scenario's)"
    )
    parser.add_argument("--servers", metavar="N,N,...", help="one model on so many servers each (e.g. 1,2,4)")
    parser.add_argument("--cap", type=int, default=8, help="with --servers: calls in flight per server")
    parser.add_argument("--before", type=Path, metavar="DIR", help="also run the hour with the smallville in DIR")
    parser.add_argument("--before-python", metavar="PYTHON", help="the interpreter to run DIR's version with")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # --before's child
    parser.add_argument("--code", help=argparse.SUPPRESS)  # the child's smallville
    args = parser.parse_args()
    if args.town:
        from smallville.town import generate_town, write_town

        folder = Path(tempfile.mkdtemp(prefix="smallville-town-"))
        write_town(generate_town(args.town, 1), folder / "town.yaml")
        args.scenario = str(folder / "town.yaml")
    scenario = load_scenario(args.scenario)
    duration = parse_duration(args.duration)
    if args.one:
        warm_up()
        print(json.dumps(one_version(args, scenario)))
        return
    if args.bounds:
        print(f"{scenario.name}: {len(scenario.agents)} agents, {args.duration} simulated, in order")
        bounds(scenario, duration, args.concurrency, args.memory)
        return
    hours, agents = duration / 3600, len(scenario.agents)
    if args.servers:
        print(
            f"{scenario.name}: {agents} agents, {args.duration} simulated with run-ahead, server latency "
            f"{args.latency * 1000:.0f} ms, at most {args.cap} calls in flight per server; {os.cpu_count()} cores"
        )
        warm_up()
        spread(
            scenario,
            duration,
            args.latency,
            args.cap,
            [int(n) for n in args.servers.split(",")],
            parse_duration(args.lookahead),
        )
        return
    print(
        f"{scenario.name}: {agents} agents, {args.duration} simulated, {args.memory or 'the scenario'}'s memory, "
        f"server latency "
        f"{args.latency * 1000:.0f} ms, "
        f"{f'up to {args.concurrency}' if args.concurrency else 'an adaptive number of'} calls in flight; "
        f"{os.cpu_count()} cores"
    )
    warm_up()
    bare = bare_call_cpu()
    if args.before:
        before_and_this(args, bare)
        return
    watched = Hours()
    in_order = measure(scenario, duration, args.latency, args.concurrency, 0.0, watched, args.memory)
    coupled, talk, unrated = watched.longest("coupled"), watched.longest("talk"), watched.longest("unrated")
    ahead = measure(
        scenario, duration, args.latency, args.concurrency, parse_duration(args.lookahead), memory=args.memory
    )
    usage = ahead["usage"]
    scale = 1 / (agents * hours)
    print(
        f"\n{'request kind':<20}{'requests':>10}{'calls':>8}{'prompt tok':>12}{'tokens':>9}   (per agent per game hour)"
    )
    for kind, row in list(usage["by_kind"].items()) + [("all", usage["total"])]:
        print(
            f"{kind:<20}{row['requests'] * scale:>10.2f}{row['calls'] * scale:>8.2f}"
            f"{row['prompt_tokens'] * scale:>12.0f}{(row['prompt_tokens'] + row['completion_tokens']) * scale:>9.0f}"
        )
    print(
        f"ratings reused: {usage['total']['reused']}; most calls by one agent: "
        f"{max(a['calls'] for a in usage['by_agent'].values())}"
    )
    report("in order", in_order, agents, hours, args.latency, in_order["usage"]["rounds"] * args.latency, bare)
    report("run-ahead", ahead, agents, hours, args.latency, coupled * args.latency, bare)
    print(
        f"  lower bounds for run-ahead: calls linked by an agent's order or a shared arena: {coupled} "
        f"({coupled * args.latency:.1f} s, used above); by an agent's order or a conversation: {talk} "
        f"({talk * args.latency:.1f} s, {usage['total']['calls'] / talk:.1f}x at best); the same without the links "
        f"of ratings, which copies go on past: {unrated} ({unrated * args.latency:.1f} s)"
    )
    same = "identical" if in_order["events"] == ahead["events"] else "DIFFERENT"
    print(f"\nevent logs of the two runs: {same}; run-ahead is {in_order['wall'] / ahead['wall']:.1f}x faster")
    if args.sequential:
        seq = measure(scenario, duration, args.latency, 1, 0.0, memory=args.memory)
        print(
            f"measured one call at a time: {seq['wall']:.1f} s; run-ahead speed-up {seq['wall'] / ahead['wall']:.1f}x"
        )


if __name__ == "__main__":
    main()
