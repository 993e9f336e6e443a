"""What an agent recalls for a prompt: the memories retrieval brought back, cleaned of what
tells a model nothing, each dated as seen from now.

Retrieval stays the paper's (its top k, and the access marks it leaves); this only shapes
the lists a request carries, after it. Out go object states ("sofa is idle", "fridge is in
use by Ann Lee"), the agent's own actions seen again ("Ann Lee is reading (using the desk)"
after "Ann Lee is reading") and all but one of its breakdowns of a block into actions ("Ann
Lee's plan until 10:00: ..."), texts already listed, and chat lines that are only greetings or
small talk ("Hi Bob! How is your day going?"): the original code keeps idle events out of
its prompts in the same spirit. What is left is dated (`timefmt.relative_moment`); what the
agent knew from the start (a seed memory of no date of its own) is "background".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from smallville.brain.requests import Recalled
from smallville.timefmt import relative_moment

BACKGROUND = "background"
CHAT = " said to "  # a chat line's memory: "Ann Lee said to Bob Ray: ..."
_ASIDE = re.compile(r" \([^)]*\)")  # "(using the desk)"
_WORDS = re.compile(r"[A-Za-z]+")
_SMALL_TALK = frozenset(
    """hi hello hey good morning afternoon evening night how is are was your you day going doing
    things been have pretty thanks thank for asking not bad at all busy as usual see around later soon bye goodbye
    talking to nice great fine well oh i didn t know that and too me take care it the same yes yeah sure ok okay
    so much very today s m glad meet meeting""".split()
)


def recall(sim, agent, query: str, k: int) -> Recalled:
    """The `k` memories `query` brings back (the paper's retrieval), cleaned and dated."""
    return dated(sim, cleaned(sim, agent, [h.memory for h in sim.retrieve(agent, query, k)]))


def dated(sim, memories: Iterable) -> Recalled:
    """Memories as requests carry them: (when, text)."""
    return tuple((when(sim, m), m.text) for m in memories)


def when(sim, memory) -> str:
    """When a memory came about, as seen from now ("today 09:15", "yesterday 18:30", "Mon 13
    Feb 10:02"), or "background" for a seed memory of the scenario's start."""
    if memory.kind == "seed" and memory.created <= 0:
        return BACKGROUND
    return relative_moment(sim.datetime_at(memory.created), sim.now_datetime())


def since(sim, t: float) -> str:
    """A simulated time as `when` dates a memory of then."""
    return relative_moment(sim.datetime_at(t), sim.now_datetime())


def cleaned(sim, agent, memories: list) -> list:
    """`memories` (best first) without object states, the agent's own actions seen again,
    its breakdowns of blocks but the first, texts already listed and lone greetings."""
    kept, seen = [], set()
    own, steps = agent.name + " is ", agent.name + "'s plan until "
    for m in memories:
        text = m.text
        key = steps if text.startswith(steps) else _ASIDE.sub("", text).lower() if text.startswith(own) else text
        if key in seen or is_object_state(sim, text) or (m.kind == "chat" and small_talk(text)):
            continue
        seen.add(key)
        kept.append(m)
    return kept


def is_object_state(sim, text: str) -> bool:
    """Whether a memory is what an object of the town was seen doing ("sofa is idle")."""
    thing, said, _ = text.partition(" is ")
    return bool(said) and thing in sim.object_names


def small_talk(text: str) -> bool:
    """Whether a chat line (its memory, "Ann said to Bob: ...") is only greetings and small
    talk: every word but names one of a few dozen."""
    line = text.split(CHAT, 1)[-1].partition(": ")[2] or text
    words = _WORDS.findall(line)
    said = [w.lower() for w in words if w.lower() in _SMALL_TALK or not w[0].isupper()]
    return 0 < len(words) <= 20 and all(w in _SMALL_TALK for w in said) and bool(said)


def noticed(sim, agent, texts: list[str]) -> list[str]:
    """What an agent just perceived, as a reaction is asked about it: object states left
    out but those of an object someone else is using (it may be worth waiting for)."""
    return [t for t in texts if not is_object_state(sim, t) or (" in use by " in t and not t.endswith(agent.name))]
