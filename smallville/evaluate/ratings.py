"""From answers and verdicts to figures per condition: TrueSkill ratings from the judge's
rankings (the `trueskill` package, as the paper used), the share of answers the judge
found embellished, the share naming someone the agent never met, and the share of factual
questions answered as the event log says the agent knew."""

from __future__ import annotations

from smallville.evaluate.interviews import Asked
from smallville.evaluate.judge import Match

# The paper's TrueSkill ratings (mu; Park et al. 2023, section 6.3), by which parts of the
# architecture an agent had: (memory, reflection, planning).
PAPER = {
    (True, True, True): ("full", 29.89),
    (True, False, True): ("no reflection", 26.88),
    (True, False, False): ("no reflection, no planning", 25.64),
    (False, False, False): ("no memory, reflection or planning", 21.21),
}
PAPER_HUMAN = ("people role-playing the agents", 22.95)


def trueskill_ratings(found: list[Match]) -> dict[str, tuple[float, float]]:
    """(mu, sigma) per condition after every judged match, in a fixed order."""
    try:
        import trueskill
    except ImportError:
        from smallville.errors import ExtraMissing

        raise ExtraMissing("ratings need trueskill: pip install 'smallville[evaluate]'") from None
    env = trueskill.TrueSkill(draw_probability=0.1)
    ratings: dict[str, object] = {}
    for m in found:
        tiers = m.tiers()
        if len(tiers) < 2:
            continue
        teams = [(c,) for tier in tiers for c in tier]
        ranks = [rank for rank, tier in enumerate(tiers) for _ in tier]
        rated = env.rate([(ratings.setdefault(c, env.create_rating()),) for (c,) in teams], ranks=ranks)
        for (c,), (r,) in zip(teams, rated):
            ratings[c] = r
    return {c: (r.mu, r.sigma) for c, r in ratings.items()}


def per_run(asked: list[Asked], found: list[Match]) -> dict[str, dict]:
    """Per run: answers, fallbacks, embellishment (judge), strangers named, factual agreement."""
    flagged = {id(a) for m in found for a, _ in m.flags()}
    judged = {id(a) for m in found if m.tiers() or m.flags() for a in m.shown}
    out: dict[str, dict] = {}
    for a in asked:
        row = out.setdefault(
            a.subject.name,
            {
                "condition": a.subject.condition,
                "answers": 0,
                "fallbacks": 0,
                "judged": 0,
                "embellished": 0,
                "strangers": 0,
                "factual": 0,
                "agree": 0,
            },
        )
        row["answers"] += 1
        row["fallbacks"] += bool(a.fallback)
        row["judged"] += id(a) in judged
        row["embellished"] += id(a) in flagged
        row["strangers"] += bool(a.row.get("strangers"))
        if "agrees" in a.row:
            row["factual"] += 1
            row["agree"] += a.row["agrees"]
    return out


def measures(counts: dict) -> dict:
    """The shares of a run's (or a condition's) counts: None where nothing was counted."""

    def share(part: str, whole: str):
        return round(counts[part] / counts[whole], 4) if counts[whole] else None

    return {
        "embellishment_rate": share("embellished", "judged"),
        "strangers_rate": share("strangers", "answers"),
        "factual_agreement": share("agree", "factual"),
    }


def per_condition(asked: list[Asked], found: list[Match], conditions: dict[str, tuple]) -> list[dict]:
    """One row per condition: its rating (with its uncertainty), the shares over all its runs,
    and the paper's rating for the same architecture where there is one. `conditions` maps
    a condition to (memory, reflection, planning) on or off."""
    ratings = trueskill_ratings(found) if found else {}
    runs = per_run(asked, found)
    rows = []
    for condition in sorted(conditions, key=lambda c: -ratings.get(c, (0, 0))[0]):
        total: dict = {}
        for r in runs.values():
            if r["condition"] == condition:
                for k, v in r.items():
                    if k != "condition":
                        total[k] = total.get(k, 0) + v
        mu, sigma = ratings.get(condition, (None, None))
        paper = PAPER.get(conditions[condition])
        rows.append(
            {
                "condition": condition,
                "runs": sum(r["condition"] == condition for r in runs.values()),
                "answers": total.get("answers", 0),
                "trueskill_mu": _round(mu),
                "trueskill_sigma": _round(sigma),
                **measures(total),
                "fallbacks": total.get("fallbacks", 0),
                "paper": paper[0] if paper else None,
                "paper_mu": paper[1] if paper else None,
            }
        )
    return rows


def _round(value):
    return None if value is None else round(value, 2)
