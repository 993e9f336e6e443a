"""The residents of a generated town: who each is, their typical day, and their ties."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

TRAITS = (
    "curious",
    "kind",
    "talkative",
    "shy",
    "patient",
    "cheerful",
    "thoughtful",
    "stubborn",
    "generous",
    "funny",
    "careful",
    "restless",
    "warm",
    "reserved",
    "ambitious",
    "easygoing",
)


@dataclass
class Person:
    id: str
    first: str
    last: str
    age: int
    role: str  # worker, student, retired
    home: str
    job: str = ""  # the arena they work in, "" for none
    job_title: str = ""  # what they do there: "serve customers"
    workplace: str = ""  # the workplace's sector
    study: str = ""  # a student's library
    routine: list[tuple[int, str, str]] = field(default_factory=list)
    ties: dict[str, str] = field(default_factory=dict)
    memories: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.first.title()} {self.last.title()}"

    def task(self) -> str:
        """What this person does at work, in a few words."""
        return self.job_title or "work"


def hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def routine_for(p: Person, rng: random.Random, places: dict[str, list[str]]) -> list[tuple[int, str, str]]:
    """A typical day in (minutes since midnight, what, where), times jittered by a quarter hour."""

    def j() -> int:
        return 15 * rng.randint(-2, 2)

    wake = 6 * 60 + 30 + j()
    cafe, park = rng.choice(places["cafe"]), rng.choice(places["park"])
    pub, shop = rng.choice(places["pub"]), rng.choice(places["shop"])
    days = [(wake, "wake up, wash and get dressed", p.home), (wake + 30, "make breakfast at home", p.home)]
    if p.role == "worker":
        days += [
            (8 * 60 + 30 + j(), f"go to work and {p.task()}", p.job),
            (12 * 60 + 30, *rng.choice((("have lunch at the cafe", cafe), ("have lunch at work", p.job)))),
            (13 * 60 + 15, f"return to work and {p.task()}", p.job),
            (
                17 * 60 + 30 + j(),
                *rng.choice(
                    (
                        ("go for a walk in the park", park),
                        ("meet friends at the pub", pub),
                        ("do some shopping", shop),
                        ("potter about at home", p.home),
                    )
                ),
            ),
        ]
    elif p.role == "student":
        days += [
            (9 * 60 + j(), "attend classes at the college", p.job),
            (12 * 60 + 30, "have lunch with classmates at the cafe", cafe),
            (14 * 60 + j(), "study in the college library", p.study),
            (18 * 60 + j(), "meet friends at the pub", pub),
        ]
    else:
        days += [
            (9 * 60 + 30 + j(), "take a morning walk in the park", park),
            (11 * 60 + j(), "do the shopping", shop),
            (13 * 60, "read the paper over lunch at the cafe", cafe),
            (15 * 60 + j(), "tend to things at home and call family", p.home),
            (17 * 60 + j(), "chat with neighbours at the pub", pub),
        ]
    days += [
        (19 * 60 + 30 + j(), "cook dinner and relax at home", p.home),
        (22 * 60 + 30 + j(), "go to bed and sleep", p.home),
    ]
    return days


def tie(people: dict[str, Person], a: str, b: str, view_ab: str, view_ba: str, cap: int = 8) -> None:
    """A two-sided relationship, unless either already has `cap` ties or they know each other."""
    pa, pb = people[a], people[b]
    if a == b or b in pa.ties or len(pa.ties) >= cap or len(pb.ties) >= cap:
        return
    pa.ties[b] = view_ab
    pb.ties[a] = view_ba
