"""The offline brain's judge: rules, not a model. It ranks answers by how much of what
they say their version's memories hold, and flags the capitalised names an answer uses
that neither its memories, the persona nor the question mention. It makes `--judge
offline` and evaluate's dry run work with no model; it is no measure of believability."""

from __future__ import annotations

import re

from smallville.brain import requests as rq

_WORD = re.compile(r"[a-z']{4,}")
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][a-z]+\b")
_CALENDAR = {
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
}


def rule_verdict(req: rq.Judge) -> rq.Verdict:
    lived: dict[str, str] = {}
    for label, text in req.lived:
        lived[label] = lived.get(label, "") + " " + text
    scores = []
    for position, (label, answer) in enumerate(req.answers):
        words = set(_WORD.findall(answer.lower()))
        held = words & set(_WORD.findall(lived.get(label, "").lower()))
        scores.append((-(len(held) / len(words)) if words else 0.0, position, label))
    flags = []
    for label, answer in req.answers:
        seen = f"{lived.get(label, '')} {req.persona} {req.question} {req.name}"
        for name in dict.fromkeys(_NAME.findall(answer.strip())):
            if name not in seen and name not in _CALENDAR:
                flags.append(rq.Flag(label, f"names {name}"))
    return rq.Verdict(tuple(label for *_, label in sorted(scores)), tuple(flags))
