"""Safe defaults: what each request kind gets when no valid answer came (a model failed, or
the runaway guard refused to ask). Each is named in its kind's declaration (`kinds.py`)."""

from __future__ import annotations

from smallville.brain import requests as rq
from smallville.brain.text import mentions_sleep, progressive


def unrated(request: rq.RateImportance) -> rq.Importance:
    """Importance 5 for every memory."""
    return rq.Importance((5,) * len(request.texts))


def untagged(request: rq.TagMemories) -> rq.Tag:
    """The safe tag of a memory: personal and neutral (I = 1.0 with seed 003's tables, so the
    memory may be kept like any notable one), or the first names offered if those are not."""
    return rq.Tag(
        "personal" if "personal" in request.sources else request.sources[0],
        "neutral" if "neutral" in request.emotions else request.emotions[0],
    )


def untagged_all(request: rq.TagMemories) -> rq.Tags:
    return rq.Tags((untagged(request),) * len(request.texts))


def persona_only(request: rq.Summarize) -> rq.Summary:
    """The fixed persona, with no model-written parts."""
    return rq.Summary(request.persona, "", "")


def plain_notes(request: rq.AfterTalk) -> rq.TalkNotes:
    """A plain note of the talk, the view unchanged."""
    return rq.TalkNotes(f"{request.name} talked with {request.other_name}", "", "", request.view)


def routine_plan(request: rq.PlanDay) -> rq.DayPlan:
    """The persona's routine as it stands, one block per entry, until the next wake-up."""
    routine = sorted(request.routine) or [(7 * 60, "wake up and get ready", ""), (23 * 60, "go to bed and sleep", "")]
    blocks = []
    for i, (start, what, where) in enumerate(routine):
        end = routine[i + 1][0] if i + 1 < len(routine) else routine[0][0] + 24 * 60
        if end > start:
            blocks.append(rq.Block(start, end, progressive(what), where, mentions_sleep(what)))
    return rq.DayPlan(tuple(blocks))


def block_as_is(request: rq.Decompose) -> rq.Actions:
    """The block's activity in 15-minute actions."""
    total = max(1, request.end - request.start)
    return rq.Actions(tuple(rq.Step(min(15, total - t), request.activity) for t in range(0, total, 15)))


def carry_on(request: rq.React) -> rq.Reaction:
    return rq.Reaction("continue")


def goodbye(request: rq.Speak) -> rq.Utterance:
    """End the conversation."""
    return rq.Utterance("Sorry, I have to go now.", end=True)


def no_questions(request: rq.ReflectQuestions) -> rq.Questions:
    return rq.Questions(())


def no_insights(request: rq.Insights) -> rq.InsightList:
    return rq.InsightList(())


def no_reply(request: rq.Interview) -> rq.Reply:
    return rq.Reply("(no answer: the model did not respond)")


def no_verdict(request: rq.Judge) -> rq.Verdict:
    """No ranking: the comparison counts for nobody."""
    return rq.Verdict(())
