"""The people of a generated town: households, jobs, routines, ties and a few memories."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

FIRST = ("ada alan alice amara anton aria arjun astrid ben bianca boris carla chen chloe clara dario dev "
         "diana elena eli emil emma esther ezra farah felix fiona gabriel grace hana hugo ida igor imani "
         "ines iris ivan jack jade jonas julia kai kamala karim kofi lara leo lena liam lina luca lucia "
         "mads maya mei milan mira nadia nico nina noah nora olga omar oscar paula petra priya quinn rafael "
         "rena rosa ruby sami sara selim sofia sven tara teo theo una uma vera victor wanda wei yara yusuf "
         "zara zoe").split()
SURNAMES = ("abbott adler alvarez andersen baker banerjee bauer becker bell brennan castillo chang cho "
            "costa cruz dahl davies diaz dubois duarte eriksen evans farouk fischer fontaine garcia "
            "gomez hansen haddad hughes ito jensen kahn kato keller kim kowalski larsen lee lindqvist "
            "lopez mahler marsh mendes moreau murphy nakamura novak obi okafor olsen ortiz park patel "
            "perez petrov quinn reyes rossi ruiz sato schmidt silva singh sorensen suzuki tanaka thorne "
            "torres varga vogel wagner walsh weber wright yilmaz young zhang ziegler").split()
TRAITS = ("curious", "kind", "talkative", "shy", "patient", "cheerful", "thoughtful", "stubborn", "generous",
          "funny", "careful", "restless", "warm", "reserved", "ambitious", "easygoing")


@dataclass
class Person:
    id: str
    first: str
    last: str
    age: int
    role: str                       # worker, student, retired
    home: str
    job: str = ""                   # the arena they work in, "" for none
    job_title: str = ""             # what they do there: "serve customers"
    workplace: str = ""             # the workplace's sector
    study: str = ""                 # a student's library
    routine: list[tuple[int, str, str]] = field(default_factory=list)
    ties: dict[str, str] = field(default_factory=dict)
    memories: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.first.title()} {self.last.title()}"

    def task(self) -> str:
        """What this person does at work, in a few words."""
        return self.job_title or "work"


def name_people(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """`n` distinct (first, surname) pairs, in households that share a surname."""
    used: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        last = rng.choice(SURNAMES)
        size = min(n - len(out), rng.choice((1, 1, 2, 2, 2, 3, 3, 4)))
        firsts = [f for f in rng.sample(FIRST, len(FIRST)) if (f, last) not in used][:size]
        if len(firsts) < size:
            continue
        used.update((f, last) for f in firsts)
        out.extend((f, last) for f in firsts)
    return out


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def routine_for(p: Person, rng: random.Random, places: dict[str, list[str]]) -> list[tuple[int, str, str]]:
    """A typical day in (minutes since midnight, what, where), times jittered by a quarter hour."""
    j = lambda: 15 * rng.randint(-2, 2)                                      # noqa: E731
    wake = 6 * 60 + 30 + j()
    cafe, park = rng.choice(places["cafe"]), rng.choice(places["park"])
    pub, shop = rng.choice(places["pub"]), rng.choice(places["shop"])
    days = [(wake, "wake up, wash and get dressed", p.home),
            (wake + 30, "make breakfast at home", p.home)]
    if p.role == "worker":
        days += [(8 * 60 + 30 + j(), f"go to work and {p.task()}", p.job),
                 (12 * 60 + 30, *rng.choice((("have lunch at the cafe", cafe), ("have lunch at work", p.job)))),
                 (13 * 60 + 15, f"return to work and {p.task()}", p.job),
                 (17 * 60 + 30 + j(), *rng.choice((("go for a walk in the park", park),
                                                    ("meet friends at the pub", pub), ("do some shopping", shop),
                                                    ("potter about at home", p.home))))]
    elif p.role == "student":
        days += [(9 * 60 + j(), "attend classes at the college", p.job),
                 (12 * 60 + 30, "have lunch with classmates at the cafe", cafe),
                 (14 * 60 + j(), "study in the college library", p.study),
                 (18 * 60 + j(), "meet friends at the pub", pub)]
    else:
        days += [(9 * 60 + 30 + j(), "take a morning walk in the park", park),
                 (11 * 60 + j(), "do the shopping", shop),
                 (13 * 60, "read the paper over lunch at the cafe", cafe),
                 (15 * 60 + j(), "tend to things at home and call family", p.home),
                 (17 * 60 + j(), "chat with neighbours at the pub", pub)]
    days += [(19 * 60 + 30 + j(), "cook dinner and relax at home", p.home),
             (22 * 60 + 30 + j(), "go to bed and sleep", p.home)]
    return days


TASKS = {"cafe": "serve customers", "kitchen": "cook and bake", "pub": "pour drinks and serve",
            "store": "stock shelves and serve customers", "pharmacy": "serve customers at the pharmacy",
            "office": "work at a desk", "workshop": "build and repair things", "clinic": "see patients",
            "classroom": "teach classes", "park": "look after the park"}


def tie(people: dict[str, Person], a: str, b: str, view_ab: str, view_ba: str, cap: int = 8) -> None:
    """A two-sided relationship, unless either already has `cap` ties or they know each other."""
    pa, pb = people[a], people[b]
    if a == b or b in pa.ties or len(pa.ties) >= cap or len(pb.ties) >= cap:
        return
    pa.ties[b] = view_ab
    pb.ties[a] = view_ba
