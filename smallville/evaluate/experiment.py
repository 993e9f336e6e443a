"""Believability in experiments: an experiment file's `evaluate:` block evaluates its runs
once they are done, and the results gain columns (per run: the shares; per condition in the
summary: the TrueSkill rating and its uncertainty). The block's keys are checked where the
file is read (experiment/spec.py)."""

from __future__ import annotations

from pathlib import Path

from smallville.errors import SmallvilleError

RUN_COLUMNS = ("factual_agreement", "embellishment_rate", "strangers_rate")


def believability(
    block: dict,
    out: Path,
    rows: list[dict],
    source: Path | None,
    console=None,
    quiet: bool = False,
    budget: dict | None = None,
) -> dict[str, dict]:
    """Evaluate the experiment's runs in OUT into OUT/evaluation, add the shares to each
    run's row, and give each condition's rating. A failure is said in one line and leaves
    the results without the columns."""
    from smallville.evaluate import evaluate
    from smallville.evaluate.command import settings
    from smallville.evaluate.report import print_ratings

    def path(value):
        if value is None:
            return None
        p = Path(value)
        return p if p.is_absolute() or source is None or p.exists() else source.parent / p

    try:
        result = evaluate(
            [out],
            at=block.get("at"),
            questions=path(block.get("questions")),
            judge_settings=settings(block.get("judge"), path(block.get("judge_config")), block.get("judge_api_base")),
            brain_settings=settings(block.get("brain"), None, block.get("api_base")),
            seed=int(block.get("seed", 0)),
            budget=budget,
        )
    except SmallvilleError as exc:
        if console is not None:
            console.print(f"evaluation failed: {exc}", markup=False)
        return {}
    for row in rows:
        measured = result.runs.get(row["run"], {})
        row.update({k: measured.get(k) for k in RUN_COLUMNS})
    if console is not None and not quiet:
        print_ratings(result, console)
    return {
        r["condition"]: {"believability_mu": r["trueskill_mu"], "believability_sigma": r["trueskill_sigma"]}
        for r in result.conditions
    }
