"""What the event log says an agent knew at a time, and how an answer is checked against it
with no judge: the factual questions (does the agent know a probe's fact, does it know a
person) and the people an answer names that the agent never met."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

DENIAL = re.compile(
    r"\b(?:(?:do|did|does|have|has|can)(?:n't| not)|never|cannot|can't)\s+(?:\w+\s+)?"
    r"(?:know|remember|recall|heard?|met|seen)\b|\bno idea\b|\bnot sure\b|\bnot aware\b|"
    r"\bnothing about\b|\bno answer\b",
    re.I,
)


@dataclass
class Knowledge:
    """Per agent: the probes it knew and the residents it knew by the time asked."""

    probes: dict[str, set[str]] = field(default_factory=dict)  # agent -> probe names
    people: dict[str, set[str]] = field(default_factory=dict)  # agent -> resident ids

    def knew(self, agent: str, fact: str) -> bool:
        what, name = fact.split(":", 1)
        return name in (self.probes if what == "probe" else self.people).get(agent, set())


def knowledge_at(run, at: float) -> Knowledge:
    """What the run's event log (and, for a fork, its parent's before the fork) says each
    agent knew at `at` seconds: probes known at the start or `learned` by then; residents
    in its agent file, talked with, or named in one of its memories."""
    scenario = run.scenario
    out = Knowledge({a.id: set() for a in scenario.agents}, {a.id: set(a.relationships) for a in scenario.agents})
    for probe, known in (run.manifest.probes or {}).items():
        for agent in known.get("start", ()):
            out.probes.setdefault(agent, set()).add(probe)
    names = {a.id: _name_pattern(a.name, scenario) for a in scenario.agents}
    for event in events_until(run, at):
        agent, data = event.get("agent"), event.get("data") or {}
        if agent is None:
            continue
        if event["kind"] == "learned":
            out.probes.setdefault(agent, set()).add(data.get("probe"))
        elif event["kind"] == "talk_start" and data.get("with"):
            out.people.setdefault(agent, set()).add(data["with"])
        elif event["kind"] == "memory":
            text = data.get("text", "")
            out.people.setdefault(agent, set()).update(o for o, p in names.items() if o != agent and p.search(text))
    return out


def events_until(run, at: float):
    """The run's events up to `at`, its fork parent's before the fork first."""
    parent = run.parent() if run.fork else None
    if parent is not None:
        yield from events_until(parent, min(at, run.fork.t))
    path = run.path / "events.jsonl"
    if not path.exists():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                break  # a line torn by a crash ends the log
            if event["t"] > at:
                break
            yield event


def claims_to_know(answer: str, fact: str, scenario) -> bool:
    """Whether an answer claims the fact: it does not say it does not know, and for a probe
    it holds every one of the probe's words (the rule by which an agent knows a probe)."""
    if DENIAL.search(answer):
        return False
    what, name = fact.split(":", 1)
    if what == "probe":
        probe = next((p for p in scenario.probes if p.name == name), None)
        low = answer.lower()
        return probe is not None and all(word.lower() in low for word in probe.match)
    return bool(answer.strip())


def strangers(answer: str, agent: str, scenario, known: Knowledge) -> list[str]:
    """The residents an answer names (full name, or a first name no other resident has)
    whom the agent had never met, talked with or heard of: an embellishment any reader
    can check."""
    out = []
    for other in scenario.agents:
        if (
            other.id != agent
            and other.id not in known.people.get(agent, set())
            and _name_pattern(other.name, scenario).search(answer)
        ):
            out.append(other.name)
    return out


def _name_pattern(name: str, scenario=None) -> re.Pattern:
    """A resident's full name; or its first name too, when no other resident shares it."""
    first = name.split()[0]
    shared = scenario is not None and sum(a.name.split()[0] == first for a in scenario.agents) > 1
    forms = [re.escape(name)] + ([] if shared or first == name else [re.escape(first)])
    return re.compile(r"\b(?:" + "|".join(forms) + r")\b")
