"""Small English helpers for the offline brain: gerunds, names, shared facts."""

from __future__ import annotations

import re

_DOUBLE = {"sit", "run", "get", "put", "shop", "stop", "jog", "swim", "plan", "chat", "set", "hit", "nap", "dig", "skip"}
_IRREGULAR = {"be": "being", "see": "seeing", "lie": "lying", "die": "dying", "tie": "tying"}
_NAME = re.compile(r"\b[A-Z][a-z'’]+(?: [A-Z][a-z'’]+)+\b")
SHARE_MARK = "Did you hear? "
_FRAME = re.compile(r"^(?:.+? said to .+?: |.+? thinks this matters: )")


def gerund(verb: str) -> str:
    """`serve` -> `serving`, `sit` -> `sitting`, `study` -> `studying`."""
    word = verb.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ing") and len(word) > 4:
        return word
    if word in _DOUBLE:
        return word + word[-1] + "ing"
    if word.endswith("ie"):
        return word[:-2] + "ying"
    if word.endswith("e") and not word.endswith(("ee", "ye", "oe")) and len(word) > 2:
        return word[:-1] + "ing"
    return word + "ing"


def progressive(phrase: str) -> str:
    """An imperative routine phrase as an activity: `open the cafe, bake and serve customers`
    -> `opening the cafe, baking and serving customers`."""
    parts = re.split(r"(, and |, | and )", phrase.strip())
    for i in range(0, len(parts), 2):
        words = parts[i].split(" ", 1)
        if words[0].isalpha() and words[0].islower():
            words[0] = gerund(words[0])
        parts[i] = " ".join(words)
    return "".join(parts)


def names_in(text: str) -> list[str]:
    """Capitalised multi-word names (people and places) in a text."""
    return _NAME.findall(text)


def shared_fact(text: str) -> str:
    """The fact a memory carries, without the frames the offline brain puts around facts
    (`X said to Y: ... Did you hear? FACT`, `X thinks this matters: FACT`)."""
    while True:
        if SHARE_MARK in text:
            text = text.split(SHARE_MARK, 1)[1]
        stripped = _FRAME.sub("", text, count=1)
        if stripped == text:
            return text.strip()
        text = stripped


def first_name(name: str) -> str:
    return name.split(" ")[0]
