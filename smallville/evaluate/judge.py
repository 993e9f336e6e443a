"""The judge's side: for each agent, question and group, the conditions' answers shown
anonymised (labels A, B, ...) in a seeded random order, and the verdict read back into
conditions: a ranking (ties allowed) and the claims flagged as embellished."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from smallville.brain import requests as rq
from smallville.brain.base import fallbacks_of
from smallville.evaluate.interviews import Asked


@dataclass
class Match:
    """One comparison: `shown[i]` is the Asked behind label i."""

    request: rq.Judge
    shown: list[Asked]
    verdict: rq.Verdict | None = None
    fallback: str | None = None

    @property
    def labels(self) -> dict[str, Asked]:
        return dict(zip(string.ascii_uppercase, self.shown))

    def tiers(self) -> list[list[str]]:
        """The conditions from the most believable down, as tiers of equals: the labels a
        ranking names, in its order (a repeated label counts once), then every label it
        left out, tied last. No ranking (the safe default): []."""
        if self.verdict is None or not self.verdict.ranking:
            return []
        labels = self.labels
        named = [label for label in dict.fromkeys(self.verdict.ranking) if label in labels]
        if not named:
            return []
        tiers = [[labels[label].subject.condition] for label in named]
        rest = sorted(labels[label].subject.condition for label in labels if label not in named)
        return tiers + ([rest] if rest else [])

    def flags(self) -> list[tuple[Asked, str]]:
        labels = self.labels
        return [
            (labels[f.answer], f.claim)
            for f in (self.verdict.embellished if self.verdict else ())
            if f.answer in labels
        ]

    def row(self) -> dict:
        first = self.shown[0]
        out = {
            "group": first.subject.group,
            "agent": first.request.agent,
            "question_id": first.question.id,
            "question": first.question.text,
            "shown": [
                {"label": label, "condition": a.subject.condition, "run": a.subject.name}
                for label, a in self.labels.items()
            ],
            "ranking": [tier if len(tier) > 1 else tier[0] for tier in self.tiers()],
            "embellished": [{"condition": a.subject.condition, "claim": claim} for a, claim in self.flags()],
        }
        if self.fallback:
            out["fallback"] = self.fallback
        return out


def matches(asked: list[Asked], seed: int) -> list[Match]:
    """One match per (group, agent, question) with two or more conditions' answers, its
    answers in an order drawn from `seed` and the match's identity, so the judge never sees
    a condition in the same place."""
    by_key: dict[tuple, list[Asked]] = {}
    for a in asked:
        by_key.setdefault((a.subject.group, a.request.agent, a.question.id), []).append(a)
    out = []
    for key in sorted(by_key):
        group = sorted(by_key[key], key=lambda a: a.subject.condition)
        if len(group) < 2:
            continue
        if len(group) > len(string.ascii_uppercase):
            raise ValueError(f"at most {len(string.ascii_uppercase)} conditions can be judged together")
        random.Random(f"{seed}:{':'.join(key)}").shuffle(group)
        first = group[0].request
        labels = string.ascii_uppercase[: len(group)]
        request = rq.Judge(
            first.agent,
            first.name,
            first.persona,
            first.question,
            tuple((label, a.answer.text) for label, a in zip(labels, group)),
            tuple((label, text) for label, a in zip(labels, group) for text in a.lived),
        )
        out.append(Match(request, group))
    return out


def settle(found: list[Match], answers) -> None:
    errors = {f.index: f.error for f in fallbacks_of(answers)}
    for i, (m, verdict) in enumerate(zip(found, answers)):
        m.verdict, m.fallback = verdict, errors.get(i)
