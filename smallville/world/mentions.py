"""Which of a town's place names a text mentions, in time linear in the text.

A memory tells an agent of every place whose name it holds (case aside, as a substring).
Testing each name against each memory costs names x memories: in a generated town of
1,000 residents that was most of a day's work. Here each name is filed under its first
few letters; one regular expression finds every position of a text where some name's
first letters begin (all are the same length, so at most one begins at a position), and
only the names filed there are compared. Memories repeat (what an agent sees is often what
it saw), so the last few thousand answers are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

ANCHOR = 3
"""Letters a name is filed under; a shorter name is tested on its own."""
KEPT = 4096
"""Texts whose answers are kept."""


class Mentions:
    """The names of `names` that a text contains, as `{n for n in names if n.lower() in
    text.lower()}` finds them."""

    def __init__(self, names: Iterable[str]) -> None:
        self._short: list[tuple[str, str]] = []
        self._by_anchor: dict[str, list[tuple[str, str]]] = {}
        for name in names:
            low = name.lower()
            if len(low) < ANCHOR:
                self._short.append((low, name))
            else:
                self._by_anchor.setdefault(low[:ANCHOR], []).append((low, name))
        anchors = "|".join(map(re.escape, sorted(self._by_anchor)))
        self._starts = re.compile(f"(?=({anchors}))") if anchors else None
        self.found_in = lru_cache(maxsize=KEPT)(self._found_in)

    def _found_in(self, low: str) -> frozenset[str]:
        """The names found in `low`, a lower-cased text."""
        found = {name for short, name in self._short if short in low}
        if self._starts is not None:
            by_anchor = self._by_anchor
            for match in self._starts.finditer(low):
                i = match.start()
                found.update(name for name_low, name in by_anchor[match.group(1)] if low.startswith(name_low, i))
        return frozenset(found)
