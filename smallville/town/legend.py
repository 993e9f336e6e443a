"""The legend characters of a generated map: one per room, so their supply bounds a town's size.

ASCII letters and digits come first, then Latin, Greek and Cyrillic letters and CJK ideographs,
as generated towns have always used them, so a town keeps its map. After those come the other
letters of Unicode's Basic Multilingual Plane that are written left to right and that
normalisation leaves alone, as Unicode 3.2 classed them (`unicodedata.ucd_3_2_0`, the same in
every Python), so the same town is drawn under every Python version. Characters beyond that
plane would take two places in the map rows a browser reads, so none are used.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator
from itertools import islice

from smallville.errors import TownTooLarge

ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
FIRST_RANGES = ((0xC0, 0x24F), (0x391, 0x3C9), (0x400, 0x45F), (0x4E00, 0x9FA5))
LETTERS = ("Lu", "Ll", "Lo")
JAMO = range(0x1100, 0x1200)  # conjoining: two side by side would normalise into one syllable


def legend_chars(rooms: int, residents: int) -> list[str]:
    """`rooms` distinct one-character legend keys, or TownTooLarge naming the limit."""
    chars = list(islice(_supply(), rooms))
    if len(chars) < rooms:
        raise TownTooLarge(
            f"a town of {residents:,} residents needs at least {rooms:,} rooms on its map, each "
            f"with its own legend character, and only {len(chars):,} characters can serve"
        )
    return chars


def _supply() -> Iterator[str]:
    """Every usable legend character, in the order rooms take them."""
    yield from ASCII
    for lo, hi in FIRST_RANGES:
        for code in range(lo, hi + 1):
            ch = chr(code)
            if unicodedata.category(ch) in LETTERS and ch.isprintable():
                yield ch
    first = [range(lo, hi + 1) for lo, hi in FIRST_RANGES]
    for code in range(0x80, 0x10000):
        if not any(code in block for block in first) and _plain_letter(chr(code)):
            yield chr(code)


def _plain_letter(ch: str) -> bool:
    """A letter that stands alone, reads left to right and is its own normal form (Unicode 3.2)."""
    ucd = unicodedata.ucd_3_2_0
    return (
        ucd.category(ch) in LETTERS
        and ucd.bidirectional(ch) == "L"
        and ord(ch) not in JAMO
        and ucd.normalize("NFKC", ch) == ch
    )
