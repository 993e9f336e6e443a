"""Small English helpers for the offline brain: gerunds, names, shared facts."""

from __future__ import annotations

import re

from smallville.brain.voice import third_person

_IRREGULAR = {"be": "being", "see": "seeing", "lie": "lying", "die": "dying", "tie": "tying"}
_NAME = re.compile(r"\b[A-Z][a-z'’]+(?: [A-Z][a-z'’]+)+\b")
SHARE_MARK = "Did you hear? "  # before news about others
OWN_MARK = "Guess what? "  # before one's own news, told in the first person
MEMO_MARK = "I should keep in mind: "  # before what a memo keeps
_FRAME = re.compile(r"^(?:.+? said to .+?: |.+? thinks this matters: |I should keep in mind: )")
_SAID = re.compile(r"([A-Z][\w'’]*(?: [A-Z][\w'’]*)*) said to ")


def gerund(verb: str) -> str:
    """`serve` -> `serving`, `sit` -> `sitting`, `study` -> `studying`."""
    word = verb.lower()
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if word.endswith("ing") and len(word) > 4:
        return word
    if _short_closed(word):
        return word + word[-1] + "ing"
    if word.endswith("ie"):
        return word[:-2] + "ying"
    if word.endswith("e") and not word.endswith(("ee", "ye", "oe")) and len(word) > 2:
        return word[:-1] + "ing"
    return word + "ing"


def _short_closed(word: str) -> bool:
    """One vowel followed by one final consonant (`grab`, `sit`, `plan`): the consonant doubles."""
    vowels = [i for i, ch in enumerate(word) if ch in "aeiou"]
    return len(vowels) == 1 and vowels[0] == len(word) - 2 and word[-1] not in "aeiouwxy" and len(word) >= 3


_NOT_VERBS = {
    "a",
    "an",
    "the",
    "some",
    "his",
    "her",
    "their",
    "my",
    "your",
    "our",
    "its",
    "then",
    "maybe",
    "coffee",
    "tea",
    "lunch",
    "dinner",
    "breakfast",
    "friends",
    "back",
}


def progressive(phrase: str) -> str:
    """An imperative routine phrase as an activity: `open the cafe, bake and serve customers`
    -> `opening the cafe, baking and serving customers`; `sketch people, ducks and trees` ->
    `sketching people, ducks and trees`; `keep working` -> `still working`."""
    parts = re.split(r"(, and |, | and )", phrase.strip())
    for i in range(0, len(parts), 2):
        words = parts[i].split(" ", 1)
        if words[0] == "keep" and len(words) > 1 and words[1].split(" ")[0].endswith("ing"):
            words[0] = "still"  # "keep working on it" -> "still working on it"
        elif i and words[0].endswith("s") and not words[0].endswith("ss"):
            pass  # "photograph people and trees": a noun, not a verb
        elif words[0].isalpha() and words[0].islower() and words[0] not in _NOT_VERBS:
            words[0] = gerund(words[0])
        parts[i] = " ".join(words)
    return "".join(parts)


# Words that open a sentence or a chat line capitalised without being part of a name
# ("Hi Maria!", "Thanks Klaus", "Did you hear?").
_OPENERS = frozenset(
    """Hi Hello Hey Oh Ah Well Thanks Thank Good Great Nice Did Guess Yes Yeah No Sure Dear See
    So And But Then Sorry Welcome Morning Evening Bye Goodbye Okay Wow Congratulations Have How What Who Where When
    Why Are Is Do Does Can Will Would Let Please Look Listen Say Tell Hope Happy Poor Lucky Oops Yay""".split()
)


def names_in(text: str) -> list[str]:
    """Capitalised multi-word names (people and places) in a text; a greeting or another
    sentence opener before a name is not part of it ("Hi Maria Lopez" -> "Maria Lopez",
    "Hi Maria" -> nothing)."""
    names = []
    for match in _NAME.findall(text):
        words = match.split(" ")
        while words and words[0] in _OPENERS:
            words = words[1:]
        if len(words) > 1:
            names.append(" ".join(words))
    return names


def shared_fact(text: str) -> str:
    """The fact a memory carries, without the frames the offline brain puts around facts
    (`X said to Y: ... Did you hear? FACT`, `X thinks this matters: FACT`), in the third
    person (`X said to Y: Guess what? I'm ...`, X's own news, carries `X is ...`)."""
    speaker, own = "", False
    while True:
        for mark in (SHARE_MARK, OWN_MARK):
            if mark in text:
                before, text = text.split(mark, 1)
                said = _SAID.findall(before)
                speaker, own = (said[-1] if said else speaker), mark == OWN_MARK
        said = _SAID.match(text)
        stripped = _FRAME.sub("", text, count=1)
        if stripped == text:
            return third_person(text.strip(), speaker) if own else text.strip()
        speaker = said.group(1) if said else speaker
        text = stripped


def first_name(name: str) -> str:
    return name.split(" ")[0]


_SLEEP = re.compile(r"\b(?:sleep\w*|asleep|nap|napping|go(?:es|ing)? to bed|bed ?time)\b", re.I)


def mentions_sleep(activity: str) -> bool:
    """Whether an activity's words say it is sleep ("sleeping", "going to bed", "a nap"): for
    plans that do not say so themselves (the routine, plans of older versions)."""
    return bool(_SLEEP.search(activity))


def plain(text: str) -> str:
    """A text as compared for copying: lower case, its words only."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))
