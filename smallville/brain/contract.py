"""The JSON schema a request's answer must follow: the template's schema, narrowed to the
request (each kind's `narrow_KIND`, named in its declaration: `kinds.py`). It is the whole
contract: everything the answer's parser checks is said here (one
score per memory, the places, objects and people that may be named, counts), so a model
that obeys the schema it is sent always gives a valid answer. What a schema cannot say (a
plan's blocks in order without overlaps, steps that fit their block), and the numeric
bounds it says but some servers' grammars ignore, are repaired afterwards (`repair.py`),
never retried.
"""

from __future__ import annotations

import math

from smallville.brain import requests as rq

SCORES = list(range(1, 11))
DAY = 24 * 60
BROAD = (5, 8)  # broad strokes of a day plan
STEP = (5, 15)  # minutes of an action
INSIGHTS = 5  # at most, per question
WAIT = 60  # the longest wait a reaction may ask for, minutes


NAMES = ("where", "object", "target")
"""Fields naming one of what the request offered (a place, an object, a person to talk to):
the schema sent lists them, but an answer naming another is repaired (`repair.py`: the
closest one offered, or none), not refused."""


def loosened(schema: dict) -> dict:
    """`schema` without its numeric bounds and without the lists of names of `NAMES`: what
    an answer is checked against. A number out of its bounds (a server whose grammar
    ignores them) or a name not offered is made fit by `repair.py` and logged, not asked
    again."""
    if isinstance(schema, dict):
        out = {k: loosened(v) for k, v in schema.items() if k not in ("minimum", "maximum")}
        for name in NAMES:
            if isinstance(out.get(name), dict) and "enum" in out[name]:
                out[name] = {k: v for k, v in out[name].items() if k != "enum"}
        return out
    if isinstance(schema, list):
        return [loosened(v) for v in schema]
    return schema


def _one_of(values: list, nullable: bool = False) -> dict:
    """A string that is one of `values` (or null); null alone when there are none."""
    if not values:
        return {"type": "null"} if nullable else {"type": "string", "enum": [""]}
    if nullable:
        return {"type": ["string", "null"], "enum": [*values, None]}
    return {"type": "string", "enum": list(values)}


def narrow_ratings(props: dict, r: rq.RateImportance) -> None:
    keys = [str(i) for i in range(len(r.texts))]
    props["scores"].update(
        properties={k: {"type": "integer", "enum": SCORES} for k in keys}, required=keys, additionalProperties=False
    )


def narrow_tags(props: dict, r: rq.TagMemories) -> None:
    keys = [str(i) for i in range(len(r.texts))]
    tag = {
        "type": "object",
        "properties": {"source": _one_of(list(r.sources)), "emotion": _one_of(list(r.emotions))},
        "required": ["source", "emotion"],
        "additionalProperties": False,
    }
    props["tags"].update(properties={k: tag for k in keys}, required=keys, additionalProperties=False)


def narrow_plan(props: dict, r: rq.PlanDay) -> None:
    fewest = 1 if r.start else min(BROAD[0], max(1, len({what for _, what, _ in r.routine})))
    props["broad"].update(minItems=fewest, maxItems=BROAD[1])  # a short routine: as many strokes
    props["blocks"].update(minItems=1, maxItems=most_blocks(r))
    block = props["blocks"]["items"]["properties"]
    block["start"].update(minimum=0, maximum=2 * DAY - 1)
    block["end"].update(minimum=1, maximum=2 * DAY)
    block["where"].update(_one_of(places_of(r) + [""]))


def most_blocks(r: rq.PlanDay) -> int:
    """The most blocks a plan may have: one an hour from where it starts to the next
    wake-up, and one more for each step of the routine (a step may begin mid-hour) and
    for the first and last hour's ends."""
    wake = min((at for at, _, _ in r.routine), default=7 * 60)
    hours = math.ceil((wake + DAY - (r.start or wake)) / 60)
    return max(1, hours) + len(r.routine) + 2


def places_of(r: rq.PlanDay) -> list[str]:
    """Where a plan may send the agent: the places listed and those its routine names."""
    return sorted(set(r.places) | {where for _, _, where in r.routine if where})


def narrow_decompose(props: dict, r: rq.Decompose) -> None:
    props["steps"].update(minItems=1, maxItems=math.ceil(max(1, r.end - r.start) / STEP[0]))
    step = props["steps"]["items"]["properties"]
    step["minutes"].update(minimum=STEP[0], maximum=STEP[1])
    step["object"].update(_one_of(sorted(set(r.objects) | set(r.elsewhere)), nullable=True))


def narrow_react(props: dict, r: rq.React) -> None:
    people = sorted({p[0] for p in r.people})
    if not people:
        props["action"]["enum"] = ["continue", "wait", "replan"]
    props["target"].update(_one_of(people, nullable=True))
    props["minutes"].update(minimum=0, maximum=WAIT)


def narrow_questions(props: dict, r: rq.ReflectQuestions) -> None:
    props["questions"].update(minItems=1, maxItems=max(1, r.count))


def narrow_insights(props: dict, r: rq.Insights) -> None:
    props["insights"]["maxItems"] = INSIGHTS
    because = props["insights"]["items"]["properties"]["because"]
    if r.evidence:
        because.update(items={"type": "integer", "enum": list(range(len(r.evidence)))}, minItems=1)
    else:
        because["maxItems"] = 0


def narrow_interview(props: dict, r: rq.Interview) -> None:
    ids = [m[0] for m in r.memories]
    if ids:
        props["cites"]["items"] = {"type": "integer", "enum": ids}
    else:
        props["cites"]["maxItems"] = 0


def narrow_judge(props: dict, r: rq.Judge) -> None:
    labels = [label for label, _ in r.answers]
    # No uniqueItems (few constrained decoders can enforce it): a label named twice keeps
    # its first place, and labels left out tie last (evaluate/judge.py).
    props["ranking"].update(items=_one_of(labels), minItems=len(labels), maxItems=len(labels))
    props["embellished"]["items"]["properties"]["answer"].update(_one_of(labels))
