"""A run as a plain, readable timeline: one line per thing that happened."""

from __future__ import annotations

from collections.abc import Iterator

from smallville import events
from smallville.opening import count
from smallville.replay.record import RunRecord

QUIET_KINDS = {events.OBJECT, events.RELATIONSHIP, events.RECALL}  # shown with --all only
QUIET_MEMORIES = {"observation", "chat", "plan", "seed"}


def describe(event: dict, names: dict[str, str], was: str | None = None) -> str:
    """One line of text for an event; `was`: the area the agent was in before it."""
    d, kind = event["data"], event["kind"]
    who = names.get(event["agent"], event["agent"] or "")
    if kind == events.PLAN:
        broad, last = [], None
        for start, _, activity, _ in d["blocks"]:
            if activity != last:
                broad.append(f"{start} {activity}")
                last = activity
        return f"{who} plans {d['date']}: " + "; ".join(broad)
    if kind == events.ACTION:
        return f"{who} is {d['action']} in {d['area']} until {d['until']}"
    if kind == events.MOVE:
        verb = "moves within" if d["area"] == was else "walks to"
        return f"{who} {verb} {d['area']} ({count(d['tiles'], 'tile')}, arrives {d['arrive']})"
    if kind == events.SPAWN:
        return f"{who} starts in {d['area']}"
    if kind == events.SAY:
        return f"{who} to {names.get(d['to'], d['to'])}: {d['text']}"
    if kind == events.TALK_START:
        return f"{who} starts talking with {names.get(d['with'], d['with'])} in {d['area']}"
    if kind == events.TALK_END:
        return f"{who} and {names.get(d['with'], d['with'])} part after {count(d['lines'], 'line')}"
    if kind == events.REPLAN:
        return f"{who} re-plans: {d['reason']}"
    if kind == events.REFLECT:
        return f"{who} reflects: " + " ".join(d["questions"])
    if kind == events.MEMORY:
        if d["kind"] in ("reflection", "thought"):
            return f"{who} {'concludes' if d['kind'] == 'reflection' else 'thinks'}: {d['text']}"
        return f"{who} remembers ({d['kind']}, importance {d['importance']}): {d['text']}"
    if kind == events.SLEEP:
        return f"{who} goes to sleep until {d['until']}"
    if kind == events.WAKE:
        return f"{who} wakes up"
    if kind == events.EVENT:
        if events.get(event, "whisper"):
            return f"{who} has a thought: {d['what']}"
        return f"at {d['where']}: {d['what']}"
    if kind == events.LEARNED:
        return f"{who} now knows the {d['probe']!r} news"
    if kind == events.RELATIONSHIP:
        return f"{who} has talked with {names.get(d['with'], d['with'])} {count(d['talks'], 'time')}"
    if kind == events.RECALL:
        recalled = ", ".join(f"#{hit[0]}" for _, hits in d["queries"] for hit in hits)
        return f"{who} recalls for {d['request']} (request {d['req']}): {recalled or 'nothing'}"
    if kind == events.OBJECT:
        return f"{d['object']} ({d['area']}) is {d['state']}"
    if kind == events.BRAIN_FALLBACK:
        return f"the model failed {who}'s {d['kind']} request ({d['error']}); the safe default was used"
    if kind == events.BRAIN_REFUSED:
        return f"{who}'s {d['kind']} request was not sent: over {d['ceiling']} requests this simulated hour"
    return f"{who} {kind}: " + ", ".join(f"{k} {v}" for k, v in d.items())


def timeline(
    run: RunRecord, agent: str | None = None, since: float = 0.0, until: float | None = None, everything: bool = False
) -> Iterator[str]:
    """Lines `YYYY-MM-DD HH:MM  text` for the run's events, optionally for one agent's eyes only.
    A walk within the room the agent is in shows with `everything` only."""
    names = run.agents
    areas: dict[str, str] = {}  # where each agent is, from its spawn and moves
    for event in run.events:
        was = areas.get(event["agent"])
        if event["kind"] in (events.SPAWN, events.MOVE):
            areas[event["agent"]] = event["data"]["area"]
        if event["t"] < since or (until is not None and event["t"] > until):
            continue
        if event["kind"] == events.MOVE and event["data"]["area"] == was and not everything:
            continue
        if (
            agent
            and agent not in (event["agent"], event["data"].get("to"), event["data"].get("with"))
            and agent not in event["data"].get("present", ())
        ):
            continue
        if event["kind"] in QUIET_KINDS and not everything:
            continue
        if event["kind"] == events.MEMORY and not everything and event["data"]["kind"] in QUIET_MEMORIES:
            continue
        yield f"{event['time'][:16]}  {describe(event, names, was)}"
