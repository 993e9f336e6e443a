"""Every request kind, declared once.

A kind's declaration names its request and answer types, how the template's schema is
narrowed to a request (`contract.narrow_KIND`), how an answer is made fit where a schema
cannot say it (`repair.repair_KIND`), its safe default (`defaults`), and the list an answer
keys by memory number (a rating per memory). The rest is found from the kind's name: its
prompt template is `templates/KIND.yaml` and the offline brain answers it with `_KIND`
(a test checks that every kind has both). Adding a kind is an entry here, a template and
an offline answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smallville.brain import contract, defaults, repair
from smallville.brain import requests as rq

Notes = tuple[str, ...]


@dataclass(frozen=True)
class Kind:
    request: type[rq.Message]
    answer: type[rq.Message]
    safe: Callable[[Any], rq.Message]  # the answer when no valid one came
    narrow: Callable[[dict, Any], None] | None = None  # the schema's properties narrowed to a request
    repair: Callable[[Any, Any, Callable[[str], None]], rq.Message] | None = None
    keyed: str = ""  # the answer's list a model writes keyed by number

    @property
    def name(self) -> str:
        return self.request.kind


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(rq.RateImportance, rq.Importance, defaults.unrated, contract.narrow_ratings, keyed="scores"),
        Kind(rq.TagMemories, rq.Tags, defaults.untagged_all, contract.narrow_tags, keyed="tags"),
        Kind(rq.Summarize, rq.Summary, defaults.persona_only),
        Kind(rq.PlanDay, rq.DayPlan, defaults.routine_plan, contract.narrow_plan, repair.repair_plan),
        Kind(rq.Decompose, rq.Actions, defaults.block_as_is, contract.narrow_decompose, repair.repair_actions),
        Kind(rq.React, rq.Reaction, defaults.carry_on, contract.narrow_react, repair.repair_reaction),
        Kind(rq.Speak, rq.Utterance, defaults.goodbye),
        Kind(rq.AfterTalk, rq.TalkNotes, defaults.plain_notes),
        Kind(rq.ReflectQuestions, rq.Questions, defaults.no_questions, contract.narrow_questions),
        Kind(rq.Insights, rq.InsightList, defaults.no_insights, contract.narrow_insights, repair.repair_insights),
        Kind(rq.Interview, rq.Reply, defaults.no_reply, contract.narrow_interview),
        Kind(rq.Judge, rq.Verdict, defaults.no_verdict, contract.narrow_judge),
    )
}
REQUEST_KINDS: dict[str, type] = {name: k.request for name, k in KINDS.items()}
ANSWER_OF: dict[type, type] = {k.request: k.answer for k in KINDS.values()}


def of(request: rq.Message) -> Kind:
    """The declaration of `request`'s kind."""
    return KINDS[request.kind]


def safe_answer(request: rq.Message) -> rq.Message:
    """What `request` gets when no valid answer came."""
    return of(request).safe(request)


def narrowed(schema: dict, request: rq.Message) -> dict:
    """`schema` (a template's) narrowed to `request`; the template's own when nothing about
    the request narrows it."""
    narrow = of(request).narrow
    if narrow is None:
        return schema
    out = copy.deepcopy(schema)
    narrow(out["properties"], request)
    return out


def repaired(request: rq.Message, answer: rq.Message, canned: frozenset[str] = frozenset()) -> tuple[rq.Message, Notes]:
    """`answer` made fit for `request`, and what was done to it (nothing: `()`). `canned`
    holds the texts of the request's template a model may copy instead of answering
    (`Template.canned`)."""
    notes: list[str] = []
    fixed = repair.uncopied(answer, canned, notes.append) if canned else answer
    fix = of(request).repair
    if fix is not None:
        fixed = fix(request, fixed, notes.append)
    return (fixed, tuple(notes)) if notes else (answer, ())


def from_model(request: rq.Message, data: dict) -> dict:
    """A valid answer's JSON as the answer class holds it (what a model keys by the memory's
    number becomes a list in the request's order)."""
    keyed = of(request).keyed
    if not keyed:
        return data
    return {**data, keyed: [data[keyed][str(i)] for i in range(len(request.texts))]}


def to_model_json(answer: rq.Message) -> dict:
    """An answer as a model following its request's schema would write it (the inverse of
    `from_model`)."""
    data = _strip(answer.to_dict())
    keyed = next((k.keyed for k in KINDS.values() if k.answer is type(answer) and k.keyed), "")
    if keyed:
        data[keyed] = {str(i): item for i, item in enumerate(data[keyed])}
    return data


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "kind"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value
