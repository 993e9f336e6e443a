"""An evaluation for people: the table beside the paper's figures, a dry run's bill, and the
plot (with the plotting extra)."""

from __future__ import annotations

from pathlib import Path

from smallville.evaluate.ratings import PAPER_HUMAN


def _num(value, fmt: str = "{:.2f}") -> str:
    return "" if value is None else fmt.format(value)


def print_ratings(result, console=None) -> None:
    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    judged = result.judge is not None
    table = Table(title=f"Believability at {result.at}" + (f", judged by {result.judge}" if judged else ", no judge"))
    for col in ("condition", "answers", "TrueSkill", "embellished", "strangers", "factual", "paper"):
        table.add_column(col, justify="left" if col == "condition" else "right")
    for row in result.conditions:
        rating = f"{row['trueskill_mu']:.2f} ± {row['trueskill_sigma']:.2f}" if row["trueskill_mu"] is not None else ""
        table.add_row(
            row["condition"],
            f"{row['answers']:,}",
            rating,
            _num(row["embellishment_rate"], "{:.0%}"),
            _num(row["strangers_rate"], "{:.0%}"),
            _num(row["factual_agreement"], "{:.0%}"),
            _num(row["paper_mu"]),
        )
    table.add_row(f"({PAPER_HUMAN[0]}: paper only)", "", "", "", "", "", f"{PAPER_HUMAN[1]:.2f}", style="dim")
    print_table(console, table)
    console.print(
        "TrueSkill: mu ± sigma from the judge's rankings; embellished: share of judged answers the judge "
        "flagged; strangers: share naming a resident the agent never met; factual: share of factual "
        "questions answered as the event log says the agent knew; paper: the paper's mu for the same "
        "architecture (GPT-3.5 agents, human judges)",
        markup=False,
    )
    falls = sum(row["fallbacks"] for row in result.conditions)
    judge_falls = sum(bool(m.fallback) for m in result.matches)
    notes = (
        [f"{falls:,} answers and {judge_falls:,} judgements took their safe default"] if falls or judge_falls else []
    )
    if not judged:
        notes.append("no judge: no ratings or embellishment (--judge MODEL)")
    usage = result.usage.get("total", {})
    if usage.get("calls"):
        cost = f", ${usage['cost']:.4f}" if result.usage.get("cost_known", True) else ""
        notes.append(
            f"{int(usage['calls']):,} model calls, {int(usage['prompt_tokens'] + usage['completion_tokens']):,} "
            f"tokens{cost}"
        )
    for note in notes:
        console.print(note, markup=False)
    console.print(
        f"written to {result.out}: interviews.jsonl, "
        + ("judgements.jsonl, " if judged else "")
        + "ratings.csv, runs.csv, evaluation.json",
        markup=False,
    )


def print_dry_run(result, console=None) -> None:
    from smallville.tables import Table, make_console, print_table

    console = console or make_console()
    table = Table(title=f"What evaluating {len(result.runs)} runs at {result.at} would send")
    for col in ("model", "request", "requests", "prompt tok", "completion tok", "cost USD"):
        table.add_column(col, justify="left" if col in ("model", "request") else "right")
    rows = list(result.estimate.values())
    for row in rows:
        table.add_row(
            row["model"],
            row["kind"],
            f"{row['requests']:,}",
            f"{row['prompt_tokens']:,}",
            f"{row['completion_tokens']:,}",
            _num(row["cost_usd"], "{:.4f}") or "unknown",
        )
    if rows:
        costs = [r["cost_usd"] for r in rows]
        table.add_row(
            "total",
            "",
            f"{sum(r['requests'] for r in rows):,}",
            f"{sum(r['prompt_tokens'] for r in rows):,}",
            f"{sum(r['completion_tokens'] for r in rows):,}",
            "unknown" if None in costs else f"{sum(costs):.4f}",
            style="bold",
        )
    print_table(console, table)
    console.print(
        "counted offline: prompts rendered from the real templates and counted with each model's "
        "tokenizer, completions sized from the offline brain's answers (a model's may be 0.5x-2x); "
        "nothing was sent or written"
        if rows
        else "no model would be asked: the offline brain answers everything (nothing was written)",
        markup=False,
    )


def plot_ratings(result, out: str | Path) -> Path:
    """believability.png: each condition's TrueSkill mu ± sigma beside the paper's rating for
    the same architecture."""
    from smallville.plots import figure, save

    rows = [r for r in result.conditions if r["trueskill_mu"] is not None]
    fig = figure(figsize=(max(5, 1.4 * (len(rows) + 1)), 3.6))
    ax = fig.subplots()
    xs = range(len(rows))
    ax.bar(
        [x - 0.2 for x in xs],
        [r["trueskill_mu"] for r in rows],
        0.4,
        yerr=[r["trueskill_sigma"] for r in rows],
        capsize=3,
        label="this evaluation",
    )
    paper = [(x, r["paper_mu"]) for x, r in zip(xs, rows) if r["paper_mu"] is not None]
    if paper:
        ax.bar([x + 0.2 for x, _ in paper], [mu for _, mu in paper], 0.4, label="paper", alpha=0.6)
    ax.set_xticks(list(xs), [r["condition"] for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("TrueSkill mu")
    ax.set_title(f"Believability at {result.at}" + (f" ({result.judge})" if result.judge else ""), fontsize=9)
    ax.legend(fontsize=8)
    return save(fig, out)
