"""`evaluate`: the paper's believability study over runs. Every agent of every run is
interviewed at one simulated time through its run's own brain (or another), a judge ranks
the conditions' answers and flags embellishment, and the figures per condition are worked
out. Runs are only read; everything is written to the evaluation's folder:

    interviews.jsonl   every question, answer and the memories it drew on, and the checks
    judgements.jsonl   every comparison: the answers as shown, the ranking, the flags
    answers.jsonl      the brain's record of this evaluation (requests and answers)
    cache/             valid model answers, reused when the evaluation is run again
    ratings.csv        per condition: TrueSkill mu and sigma, shares, the paper's rating
    runs.csv           per run: the shares
    evaluation.json    what was asked of whom, when, and what it cost
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from smallville.brain.ledger import Ledger
from smallville.errors import UsageError
from smallville.evaluate import interviews, judge, ratings
from smallville.evaluate.protocol import load_protocol
from smallville.evaluate.subjects import find_subjects


@dataclass
class Evaluation:
    out: Path
    at: str
    asked: list = field(default_factory=list)
    matches: list = field(default_factory=list)
    conditions: list[dict] = field(default_factory=list)  # ratings.csv's rows
    runs: dict[str, dict] = field(default_factory=dict)  # run -> condition, counts and shares
    usage: dict = field(default_factory=dict)
    estimate: dict | None = None  # a dry run's: kind -> requests, tokens, cost
    judge: str | None = None
    seconds: dict = field(default_factory=dict)  # wall time: restoring states, interviews, judging


def evaluate(
    paths: list[Path],
    *,
    at: str | None = None,
    questions: str | Path | None = None,
    judge_settings=None,
    brain_settings=None,
    out: Path | None = None,
    seed: int = 0,
    cache: Path | None = None,
    budget: dict | None = None,
    dry_run: bool = False,
    say=lambda line: None,
) -> Evaluation:
    """Evaluate the runs of `paths` (run folders, or an experiment's output folder).
    `at`: "YYYY-MM-DD HH:MM" (default: where the runs end; the earliest end if they differ).
    `judge_settings`, `brain_settings`: `LLMConfig`s (None: no judge; each run's own brain).
    `dry_run`: answer with the offline brain and judge, and count what the models would be
    sent (`estimate`); nothing is written."""
    subjects, default_out = find_subjects([Path(p) for p in paths])
    out = Path(out) if out is not None else default_out
    protocol = load_protocol(questions)
    t = _time(subjects, at)
    brains = Brains(Ledger(), None if dry_run else (cache or out / "cache"), budget, dry_run)
    result = Evaluation(out, subjects[0].run.when(t)[:16], judge=judge_settings.label if judge_settings else None)
    record = None
    try:
        if not dry_run:
            out.mkdir(parents=True, exist_ok=True)
            record = open(out / "answers.jsonl", "w", encoding="utf-8")
        known, by_brain, names, vectors = {}, {}, {}, {}
        began = time.perf_counter()
        for s in subjects:
            say(f"interviewing {s.name} ({s.condition}) at {result.at}")
            asked, known[s.name] = interviews.prepare(s, protocol, t, vectors)
            settings = brain_settings or _own_settings(s.run)
            names[s.name] = settings.label
            by_brain.setdefault(_key(settings, s.run.seed_now), (settings, s.run.seed_now, []))[2].extend(asked)
        result.seconds["restore"] = time.perf_counter() - began
        for settings, run_seed, asked in by_brain.values():
            answers = brains.brain(settings, run_seed, record).answer([a.request for a in asked])
            interviews.settle(asked, answers, known, names)
            result.asked += asked
        result.seconds["interviews"] = time.perf_counter() - began - result.seconds["restore"]
        result.asked.sort(key=lambda a: (a.subject.condition, a.subject.group, a.request.agent, a.question.id))
        if not dry_run:  # kept, whatever happens to the judging
            _jsonl(out / "interviews.jsonl", [a.row for a in result.asked])
        if judge_settings is not None:
            result.matches = judge.matches(result.asked, seed)
            say(f"judging {len(result.matches):,} comparisons with {judge_settings.label}")
            if result.matches:
                verdicts = brains.brain(judge_settings, seed, record).answer([m.request for m in result.matches])
                judge.settle(result.matches, verdicts)
            result.seconds["judge"] = time.perf_counter() - began - sum(result.seconds.values())
        architecture = {s.condition: _architecture(s.run) for s in subjects}
        result.conditions = ratings.per_condition(result.asked, result.matches, architecture)
        result.runs = {
            name: {**counts, **ratings.measures(counts)}
            for name, counts in ratings.per_run(result.asked, result.matches).items()
        }
    finally:
        if record is not None:
            record.close()
        brains.close()
    usage = brains.ledger.to_dict()
    result.usage = {k: usage[k] for k in ("total", "cost_known", "by_kind")}
    if dry_run:
        result.estimate = brains.estimate()
        return result
    _write(result, subjects, protocol, judge_settings, brain_settings, seed)
    return result


def _time(subjects, at: str | None) -> float:
    """Seconds since the start, the same for every run: `at`, or the earliest end."""
    ends = [s.run.reached() for s in subjects]
    if at is None:
        return min(ends)
    from smallville.timefmt import parse_moment, sim_datetime

    start = subjects[0].run.start
    try:
        t = (parse_moment(at, start, sim_datetime(start, min(ends))) - start).total_seconds()
    except ValueError as exc:
        raise UsageError(f"--at: {exc}") from None
    if not 0 <= t <= min(ends):
        short = min(subjects, key=lambda s: s.run.reached())
        raise UsageError(
            f"--at {at}: {short.run.path} covers {short.run.manifest.sim_start} to "
            f"{short.run.when(short.run.reached())}"
        )
    return t


def _key(settings, seed: int) -> str:
    return json.dumps([settings.describe(), seed], sort_keys=True, default=str)


def _own_settings(run):
    from smallville.brain.assembly import settings_of

    return replace(settings_of(run.manifest.brain), budget={})


def _architecture(run) -> tuple[bool, bool, bool]:
    config = run.manifest.config or {}
    return (config.get("retrieval", True), config.get("reflection", True), config.get("planning", True))


class Brains:
    """The brain stacks of an evaluation, one per settings and seed (brain/assembly.py:
    retries, fallbacks, budget, cache), each recording to the evaluation's answers.jsonl;
    in a dry run, the offline brain answering behind a meter per model."""

    def __init__(self, ledger: Ledger, cache: Path | None, budget: dict | None, dry_run: bool) -> None:
        self.ledger, self.cache, self.dry_run = ledger, cache, dry_run
        self.budget = {k: v for k, v in (budget or {}).items() if v is not None}
        self.stacks: dict = {}
        self.meters: dict = {}

    def brain(self, settings, seed: int, record=None):
        from smallville.brain.assembly import assemble
        from smallville.brain.record import Recording

        settings = replace(settings, budget=self.budget)
        key = _key(settings, seed)
        if key not in self.stacks:
            model = self._meter(settings, seed) if self.dry_run and not settings.is_offline else None
            stack = assemble(
                settings, seed, ledger=self.ledger, cache=None if settings.is_offline else self.cache, model=model
            )
            self.stacks[key] = stack
            if model is None and not settings.is_offline:
                stack.brain.preflight()
        brain = self.stacks[key].brain
        return Recording(brain, record) if record is not None else brain

    def _meter(self, settings, seed: int):
        from smallville.brain.calls import import_litellm
        from smallville.brain.offline import OfflineBrain
        from smallville.brain.prompts import load_templates
        from smallville.estimate import Meter

        meter = Meter(OfflineBrain(seed), settings, load_templates(), import_litellm())
        self.meters.setdefault(settings.label, []).append((settings, meter))
        return meter

    def estimate(self) -> dict:
        """What the models would be sent: per model and request kind, requests, prompt and
        completion tokens and their cost (None: no price known)."""
        from smallville.estimate import prices

        out: dict = {}
        for model, meters in self.meters.items():
            for _, meter in meters:
                for kind, row in meter.rows.items():
                    into = out.setdefault(
                        f"{model} {kind}",
                        {
                            "model": model,
                            "kind": kind,
                            "requests": 0,
                            "prompt_tokens": 0,
                            "completion_tokens": 0,
                            "cost_usd": 0.0,
                        },
                    )
                    for k in ("requests", "prompt_tokens", "completion_tokens"):
                        into[k] += row[k]
                    prompt, completion = prices(meter.endpoint(kind), row["prompt_tokens"], row["completion_tokens"])
                    into["cost_usd"] = (
                        None if prompt is None or into["cost_usd"] is None else into["cost_usd"] + prompt + completion
                    )
        return out

    def close(self) -> None:
        for stack in self.stacks.values():
            stack.close()


def _write(result: Evaluation, subjects, protocol, judge_settings, brain_settings, seed: int) -> None:
    from smallville.csvfile import write_csv

    out = result.out
    if judge_settings is not None:
        _jsonl(out / "judgements.jsonl", [m.row() for m in result.matches])
    write_csv(out / "ratings.csv", result.conditions)
    write_csv(out / "runs.csv", [{"run": name, **row} for name, row in sorted(result.runs.items())])
    about = {
        "at": result.at,
        "protocol": protocol.describe(),
        "seed": seed,
        "runs": [{"run": str(s.run.path), "condition": s.condition, "group": s.group} for s in subjects],
        "brain": brain_settings.describe() if brain_settings else "each run's own",
        "judge": judge_settings.describe() if judge_settings else None,
        "usage": result.usage,
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
    }
    _atomic(out / "evaluation.json", json.dumps(about, indent=2, ensure_ascii=False) + "\n")


def _jsonl(path: Path, rows: list[dict]) -> None:
    _atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
