"""How a probe's news reached an agent: the chain of conversations from its source, read from
the run's `learned` events (the memory that made each agent know it) and the chat memories'
speakers, with, for each telling, whether the teller was shown the news by retrieval.

A telling is `recalled` when the request for the teller's line (its `say` event's `req`)
recalled a memory of the teller that holds the news (every `match` word of the probe), and
`fresh` when the news was in the prompt some other way (the teller's summary, the lines of
the conversation itself, the offline brain's own news); `unrecorded` in runs written before
recall was recorded.
"""

from __future__ import annotations

from smallville.errors import UsageError
from smallville.why.trail import Trail


def chain(trail: Trail, probe: str, words: tuple[str, ...], agent: str) -> list[dict]:
    """The hops by which `agent` came to know `probe`, from its source to `agent`: each names
    the agent, when it learned (log line, time), the memory, and, when told, who told it, in
    which conversation and how the teller had the news in mind. Empty: it never learned."""
    hops, seen = [], set()
    while agent is not None and agent not in seen and (agent, probe) in trail.learned:
        seen.add(agent)
        hop = step(trail, agent, trail.learned[agent, probe], words)
        hops.append(hop)
        agent = hop.get("from")
    return hops[::-1]


def step(trail: Trail, agent: str, line: int, words: tuple[str, ...]) -> dict:
    """One agent's learning of a probe (its `learned` event at `line`)."""
    e = trail[line]
    mid = e["data"]["memory"]
    memory = trail.memory(agent, mid) if mid is not None else None
    d = memory["data"] if memory else {}
    hop = {
        "agent": agent,
        "line": line,
        "t": e["t"],
        "time": e.get("time"),
        "memory": mid,
        "kind": d.get("kind"),
        "text": d.get("text"),
    }
    speaker = d.get("speaker")
    if d.get("kind") == "chat" and "speaker" not in d:
        hop["source"] = "untold"  # a line heard, in a log written before chat memories named their speaker
        return hop
    if d.get("kind") != "chat" or speaker in (None, agent) or (agent, mid) not in trail.memories:
        hop["source"] = d.get("kind") or "unknown"
        return hop
    mline = trail.memories[agent, mid]
    said = trail.said(speaker, agent, d["line"], mline)
    talk = trail.talk_of(speaker, agent, said or mline)
    hop.update(
        {
            "from": speaker,
            "said": trail[said].get("time") if said else None,
            "conversation": {"line": talk, "time": trail[talk].get("time")} if talk else None,
            **through(trail, speaker, said, words),
        }
    )
    return hop


def through(trail: Trail, teller: str, said: int | None, words: tuple[str, ...]) -> dict:
    """How the teller had the news in mind when it said the line at `said`: `via` recalled
    (with the `recalled` memory's id), fresh, or unrecorded."""
    req = trail[said]["data"].get("req") if said else None
    recall = trail.recall(teller, req)
    if recall is None:
        return {"via": "fresh" if req is not None else "unrecorded"}
    for _, hits in recall["data"]["queries"]:
        for mid, *_ in hits:
            memory = trail.memory(teller, mid) if mid >= 0 else None
            if memory and holds(memory["data"]["text"], words):
                return {"via": "recalled", "recalled": mid}
    return {"via": "fresh"}


def holds(text: str, words: tuple[str, ...]) -> bool:
    """Whether a memory's text holds a probe's news: every match word (as the engine decides)."""
    low = text.lower()
    return bool(words) and all(w in low for w in words)


def spread(trail: Trail, probe: str, words: tuple[str, ...]) -> dict:
    """Every agent's chain for `probe`, its depth (the most tellings in one chain; None when a
    chain holds a line whose teller the log does not name) and the share of tellings that came
    through a recalled memory."""
    learners = sorted({a for a, p in trail.learned if p == probe})
    chains = {a: chain(trail, probe, words, a) for a in learners}
    tellings = [h for a in learners for h in chains[a][-1:] if "from" in h]
    recorded = [h for h in tellings if h["via"] != "unrecorded"]
    return {
        "probe": probe,
        "chains": chains,
        "depth": None
        if any(h["source"] == "untold" for c in chains.values() for h in c if "from" not in h)
        else max((sum(1 for h in c if "from" in h) for c in chains.values()), default=0),
        "tellings": len(tellings),
        "recalled_share": round(sum(h["via"] == "recalled" for h in recorded) / len(recorded), 4) if recorded else None,
    }


def probe_words(scenario, probe: str) -> tuple[str, ...]:
    """The match words of the scenario's probe `probe` (UsageError: there is none)."""
    for p in scenario.probes:
        if p.name == probe:
            return tuple(w.lower() for w in p.match)
    names = ", ".join(p.name for p in scenario.probes) or "none"
    raise UsageError(f"no probe {probe!r} in the run's scenario; its probes: {names}")
