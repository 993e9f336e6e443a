"""Answers made fit for the engine where a schema cannot say what fits.

A schema can say that a plan is a list of blocks naming known places, not that the blocks
are in order, do not overlap and cover the day; it can bound an action's minutes, not make
the actions fit their block. Rather than ask again (and pay again, and likely get the same
from a small model), such answers are repaired here, deterministically, from the request
alone. Every repair is named, and the engine logs them as a `brain_repair` event: never
silent. An answer that needs nothing comes back as it is, with no notes. Each kind's repair
is named in its declaration (`kinds.py`), which applies them (`kinds.repaired`).

    any kind   a text the model copied from its prompt (a description of the schema, its
               example: "what the character does") is no answer: left empty, or dropped
               from a list (and repaired as below when empty)
    plan_day   times are clamped to the two days a plan may span; blocks that end before
               they start, or say nothing, are dropped; blocks are sorted; an overlap
               is cut from the later block; a place not in the list becomes the closest
               one named (or "" to stay put); a block whose words say sleep is sleep;
               what the plan leaves out from the moment it was asked (or a re-plan's
               start) to the next wake-up is filled from the persona's routine
    decompose  a step longer than 15 minutes is split into steps of at most 15, one shorter
               than 5 lengthened to 5 (but the last, if it ends with the block); no steps: the
               block in 15-minute steps of its activity; steps past the block's end are cut (the last one may end short
               with the block); an object not offered becomes the one offered it names
               or closely resembles ("fridge" for "fridge (kitchen)"), or none
               a step that says nothing is the block's activity
    react      "talk" to no one present: carry on; a wait of under a minute: 5 minutes
    insights   an insight that says nothing is dropped
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import fields, replace

from smallville.brain import requests as rq
from smallville.brain.contract import STEP, places_of
from smallville.brain.defaults import routine_plan
from smallville.brain.text import mentions_sleep, plain, progressive
from smallville.timefmt import clock_of_day

DAY = 24 * 60


def uncopied(answer: rq.Message, canned: frozenset[str], note: Callable[[str], None]) -> rq.Message:
    """`answer` with each text that is one of `canned` left empty ("" for a field, dropped
    from a list of texts), in the items of its lists too."""
    changes = {}
    for f in fields(answer):
        value = getattr(answer, f.name)
        if isinstance(value, str) and value and plain(value) in canned:
            note(f"{f.name} {value!r} is text of the prompt, not an answer: left empty")
            changes[f.name] = ""
        elif isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
            kept = tuple(v for v in value if plain(v) not in canned)
            if len(kept) < len(value):
                note(f"{len(value) - len(kept)} of {f.name} are text of the prompt, not answers: dropped")
                changes[f.name] = kept
        elif isinstance(value, tuple) and value and all(isinstance(v, rq.Message) for v in value):
            items = tuple(uncopied(v, canned, note) for v in value)
            if items != value:
                changes[f.name] = items
    return replace(answer, **changes) if changes else answer


def repair_plan(request: rq.PlanDay, plan: rq.DayPlan, note: Callable[[str], None]) -> rq.DayPlan:
    known = places_of(request)
    places = {p.lower(): p for p in known}
    blocks = []
    for b in plan.blocks:
        start, end = min(max(b.start, 0), 2 * DAY - 1), min(max(b.end, 1), 2 * DAY)
        if (start, end) != (b.start, b.end):
            note(
                f"{b.activity!r} {b.start}-{b.end} clamped to {clock_of_day(start)}-{clock_of_day(end)} "
                "of the plan's two days"
            )
            b = replace(b, start=start, end=end)
        if b.end <= b.start:
            note(f"dropped {b.activity!r} {clock_of_day(b.start)}-{clock_of_day(b.end)}: it ends before it starts")
            continue
        if not b.activity.strip():
            note(f"dropped the block {clock_of_day(b.start)}-{clock_of_day(b.end)}: it says nothing")
            continue
        if not b.sleep and mentions_sleep(b.activity):
            note(f"{b.activity!r} {clock_of_day(b.start)}-{clock_of_day(b.end)} is sleep")
            b = replace(b, sleep=True)
        where = b.where
        if where and where not in known:
            where = places.get(where.lower()) or _closest(where, known)
            note(f"place {b.where!r} is not known: {where!r}" if where else f"place {b.where!r} is not known: stay put")
        blocks.append(replace(b, where=where) if where != b.where else b)
    ordered = sorted(blocks, key=lambda b: (b.start, b.end))
    if ordered != blocks:
        note("blocks sorted by start")
    kept: list[rq.Block] = []
    for b in ordered:
        if kept and b.start < kept[-1].end:
            if b.end <= kept[-1].end:
                note(
                    f"dropped {b.activity!r} {clock_of_day(b.start)}-{clock_of_day(b.end)}: inside the block before it"
                )
                continue
            note(f"{b.activity!r} starts at {clock_of_day(kept[-1].end)}, not {clock_of_day(b.start)}: it overlapped")
            b = replace(b, start=kept[-1].end)
        kept.append(b)
    return rq.DayPlan(tuple(_fill(kept, request, note)), plan.broad)


def _fill(blocks: list[rq.Block], request: rq.PlanDay, note: Callable[[str], None]) -> list[rq.Block]:
    """`blocks` with what they leave out of the day, from the moment the plan was asked (or
    a re-plan's start) to the next wake-up, taken from the routine (the safe default plan)."""
    routine = routine_plan(request).blocks
    wake = routine[0].start if routine else 7 * 60
    day_end = wake + DAY
    gaps, t = [], min(request.plan_from, day_end)
    for b in blocks:
        if b.start > t:
            gaps.append((t, b.start))
        t = max(t, b.end)
    if t < day_end:
        gaps.append((t, day_end))
    out = list(blocks)
    for start, end in gaps:
        filled = [
            replace(r, start=max(r.start + shift, start), end=min(r.end + shift, end))
            for shift in (-DAY, 0, DAY)
            for r in routine
            if max(r.start + shift, start) < min(r.end + shift, end)
        ]
        if not filled:
            filled = [rq.Block(start, end, progressive("carry on"), "")]
        note(f"{clock_of_day(start)}-{clock_of_day(end)} was not planned: filled from the routine")
        out.extend(filled)
    return sorted(out, key=lambda b: b.start)


def _closest(name: str, places) -> str:
    found = difflib.get_close_matches(name, list(places), n=1, cutoff=0.6)
    if found:
        return found[0]
    words = set(name.lower().split())
    best = max(places, key=lambda p: (len(words & set(p.lower().split())), p), default="")
    return best if best and words & set(best.lower().split()) else ""


def _objects(request: rq.Decompose, actions: rq.Actions, note: Callable[[str], None]) -> rq.Actions:
    """Each step's object one of those offered (see `_actions`)."""
    offered = (*request.objects, *request.elsewhere)
    if all(s.object is None or s.object in offered for s in actions.steps):
        return actions
    steps = []
    for step in actions.steps:
        if step.object is not None and step.object not in offered:
            named = next((o for o in offered if rq.object_of(o)[0].lower() == step.object.strip().lower()), None)
            found = named or next(iter(difflib.get_close_matches(step.object, offered, n=1, cutoff=0.6)), None)
            note(
                f"object {step.object!r} is not offered: {found!r}"
                if found
                else f"object {step.object!r} is not offered: none"
            )
            step = replace(step, object=found)
        steps.append(step)
    return rq.Actions(tuple(steps))


def repair_actions(request: rq.Decompose, actions: rq.Actions, note: Callable[[str], None]) -> rq.Actions:
    actions = _objects(request, actions, note)
    if any(not s.description.strip() for s in actions.steps):
        note(f"a step that says nothing is {request.activity!r}")
        actions = rq.Actions(
            tuple(s if s.description.strip() else replace(s, description=request.activity) for s in actions.steps)
        )
    total = max(1, request.end - request.start)
    low, high = STEP
    minutes = [s.minutes for s in actions.steps]
    if (
        minutes
        and all(low <= m <= high for m in minutes[:-1])
        and sum(minutes) <= total
        and (low <= minutes[-1] <= high or 1 <= minutes[-1] < low and sum(minutes) == total)
    ):
        return actions  # the usual case (the last may be short, ending with its block): nothing to do
    if not actions.steps:
        note("no actions: the block's activity in 15-minute steps")
        actions = rq.Actions((rq.Step(total, request.activity),))
    sized = []
    for step in actions.steps:
        if step.minutes > high:
            rest = step.minutes % high
            pieces = [high] * (step.minutes // high) + ([max(low, rest)] if rest else [])
            note(f"{step.description!r} lasting {step.minutes} min split into {len(pieces)} of at most {high}")
            sized += [replace(step, minutes=m) for m in pieces]
        elif step.minutes < low and not (step is actions.steps[-1] and sum(minutes) == total and step.minutes >= 1):
            note(f"{step.description!r} lasting {step.minutes} min lengthened to {low}")
            sized.append(replace(step, minutes=low))
        else:
            sized.append(step)
    steps, t = [], 0
    for step in sized:
        if t >= total:
            note(f"{len(sized) - len(steps)} actions past the block's end cut")
            break
        if t + step.minutes > total:
            step = replace(step, minutes=total - t)
            note(f"{step.description!r} shortened to {step.minutes} min to end with the block")
        steps.append(step)
        t += step.minutes
    return rq.Actions(tuple(steps))


def repair_reaction(request: rq.React, reaction: rq.Reaction, note: Callable[[str], None]) -> rq.Reaction:
    if reaction.action == "talk" and reaction.target not in {p[0] for p in request.people}:
        note(f"talk to {reaction.target!r}, who is not here to talk: carry on")
        return rq.Reaction("continue", None, reaction.reason)
    if reaction.action == "wait" and reaction.minutes < 1:
        note(f"a wait of {reaction.minutes} min: 5")
        return replace(reaction, minutes=5)
    return reaction


def repair_insights(request: rq.Insights, found: rq.InsightList, note: Callable[[str], None]) -> rq.InsightList:
    kept = tuple(i for i in found.insights if i.text.strip())
    if len(kept) < len(found.insights):
        note(f"{len(found.insights) - len(kept)} insights that say nothing dropped")
    return rq.InsightList(kept)
