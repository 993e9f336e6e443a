"""The interview protocol as data: categories of question templates in a versioned YAML
file (`questions.yaml` ships; a researcher may pass their own), filled per agent from the
scenario and the time of the interview."""

from __future__ import annotations

import random
import string
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path

from smallville.errors import UsageError

FIELDS = ("name", "first_name", "person", "event", "tomorrow", "probe")
FACTS = ("person", "probe")


@dataclass(frozen=True)
class Item:
    """One question template of a category; `fact` marks a factual question."""

    category: str
    index: int
    ask: str
    fact: str | None = None

    @property
    def fields(self) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(self.ask) if name}


@dataclass(frozen=True)
class Question:
    """A question as put to one agent. `id` is the same for every agent and condition
    (`memory.2`, or `memory.2.party` for a probe's); `fact` is what it checks
    (`person:bob_ray`, `probe:party`) or None."""

    id: str
    category: str
    text: str
    fact: str | None = None


@dataclass(frozen=True)
class Protocol:
    name: str
    version: int
    items: tuple[Item, ...]
    tomorrow: str = "10:00"
    source: str = "smallville"

    def describe(self) -> dict:
        return {"name": self.name, "version": self.version, "source": self.source, "questions": len(self.items)}

    def questions_for(self, scenario, agent_id: str, at: datetime) -> list[Question]:
        """The protocol's questions for one agent of `scenario`, interviewed at `at`."""
        spec = scenario.agent(agent_id)
        values = {
            "name": spec.name,
            "first_name": spec.name.split()[0],
            "person": "",
            "event": "",
            "tomorrow": self._tomorrow(at),
        }
        person = known_person(scenario, agent_id)
        if person is not None:
            values["person"] = scenario.agent(person).name
        event = scenario_event(scenario)
        if event:
            values["event"] = event
        out = []
        for item in self.items:
            qid = f"{item.category}.{item.index}"
            if "probe" in item.fields:
                out += [
                    Question(
                        f"{qid}.{p.name}",
                        item.category,
                        item.ask.format(**values, probe=p.question),
                        f"probe:{p.name}" if item.fact else None,
                    )
                    for p in scenario.probes
                ]
                continue
            if any(not values.get(f) for f in item.fields):
                continue  # the scenario cannot fill it
            fact = f"person:{person}" if item.fact == "person" and person else None
            out.append(Question(qid, item.category, item.ask.format(**values), fact))
        return out

    def _tomorrow(self, at: datetime) -> str:
        day = at + timedelta(days=1)
        return f"{self.tomorrow} on {day.strftime('%A, %B')} {day.day}"


def known_person(scenario, agent_id: str) -> str | None:
    """Someone the agent knows from its agent file, chosen by a hash of its id (stable
    across runs and conditions); else another resident; None in a town of one."""
    spec = scenario.agent(agent_id)
    residents = {a.id for a in scenario.agents}
    known = sorted(p for p in spec.relationships if p in residents and p != agent_id)
    pool = known or sorted(residents - {agent_id})
    return random.Random(f"person:{agent_id}").choice(pool) if pool else None


def scenario_event(scenario) -> str:
    """The first scenario event that happens somewhere (not a thought), else any; "" if none."""
    events = sorted(scenario.events, key=lambda e: (e.agent is not None, e.at))
    return events[0].what if events else ""


def load_protocol(path: str | Path | None = None) -> Protocol:
    """The protocol in `path` (default: smallville's own), checked: a bad file is a
    `UsageError` naming the file and the question."""
    import yaml

    if path is None:
        text, source = resources.files("smallville.evaluate").joinpath("questions.yaml").read_text("utf-8"), None
    else:
        try:
            text, source = Path(path).read_text(encoding="utf-8"), str(path)
        except OSError as exc:
            raise UsageError(f"--questions {path}: {exc.strerror or exc}") from None
    where = source or "smallville's questions.yaml"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{where}: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("categories"), dict) or not data["categories"]:
        raise UsageError(f"{where}: a protocol is a mapping with `version` and `categories` (category -> questions)")
    if not isinstance(data.get("version"), int):
        raise UsageError(f"{where}: `version` must be a whole number (the protocol's version)")
    items = []
    for category, asks in data["categories"].items():
        if not isinstance(asks, list) or not asks:
            raise UsageError(f"{where}: categories.{category}: expected a list of questions")
        for i, entry in enumerate(asks, 1):
            items.append(_item(str(category), i, entry, where))
    return Protocol(
        str(data.get("name") or Path(where).stem),
        data["version"],
        tuple(items),
        str(data.get("tomorrow") or "10:00"),
        source or "smallville",
    )


def _item(category: str, index: int, entry, where: str) -> Item:
    at = f"{where}: categories.{category}[{index}]"
    if isinstance(entry, str):
        entry = {"ask": entry}
    if not isinstance(entry, dict) or not isinstance(entry.get("ask"), str) or not entry["ask"].strip():
        raise UsageError(f"{at}: a question is text, or a mapping with `ask:` (and optionally `fact:`)")
    item = Item(category, index, entry["ask"].strip(), entry.get("fact"))
    try:
        unknown = item.fields - set(FIELDS)
    except ValueError as exc:
        raise UsageError(f"{at}: {exc} in {item.ask!r}") from None
    if unknown:
        raise UsageError(f"{at}: unknown field {{{sorted(unknown)[0]}}} (known: {', '.join(FIELDS)})")
    if item.fact is not None and item.fact not in FACTS:
        raise UsageError(f"{at}: fact {item.fact!r}: use one of {', '.join(FACTS)}")
    if item.fact == "probe" and "probe" not in item.fields or item.fact == "person" and "person" not in item.fields:
        raise UsageError(f"{at}: a `fact: {item.fact}` question must name {{{item.fact}}}")
    return item
