"""The command line: parse, call the library, render. Heavy modules load only when used."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from smallville import __version__
from smallville.errors import (
    BudgetExhausted,
    Interrupted,
    ScenarioError,
    SmallvilleError,
    Unreproduced,
    UsageError,
    as_error,
)

DEFAULT_TOWN = "scenarios/the_ville.yaml"
WHEN = "YYYY-MM-DD HH:MM, or HH:MM alone when one day of the run has that time"  # (timefmt.parse_moment)


def _duration(text: str) -> float:
    from smallville.timefmt import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _money(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an amount of US dollars, e.g. 2.50, got {text!r}")
    return value


def _budget_flags(parser: argparse.ArgumentParser, more: bool = False) -> None:
    """--budget, --max-requests and --max-tokens (on resume: how much more may be spent)."""
    what = "more than the run has spent: " if more else ""
    parser.add_argument(
        "--budget",
        type=_money,
        metavar="USD",
        help=f"{what}stop before the model's cost could pass this many US dollars (exit 3)",
    )
    parser.add_argument(
        "--max-requests",
        type=_positive,
        metavar="N",
        help=f"{what}stop before more than N calls go to the model (exit 3)",
    )
    parser.add_argument(
        "--max-tokens",
        type=_positive,
        metavar="N",
        help=f"{what}stop before prompt and completion tokens could pass N (exit 3)",
    )


def _brain_flags(parser: argparse.ArgumentParser, what: str) -> None:
    """--brain, --brain-config and --api-base of a run going on with another brain."""
    parser.add_argument(
        "--brain",
        metavar="MODEL",
        help=f"another brain for {what}: offline, a litellm model name, or llm (the scenario's "
        "brain: block); default: the run's own",
    )
    parser.add_argument(
        "--brain-config",
        type=Path,
        metavar="FILE.yaml",
        help=f"the settings of another brain for {what} (see docs/llm.md)",
    )
    parser.add_argument(
        "--api-base",
        metavar="URL",
        help=f"the model's server for {what} (alone: the run's own model at another address)",
    )


def _budget(args) -> dict:
    return {
        "usd": getattr(args, "budget", None),
        "requests": getattr(args, "max_requests", None),
        "tokens": getattr(args, "max_tokens", None),
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="smallville", description="A multi-agent town simulation engine in the style of Generative Agents."
    )
    parser.add_argument("--version", action="version", version=f"smallville {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    run = commands.add_parser("run", help="simulate a scenario and log it to a run directory")
    run.add_argument("scenario", type=Path, help="a scenario file, e.g. scenarios/the_ville.yaml")
    run.add_argument(
        "--for",
        dest="duration",
        type=_duration,
        metavar="DURATION",
        help="simulated time to run, e.g. 2h or 2d (default: the scenario's duration)",
    )
    run.add_argument("--seed", type=int, help="random seed (default: the scenario's seed)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="memory.KEY=VALUE",
        help="a memory setting over the scenario's (docs/scenario-format.md), e.g. "
        "--set memory.preset=teaching-lab --set memory.reflection.threshold=40",
    )
    run.add_argument(
        "--brain",
        metavar="MODEL",
        help="who answers the agents' questions: offline (default), a litellm model name "
        "(e.g. openai/gpt-4o-mini, ollama/llama3.1), or llm: the model of the scenario's brain: block",
    )
    run.add_argument(
        "--brain-config",
        type=Path,
        metavar="FILE.yaml",
        help="LLM brain settings (model, api_base, temperature, ...; see docs/llm.md)",
    )
    run.add_argument("--api-base", metavar="URL", help="address of the model's server, e.g. http://127.0.0.1:8000/v1")
    run.add_argument(
        "--replay-from", type=Path, metavar="RUN_DIR", help="answer from a recorded run's answers.jsonl, with no model"
    )
    run.add_argument(
        "--replay-fallthrough",
        action="store_true",
        help="with --replay-from: send requests the record lacks to the live brain",
    )
    run.add_argument("--cache", type=Path, metavar="DIR", help="a persistent answer cache shared across runs")
    run.add_argument(
        "--embedder", help="sentence embedder: use (default, offline model), lexical, or a litellm model name"
    )
    run.add_argument(
        "--embedder-api-base",
        metavar="URL",
        help="address of an OpenAI-compatible embedding server, for a litellm embedder",
    )
    run.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where run folders go (default: runs)")
    run.add_argument("--quiet", action="store_true", help="no progress bar or summary")

    run.add_argument(
        "--checkpoint-every",
        type=_duration,
        default=3600.0,
        metavar="DURATION",
        help="save the run's state this often in simulated time (default 1h)",
    )
    _budget_flags(run)

    estimate = commands.add_parser("estimate", help="what a run on a model would cost, worked out offline")
    estimate.add_argument("scenario", type=Path, help="a scenario file, e.g. scenarios/the_ville.yaml")
    estimate.add_argument(
        "--brain", metavar="MODEL", help="the litellm model the run would use, e.g. openai/gpt-4o-mini"
    )
    estimate.add_argument("--brain-config", type=Path, metavar="FILE.yaml", help="LLM brain settings (see docs/llm.md)")
    estimate.add_argument("--api-base", metavar="URL", help="the model server's address (only to name the provider)")
    estimate.add_argument(
        "--for",
        dest="duration",
        type=_duration,
        metavar="DURATION",
        help="simulated time, e.g. 2h or 1d (default: the scenario's duration)",
    )
    estimate.add_argument("--seed", type=int, help="random seed (default: the scenario's seed)")
    estimate.add_argument(
        "--from",
        dest="from_run",
        type=Path,
        metavar="RUN_DIR",
        help="a short run on the model (a pilot): scale its calls and tokens per agent-hour",
    )
    estimate.add_argument(
        "--latency",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="seconds a call takes, for the expected wall time (default 2)",
    )
    estimate.add_argument(
        "--concurrency",
        type=_positive,
        metavar="N",
        help="calls in flight at once (default: the brain's max_concurrency)",
    )
    estimate.add_argument("--embedder", default="use", help="sentence embedder: use (default) or lexical")
    estimate.add_argument("--json", action="store_true", help="print JSON")

    check = commands.add_parser("check-model", help="try every request kind once on a model, before a paid run")
    check.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="a litellm model name, e.g. openai/gpt-4o-mini (default: --brain-config's model)",
    )
    check.add_argument("--api-base", metavar="URL", help="address of the model's server, e.g. http://127.0.0.1:8000/v1")
    check.add_argument("--brain-config", type=Path, metavar="FILE.yaml", help="LLM brain settings (see docs/llm.md)")
    check.add_argument(
        "--scenario",
        type=Path,
        default=Path(DEFAULT_TOWN),
        metavar="FILE",
        help=f"the town whose requests are tried (default: {DEFAULT_TOWN})",
    )
    check.add_argument("--seed", type=int, help="random seed (default: the scenario's seed)")
    check.add_argument(
        "--embedder",
        default="use",
        help="sentence embedder of the offline town: use (default, as a run) or lexical (faster)",
    )
    check.add_argument("--json", action="store_true", help="print JSON")

    resume = commands.add_parser("resume", help="continue an interrupted run from its last checkpoint, or extend one")
    resume.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    resume.add_argument(
        "--for",
        dest="duration",
        type=_duration,
        metavar="DURATION",
        help="run this much longer than the run's planned end (to extend a completed run)",
    )
    resume.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    _brain_flags(resume, "the part not yet run")
    _budget_flags(resume, more=True)

    fork = commands.add_parser("fork", help="start a new run from a run's state at a time, and change history")
    fork.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    fork.add_argument("--at", required=True, help=f"the simulated time to fork at ({WHEN})")
    fork.add_argument("--seed", type=int, help="a new seed for everything after the fork")
    fork.add_argument(
        "--inject",
        nargs=2,
        action="append",
        default=[],
        metavar=("AGENT", "THOUGHT"),
        help="put a thought into an agent's head (its id or name) at the fork (repeatable)",
    )
    fork.add_argument(
        "--for",
        dest="duration",
        type=_duration,
        metavar="DURATION",
        help="how long to run after the fork (default: to the parent's end)",
    )
    fork.add_argument("--runs-dir", type=Path, help="where the new run goes (default: beside the parent)")
    fork.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    _brain_flags(fork, "everything after the fork")
    _budget_flags(fork)

    inspect = commands.add_parser("inspect", help="an agent's state at a time of a run: place, plan, memories")
    inspect.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    inspect.add_argument("--agent", help="the agent, by id or name (default: every agent, briefly)")
    inspect.add_argument("--at", help=f"the simulated time ({WHEN}; default: the run's end)")
    inspect.add_argument("--query", help="what to recall (default: what the agent is doing)")
    inspect.add_argument("--json", action="store_true", help="print JSON")

    interview = commands.add_parser("interview", help="ask an agent of a run a question, as of a time")
    interview.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    interview.add_argument("agent", metavar="AGENT", help='its id (isabella_rodriguez) or name ("Isabella Rodriguez")')
    interview.add_argument("question", metavar="QUESTION")
    interview.add_argument("--at", help=f"the simulated time ({WHEN}; default: the run's end)")
    interview.add_argument(
        "--exact",
        action="store_true",
        help="the state at --at itself, however long it takes; without it a big town answers from "
        "its last saved state before --at when going on would take long, and says so",
    )
    interview.add_argument("--json", action="store_true", help="print JSON")

    why = commands.add_parser("why", help="why an agent did what it did, or how news reached it, from a run's files")
    why.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    why.add_argument("--agent", required=True, help="the agent, by id or name")
    when = why.add_mutually_exclusive_group()
    when.add_argument("--at", help=f"its last decision at or before this simulated time ({WHEN})")
    when.add_argument("--event", type=int, metavar="N", help="the event on line N of events.jsonl (from 1)")
    when.add_argument("--probe", help="how the news of this scenario probe reached the agent")
    why.add_argument(
        "--depth", type=int, default=1, metavar="K", help="follow where the memories came from K steps back (default 1)"
    )
    why.add_argument("--json", action="store_true", help="print JSON")

    _evaluate_parser(commands)

    verify = commands.add_parser(
        "verify", help="re-simulate a run from its start and check it reproduces byte for byte"
    )
    verify.add_argument("run_dir", type=Path, metavar="RUN_DIR")

    validate = commands.add_parser("validate", help="check scenario and agent files without running them")
    validate.add_argument("files", type=Path, nargs="+", metavar="FILE")

    replay = commands.add_parser("replay", help="play a logged run back, as text or as an HTML page")
    replay.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    replay.add_argument(
        "--format",
        choices=("live", "text"),
        help="live: the map, animated in the terminal (default in a terminal); "
        "text: a plain timeline (default in pipes)",
    )
    replay.add_argument(
        "--speed",
        type=_duration,
        default=600.0,
        metavar="DURATION",
        help="live: simulated time per real second (default 10m)",
    )
    replay.add_argument("--paused", action="store_true", help="live: start paused, to step with the arrow keys")
    replay.add_argument("--agent", help="only what this agent did, said or heard (by id or name)")
    replay.add_argument("--at", help=f"start at this simulated time ({WHEN})")
    replay.add_argument("--until", help=f"stop at this simulated time ({WHEN})")
    replay.add_argument("--all", action="store_true", help="every event, observations and objects included")
    replay.add_argument(
        "--html", type=Path, metavar="OUT.html", help="write a self-contained page that animates the run instead"
    )

    metrics = commands.add_parser("metrics", help="measure a run: diffusion, relationships, coordination, activity")
    metrics.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    metrics.add_argument("--json", action="store_true", help="print JSON")
    metrics.add_argument(
        "--plot",
        type=Path,
        nargs="?",
        const=True,
        metavar="DIR",
        help="also draw diffusion.png, network.png and attendance.png into DIR "
        "(default RUN_DIR/plots; needs smallville[plot])",
    )

    experiment = commands.add_parser("experiment", help="run an experiment file: runs over seeds and conditions")
    experiment.add_argument("file", type=Path, metavar="FILE.yaml", help="e.g. experiments/paper.yaml")
    experiment.add_argument(
        "--workers",
        type=_positive,
        default=None,
        metavar="N",
        help="runs at a time, each in its own process (default: the file's, else 1)",
    )
    experiment.add_argument(
        "--runs-dir",
        "--out",
        dest="runs_dir",
        type=Path,
        metavar="DIR",
        help="where its runs and tables go (default: the file's out:, else runs/experiments/NAME); --out is the same",
    )
    experiment.add_argument(
        "--executor",
        choices=("process", "ray"),
        default="process",
        help="process: a local process pool (default); ray: Ray tasks (pip install 'smallville[ray]')",
    )
    experiment.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="with --executor ray: a running Ray cluster's head (default: RAY_ADDRESS, "
        "else a local Ray of --workers CPUs)",
    )
    experiment.add_argument(
        "--plot",
        action="store_true",
        help="also draw OUT/summary.png, diffusion.png and attendance.png (needs smallville[plot])",
    )
    experiment.add_argument("--quiet", action="store_true", help="no progress or table")
    _budget_flags(experiment)

    serve = commands.add_parser("serve", help="watch runs in a browser, live: a local web server (read-only)")
    serve.add_argument(
        "runs_dir",
        type=Path,
        nargs="?",
        default=Path("runs"),
        metavar="RUNS_DIR",
        help="the folder of runs to show (default: runs); nothing outside it is served",
    )
    serve.add_argument("--port", type=int, default=8000, help="the port (default 8000; 0: any free one)")
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1: this machine only)"
    )

    town = commands.add_parser("town", help="make towns: `town generate` writes a large generated town")
    town_commands = town.add_subparsers(dest="town_command", metavar="COMMAND")
    town_commands.required = True
    generate = town_commands.add_parser("generate", help="write a generated scenario and its agents/ folder")
    generate.add_argument("out", type=Path, metavar="OUT.yaml", help="the scenario file to write")
    generate.add_argument(
        "--agents",
        type=_positive,
        required=True,
        metavar="N",
        help="how many residents (up to about 54,000: see docs/towns.md)",
    )
    generate.add_argument("--seed", type=int, default=0, help="random seed (default 0): same seed, same files")
    generate.add_argument("--force", action="store_true", help="overwrite existing files")
    return parser


def _evaluate_parser(commands) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        help="believability, the paper's way: interview every agent of "
        "every run, judge the answers, rate the conditions",
    )
    evaluate.add_argument(
        "paths",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="run folders, or an experiment's output folder (runs/experiments/NAME)",
    )
    evaluate.add_argument("--at", help=f"the simulated time of the interviews ({WHEN}; default: the end)")
    evaluate.add_argument(
        "--questions",
        type=Path,
        metavar="FILE.yaml",
        help="an interview protocol of your own (default: smallville's; see docs/evaluate.md)",
    )
    evaluate.add_argument(
        "--judge",
        metavar="MODEL",
        help="the litellm model that ranks the answers (offline: rules, not a model; default: no judge)",
    )
    evaluate.add_argument("--judge-config", type=Path, metavar="FILE.yaml", help="the judge's brain settings")
    evaluate.add_argument("--judge-api-base", metavar="URL", help="address of the judge model's server")
    evaluate.add_argument("--brain", metavar="MODEL", help="who answers the interviews (default: each run's own brain)")
    evaluate.add_argument("--brain-config", type=Path, metavar="FILE.yaml", help="the answering brain's settings")
    evaluate.add_argument("--api-base", metavar="URL", help="address of the answering model's server")
    evaluate.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where the evaluation goes (default: EXPERIMENT/evaluation, or evaluation/ beside the runs)",
    )
    evaluate.add_argument("--seed", type=int, default=0, help="the seed of the order answers are shown in (default 0)")
    evaluate.add_argument("--cache", type=Path, metavar="DIR", help="a model answer cache (default: OUT/cache)")
    evaluate.add_argument(
        "--dry-run",
        action="store_true",
        help="count what the models would be sent and what it would cost; nothing is sent or written",
    )
    evaluate.add_argument(
        "--plot", action="store_true", help="also draw OUT/believability.png (needs smallville[plot])"
    )
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    evaluate.add_argument("--quiet", action="store_true", help="no progress lines")
    _budget_flags(evaluate)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code = _command(args)
        sys.stdout.flush()  # (a closed pipe is found here, not at exit)
        return code
    except BrokenPipeError:  # what reads the output went away (`| head`): stop quietly, as `cat` does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (the flush at exit too)
        return 1
    except (SmallvilleError, OSError) as exc:  # (OSError: a runs folder that cannot be written, a full disk, ...)
        error = as_error(exc)
        print(error.report(), file=sys.stderr)
        return error.exit_code


def _command(args) -> int:
    """Run the command `args` name; its exit code."""
    commands = {
        "validate": _validate,
        "replay": _replay,
        "resume": _continue,
        "fork": _continue,
        "inspect": _ask,
        "interview": _ask,
        "town": _town,
        "verify": _verify,
        "why": _why,
        "metrics": _metrics,
        "experiment": _experiment,
        "estimate": _estimate,
        "check-model": _check_model,
        "serve": _serve,
        "evaluate": _evaluate,
    }
    return commands.get(args.command, _run)(args)


def _evaluate(args) -> int:
    from smallville.evaluate.command import main as evaluate

    return evaluate(args, _budget(args))


def _verify(args) -> int:
    from smallville.run.manifest import read_manifest
    from smallville.run.verify import verify

    read_manifest(args.run_dir)  # a folder that is not a run: one line, exit 2
    verdict = verify(args.run_dir)
    if verdict.difference:
        raise Unreproduced(f"{args.run_dir} does not reproduce: {verdict.difference}")
    print(f"{args.run_dir}: reproduced: {verdict.events:,} events and {verdict.checkpoints} checkpoints identical")
    return 0


def _validate(args) -> int:
    from smallville.scenario import validate_files

    problems = validate_files([str(f) for f in args.files])
    if problems:
        raise ScenarioError(problems)
    for f in args.files:
        print(f"{f}: ok")
    return 0


def _replay(args) -> int:
    from smallville.replay import load_run
    from smallville.replay.timeline import timeline
    from smallville.timefmt import parse_datetime

    run = load_run(args.run_dir)
    if args.html:
        from smallville.replay.page import render_page

        args.html.write_text(render_page(run), encoding="utf-8")
        print(f"wrote {args.html}")
        return 0
    agent = run.agent_id(args.agent) if args.agent else None
    first = run.manifest.start
    last = parse_datetime(run.manifest.sim_reached or (run.events[-1]["time"] if run.events else first))
    since = _moment(args.at, "--at", first, last) or 0.0
    if not 0 <= since <= (last - first).total_seconds():
        raise UsageError(f"--at {args.at}: {run.path} covers {run.manifest.sim_start} to {last:%Y-%m-%d %H:%M:%S}")
    until = _moment(args.until, "--until", first, last)
    if until is not None and until < since:
        raise UsageError(f"--until {args.until} comes before the start of the replay")
    live = args.format == "live" or (args.format is None and sys.stdout.isatty() and sys.stdin.isatty())
    if live:
        if not (sys.stdout.isatty() and sys.stdin.isatty()):
            raise UsageError("--format live needs a terminal; use --format text in pipes and scripts")
        from smallville.replay.live import play

        play(run, since, agent, args.speed, args.paused)
        return 0
    for line in timeline(run, agent, since, until, args.all):
        print(line)
    return 0


def _continue(args) -> int:
    """`resume` and `fork`."""
    from smallville import render
    from smallville.run import Run, fork_run, resume_run
    from smallville.run.manifest import read_manifest

    manifest = read_manifest(args.run_dir)
    start = manifest.start
    brain = {"brain": args.brain, "brain_config": args.brain_config, "api_base": args.api_base}
    if args.command == "resume":
        until = manifest.duration_s + (args.duration or 0.0)

        def launch(on_start, on_step):
            return resume_run(
                args.run_dir, extend=args.duration, on_start=on_start, on_step=on_step, budget=_budget(args), **brain
            )
    else:
        at = _at(Run(args.run_dir, manifest), args.at, "--at")
        until = at + args.duration if args.duration else manifest.duration_s

        def launch(on_start, on_step):
            return fork_run(
                args.run_dir,
                at,
                seed=args.seed,
                inject=[tuple(i) for i in args.inject],
                duration=args.duration,
                runs_dir=args.runs_dir,
                on_start=on_start,
                on_step=on_step,
                budget=_budget(args),
                **brain,
            )

    result = render.with_progress(launch, start, until, args.quiet)
    return _exit_code(result)


def _exit_code(result) -> int:
    """0 for a completed run; else the exit code of what stopped it: its budget (after one
    line saying which limit and how to go on) or Ctrl-C."""
    status = result.manifest.status
    if status == "budget_exhausted":
        stop = result.manifest.budget_stop
        flag = "--" + stop["limit"]
        print(
            f"smallville: budget reached at {stop['at']}: {stop['spent']} of {flag} {stop['value']} spent; "
            f"go on with: smallville resume {result.path} {flag} MORE",
            file=sys.stderr,
        )
        return BudgetExhausted.exit_code
    return 0 if status == "completed" else Interrupted.exit_code


def _ask(args) -> int:
    """`inspect` and `interview`: the state rebuilt in memory from a checkpoint, never a change to the run."""
    import json

    from smallville.run import Run

    run = Run.open(args.run_dir)
    agent = args.agent = run.agent_id(args.agent) if getattr(args, "agent", None) else None
    at = _at(run, args.at, "--at")
    if args.command == "interview":
        out = _interview(run, run.reached() if at is None else at, args)
    else:
        out = _inspect(run, at, agent, args.query)
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    from smallville import render

    render.print_inspection(args.command, out)
    return 0


def _interview(run, at: float, args) -> dict:
    """The answer, from the state `smallville.run.shown` chooses (exact with `--exact`), saying which."""
    import math

    from smallville import mind
    from smallville.run.shown import shown, state

    choice = shown(run, at, math.inf) if args.exact else shown(run, at)
    with state(run, choice) as sim:  # it refuses a time outside the run
        return {**mind.interview(sim, args.agent, args.question), **choice.fields(run)}


def _inspect(run, at: float | None, agent: str | None, query: str | None):
    """One agent's state, or everyone's in brief, at `at` exactly."""
    from smallville import mind

    with run.state_at(at) as sim:  # it refuses a time outside the run
        if agent:
            return mind.inspect_agent(sim, agent, query)
        return [
            {k: v for k, v in mind.inspect_agent(sim, a).items() if k in ("agent", "area", "activity")}
            for a in sim.agents
        ]


def _why(args) -> int:
    """`why`: an account of a decision, or a probe's chain, read from the run's files alone."""
    import json

    from smallville.run import Run
    from smallville.why import text

    run = Run.open(args.run_dir)
    if args.probe is not None:
        out = run.probe_chain(args.probe, args.agent)
        lines = text.chain_lines(out)
    else:
        if args.at is None and args.event is None:
            raise UsageError("why: give --at TIME, --event N or --probe NAME")
        at = _at(run, args.at, "--at")
        out = run.why(args.agent, at=at, event=args.event, depth=args.depth)
        lines = text.account_lines(out)
    print(json.dumps(out, indent=2, ensure_ascii=False) if args.json else "\n".join(lines))
    return 0


def _at(run, text: str | None, flag: str) -> float | None:
    """Seconds since the start of `run` (a `Run`) of a time given on the command line; the
    run covers its start to where it got to."""
    from smallville.timefmt import sim_datetime

    if text is None:
        return None
    return _moment(text, flag, run.start, sim_datetime(run.start, run.reached()))


def _moment(text: str | None, flag: str, first, last) -> float | None:
    """Seconds since `first` of a time given on the command line about a run that covers
    `first` to `last`, in any form `timefmt.parse_moment` takes; None when not given."""
    if text is None:
        return None
    from smallville.timefmt import parse_moment

    try:
        return (parse_moment(text, first, last) - first).total_seconds()
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _serve(args) -> int:
    if not args.runs_dir.is_dir():
        raise UsageError(f"{args.runs_dir} is not a folder of runs")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is a number from 0 to 65535")
    from smallville.serve import serve

    try:
        serve(args.runs_dir, args.host, args.port, say=lambda line: print(line, flush=True))
    except OSError as exc:
        raise SmallvilleError(f"cannot listen on {args.host} port {args.port}: {exc.strerror or exc}") from None
    return 0


def _metrics(args) -> int:
    import json

    from smallville.metrics import print_metrics, run_metrics

    m = run_metrics(args.run_dir)
    if args.json:
        print(json.dumps(m.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_metrics(m)
    if args.plot:
        from smallville.plots import plot_run

        written = plot_run(m, args.run_dir / "plots" if args.plot is True else args.plot)
        print("wrote " + ", ".join(map(str, written)), file=sys.stderr if args.json else sys.stdout)
    return 0


def _experiment(args) -> int:
    from smallville.experiment import load_experiment, run_experiment

    exp = load_experiment(args.file)
    try:
        result = run_experiment(
            exp,
            workers=args.workers,
            out=args.runs_dir,
            quiet=args.quiet,
            executor=args.executor,
            address=args.address,
            budget=_budget(args),
        )
    except KeyboardInterrupt:
        raise Interrupted("interrupted: completed runs are kept; run the experiment again to do the rest") from None
    if args.plot:
        from smallville.experiment import plot_experiment

        print("wrote " + ", ".join(map(str, plot_experiment(exp, result.out, result.summary))))
    return 0 if result.ok else SmallvilleError.exit_code  # (the table shows which runs failed)


def _town(args) -> int:
    from smallville.town import generate_town, write_town

    town = generate_town(args.agents, args.seed)
    write_town(town, args.out, force=args.force)
    print(f"wrote {args.out} and {len(town.agents)} agent files in {args.out.parent / 'agents'}")
    return 0


def _estimate(args) -> int:
    import json

    from smallville import render
    from smallville.brain.config import load_config
    from smallville.estimate import estimate
    from smallville.scenario import load_scenario

    scenario = load_scenario(str(args.scenario))
    settings = load_config(
        scenario=scenario.brain,
        file=args.brain_config,
        flags={"model": args.brain, "api_base": args.api_base},
        scenario_path=str(args.scenario),
    )
    result = estimate(
        scenario,
        settings,
        duration=args.duration,
        seed=args.seed,
        from_run=args.from_run,
        latency=args.latency,
        concurrency=args.concurrency,
        embedder=args.embedder,
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render.print_estimate(result.to_dict(), scenario, args.latency, args.concurrency or settings.concurrency_first)
    return 0


def _check_model(args) -> int:
    """0 when every request kind came back usable from the model, 1 otherwise."""
    import json

    from smallville import render
    from smallville.brain.config import load_config
    from smallville.checkmodel import check_model
    from smallville.scenario import load_scenario

    if not args.scenario.is_file():
        raise UsageError(
            f"--scenario {args.scenario}: no such file (the default town is {DEFAULT_TOWN}, "
            "relative to the folder you run in)"
        )
    scenario = load_scenario(str(args.scenario))
    settings = load_config(
        scenario=scenario.brain,
        file=args.brain_config,
        flags={"model": args.model, "api_base": args.api_base},
        scenario_path=str(args.scenario),
    )
    if settings.is_offline:
        raise UsageError(
            "check-model needs a model (smallville check-model MODEL, or a --brain-config that names "
            "one): the offline brain answers every request by rule"
        )
    result = check_model(
        scenario,
        settings,
        seed=args.seed,
        embedder=args.embedder,
        said=lambda line: print(line, file=sys.stderr, flush=True),
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        render.print_check(result)
    return 0 if result.ok else 1


def _run(args) -> int:
    from smallville import render
    from smallville.scenario import load_scenario

    scenario = load_scenario(str(args.scenario), args.overrides)
    result = render.run_with_progress(scenario, args)
    return _exit_code(result)
