"""`smallville evaluate`: parse what the command line gave into settings, evaluate, render."""

from __future__ import annotations

import json
import sys


def settings(model: str | None, config_file, api_base: str | None):
    """The LLMConfig a model flag, a settings file and an address give; None if none was given."""
    from smallville.brain.config import load_config

    if model is None and config_file is None and api_base is None:
        return None
    return load_config(file=config_file, flags={"model": model, "api_base": api_base})


def main(args, budget: dict) -> int:
    from smallville.evaluate import evaluate, report
    from smallville.tables import make_console

    judge = settings(args.judge, args.judge_config, args.judge_api_base)
    brain = settings(args.brain, args.brain_config, args.api_base)
    err = make_console(stderr=True)

    def say(line: str) -> None:
        if not args.quiet and not args.json:
            err.print(line, markup=False)

    result = evaluate(
        args.paths,
        at=args.at,
        questions=args.questions,
        judge_settings=judge,
        brain_settings=brain,
        out=args.out,
        seed=args.seed,
        cache=args.cache,
        budget=budget,
        dry_run=args.dry_run,
        say=say,
    )
    if args.json:
        out = {
            "at": result.at,
            "out": str(result.out),
            "judge": result.judge,
            "conditions": result.conditions,
            "runs": result.runs,
            "usage": result.usage,
        }
        if args.dry_run:
            out = {"at": result.at, "estimate": list(result.estimate.values())}
        print(json.dumps(out, indent=2, ensure_ascii=False))
    elif args.dry_run:
        report.print_dry_run(result)
    else:
        report.print_ratings(result)
    if args.plot and not args.dry_run:
        written = report.plot_ratings(result, result.out / "believability.png")
        print(f"wrote {written}", file=sys.stderr if args.json else sys.stdout)
    return 0
