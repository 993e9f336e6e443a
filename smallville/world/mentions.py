"""Which of a town's place names a text mentions, in time linear in the text.

A memory tells an agent of every place whose name it holds (case aside, as a substring).
Testing each name against each memory costs names x memories: in a generated town of
1,000 residents that was most of a day's work. Here each name is filed under its first
few letters, so a text is read once and only the names that begin at some position of it
are compared there.
"""

from __future__ import annotations

ANCHOR = 3
"""Letters a name is filed under; a shorter name is tested on its own."""


class Mentions:
    """The names of `names` that a text contains, as `{n for n in names if n.lower() in
    text.lower()}` finds them."""

    def __init__(self, names) -> None:
        self._short: list[tuple[str, str]] = []
        self._by_anchor: dict[str, list[tuple[str, str]]] = {}
        for name in names:
            low = name.lower()
            if len(low) < ANCHOR:
                self._short.append((low, name))
            else:
                self._by_anchor.setdefault(low[:ANCHOR], []).append((low, name))

    def found_in(self, low: str) -> set[str]:
        """The names found in `low`, a lower-cased text."""
        found = {name for short, name in self._short if short in low}
        by_anchor = self._by_anchor
        for i in range(len(low) - ANCHOR + 1):
            candidates = by_anchor.get(low[i:i + ANCHOR])
            if candidates:
                found.update(name for name_low, name in candidates if low.startswith(name_low, i))
        return found
