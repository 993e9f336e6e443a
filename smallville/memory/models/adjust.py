"""Seed 000's rule-based importance adjustments (`memory.importance_adjust`): what is added
to the brain's 1..10 rating of a memory, by the words it holds."""

from __future__ import annotations

import re
from collections.abc import Iterable

EMOTION_WORDS = (
    "happy",
    "sad",
    "angry",
    "afraid",
    "scared",
    "excited",
    "upset",
    "worried",
    "anxious",
    "furious",
    "grief",
    "joy",
    "fear",
    "love",
    "loves",
    "loved",
    "cried",
    "crying",
    "thrilled",
    "heartbroken",
    "ashamed",
    "proud",
    "lonely",
    "jealous",
    "terrified",
    "delighted",
)
"""Words that mark an emotional event (000's diagram names the boost, not its words)."""

PREFERENCE = re.compile(r"\b(prefer|like|hate|want)(s|d|ed|red)?\b|\b(always|never)\b", re.IGNORECASE)
"""000's code: prefer, like, hate, always, never, want (and their -s and past forms)."""

GOAL = re.compile(r"\b(goals?|objectives?|must|need to|needs to|should|priority|priorities)\b", re.IGNORECASE)
"""000's code: goal, objective, must, need to, should, priority."""

EMOTION = re.compile(r"\b(" + "|".join(EMOTION_WORDS) + r")\b", re.IGNORECASE)


def people_pattern(names: Iterable[str]) -> re.Pattern | None:
    """A pattern matching any of `names` (full names and first names) as whole words."""
    words = sorted({w for name in names for w in (name, name.split()[0]) if w}, key=len, reverse=True)
    return re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE) if words else None


def adjusted(rating: int, text: str, adjust, people: re.Pattern | None) -> int:
    """`rating` plus each rule's boost that `text` meets (a named person of `people`, an
    emotion word, a stated preference, a goal), capped at `adjust.cap`; unchanged when none
    applies."""
    boost = (
        (adjust.named_person if people is not None and people.search(text) else 0)
        + (adjust.emotion if EMOTION.search(text) else 0)
        + (adjust.preference if PREFERENCE.search(text) else 0)
        + (adjust.goal if GOAL.search(text) else 0)
    )
    return min(adjust.cap, rating + boost) if boost else rating
