"""The names of a generated town's residents: households that share a surname, every name
distinct, readable at any size.

The 91 first names and 79 surnames give 7,189 names. A household takes a surname drawn at
random that still has first names free for all its members (drawing again otherwise), as
towns always have, so every town of up to 7,189 residents keeps its names. Once every
surname's first names are all taken, a new household becomes a branch of the family it
draws: a double-barrelled surname ("Abbott-Adler"), each surname with 78 branches of 91
first names, so names never repeat and read like names up to about 568,000 residents.
"""

from __future__ import annotations

import random

from smallville.errors import TownTooLarge

FIRST = (
    "ada alan alice amara anton aria arjun astrid ben bianca boris carla chen chloe clara dario dev "
    "diana elena eli emil emma esther ezra farah felix fiona gabriel grace hana hugo ida igor imani "
    "ines iris ivan jack jade jonas julia kai kamala karim kofi lara leo lena liam lina luca lucia "
    "mads maya mei milan mira nadia nico nina noah nora olga omar oscar paula petra priya quinn rafael "
    "rena rosa ruby sami sara selim sofia sven tara teo theo una uma vera victor wanda wei yara yusuf "
    "zara zoe"
).split()
SURNAMES = (
    "abbott adler alvarez andersen baker banerjee bauer becker bell brennan castillo chang cho "
    "costa cruz dahl davies diaz dubois duarte eriksen evans farouk fischer fontaine garcia "
    "gomez hansen haddad hughes ito jensen kahn kato keller kim kowalski larsen lee lindqvist "
    "lopez mahler marsh mendes moreau murphy nakamura novak obi okafor olsen ortiz park patel "
    "perez petrov quinn reyes rossi ruiz sato schmidt silva singh sorensen suzuki tanaka thorne "
    "torres varga vogel wagner walsh weber wright yilmaz young zhang ziegler"
).split()
SIZES = (1, 1, 2, 2, 2, 3, 3, 4)  # people in a household, drawn


def agent_id(first: str, last: str) -> str:
    """The lower_snake_case id of a resident: `ada_abbott`, `ada_abbott_adler` for Ada Abbott-Adler."""
    return f"{first}_{last.replace('-', '_')}"


def name_people(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """`n` distinct (first, surname) pairs, in households that share a surname (lower case)."""
    families = Families()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        last = rng.choice(SURNAMES)
        size = min(n - len(out), rng.choice(SIZES))
        order = rng.sample(FIRST, len(FIRST))
        if families.free(last) < size:
            if families.free_surnames:
                continue
            last = families.branch(last, size, len(out))
        firsts = families.take(last, order, size)
        out.extend((first, last) for first in firsts)
    return out


class Families:
    """The first names taken in each family, and the branch each surname's new households join."""

    def __init__(self) -> None:
        self.taken: dict[str, set[str]] = {}
        self.free_surnames = len(FIRST) * len(SURNAMES)  # names left without branching
        self.branches = {last: 0 for last in SURNAMES}  # the branch being filled, by surname

    def free(self, last: str) -> int:
        """How many first names the family `last` has not used yet."""
        return len(FIRST) - len(self.taken.get(last, ()))

    def take(self, last: str, order: list[str], size: int) -> list[str]:
        """The first `size` names of `order` free in the family `last`, now taken."""
        taken = self.taken.setdefault(last, set())
        firsts = [first for first in order if first not in taken][:size]
        taken.update(firsts)
        if "-" not in last:
            self.free_surnames -= size
        return firsts

    def branch(self, last: str, size: int, residents: int) -> str:
        """The first branch of `last` ("abbott-adler", "abbott-alvarez", ...) with `size` names free."""
        i = SURNAMES.index(last)
        partners = SURNAMES[i + 1 :] + SURNAMES[:i]
        k = self.branches[last]
        while k < len(partners) and self.free(f"{last}-{partners[k]}") < size:
            k += 1
        if k == len(partners):
            raise TownTooLarge(
                f"names ran out after {residents:,} residents: the {last.title()} family and its "
                f"{len(partners)} branches have used all {len(FIRST)} first names (a town has "
                f"names for about {len(FIRST) * len(SURNAMES) ** 2:,} residents)"
            )
        self.branches[last] = k
        return f"{last}-{partners[k]}"
