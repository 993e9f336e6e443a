"""Seed 003's keyword tagger (`memory.tagger: keywords`): a memory's source and emotion from
the words it holds, by an agent type's table (`agent_types:`) or the model's own."""

from __future__ import annotations

import re

from smallville.brain import requests as rq

WORD = re.compile(r"[a-z']+")


def keyword_tag(text: str, table, sources: dict[str, float], emotions: dict[str, float]) -> rq.Tag:
    """The source and the emotion whose words `text` holds (whole words, any case). Among
    several sources the one of the highest weight wins, then the table's first; none:
    `routine` (or the lightest source). No emotion word: `neutral` (or the first emotion)."""
    words = set(WORD.findall(text.lower()))
    hits = [name for name, listed in table if words & set(listed)]
    found = [name for name in hits if name in sources]
    feeling = next((name for name in hits if name in emotions), None)
    source = (
        max(found, key=lambda name: sources[name])
        if found
        else ("routine" if "routine" in sources else min(sources, key=sources.get))
    )
    emotion = feeling or ("neutral" if "neutral" in emotions else next(iter(emotions)))
    return rq.Tag(source, emotion)
