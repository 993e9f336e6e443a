"""Grammatical person for the offline brain: a fact about the speaker said by them, in the
first person ("Sam and his neighbour Adam Smith argue ..." -> "My neighbour Adam Smith and I
argue ..."), and such a line taken back as a fact about them.

Rules, not a parser. Only a fact's first clause is said, so the pronouns of a later clause
(", and she wants to ...") are never guessed at. Within it, "he", "his", "her" ... are the
speaker's when the speaker is the last person named before them. The brain knows nobody's
pronouns, so a line taken back says "their" where the speaker said "my"; said again by the
speaker, that "they" and "their" are "I" and "my" once more.
"""

from __future__ import annotations

import re

# Where a fact's first clause ends: a new subject or a second verb after "and"/"but"
# ("..., and she wants", "... and hopes to", but not "flowers and pastries"), or a
# subordinate clause after a comma.
_CLAUSE_END = re.compile(
    r",? (?:and|but) (?=(?:he|she|they|we|it|I|has|have|is|are|was|were|had|does|did|will|would|can|could|"
    r"still|never|often|also|sometimes|usually|always|barely|then|now|so)\b|(?P<verb>[a-z]+s)\b)"
    r"|, (?:where|which|who|because|so|while|although|though|since) "
)
# Common verbs, so that "and reads" ends a clause where "and pastries" does not.
_VERBS = frozenset(
    """hope like love enjoy keep read get find want try go take make see spend say think know need
    wish help write work live play feel seem look plan start run teach study walk visit tell give come leave bring
    buy sell call meet ask use show stay sit stand talk cook paint sing practise practice win lose owe own miss
    worry wonder believe care hate prefer mean expect learn remember forget spend sleep wake""".split()
)
_ADVERBS = frozenset(
    "still never often always sometimes usually also just really barely rarely already now only even".split()
)
_MODALS = frozenset("can could will would shall should may might must used".split())
_PAST = frozenset(
    """took saw had met made told went got gave came left found thought bought brought wrote said
    knew heard lost won ran sat spoke felt kept lent began did became sent spent taught caught fought held built
    broke chose drove ate fell forgot grew hung hid let put set shut quit rode rose sang sold shook slept stood
    stole swam threw understood woke wore was were""".split()
)
# A capitalised word that names no person: a place's last word, a day, a month.
_NOT_PEOPLE = frozenset(
    """Cafe Park College Pub Store Market Pharmacy Library Hall House Street Road Avenue
    School Bar Supply Shop Apartment Apartments Dorm Town City Ville Day Monday Tuesday Wednesday Thursday Friday
    Saturday Sunday The A An January February March April May June July August September October November
    December""".split()
)
_PUNCT = '.,;:!?"”)'
_MINE = {"he": "I", "she": "I", "him": "me", "his": "my", "himself": "myself", "herself": "myself", "hers": "mine"}
_OURS = {"they": "we", "them": "us", "their": "our", "theirs": "ours", "themselves": "ourselves"}
_THEIRS = {v: k for k, v in _OURS.items()}
# "they" for the speaker, as `third_person` says it ("them" is left: it is as often someone else).
_SINGULAR = {"they": "I", "their": "my", "theirs": "mine", "themselves": "myself"}
_HER_OBJECT = frozenset("a an the to at in on for with from about of by and or but that this".split())


def first_person(fact: str, name: str) -> str | None:
    """`name`'s fact said by them: its first clause in the first person (`Isa Roy is planning
    a party, and she ...` -> `I'm planning a party.`), the whole fact if only a later clause
    names them; None when it does not name them."""
    words = first_clause(fact).split(" ")
    if not _mentions(words, name):
        words = fact.split(" ")
        if not _mentions(words, name):
            return None
    out: list[str] = []
    i, last, plural = 0, "", False  # who was named last ("me" or "other"); "we" includes me
    while i < len(words):
        core, tail = _split(words[i])
        low = core.lower()
        span = _mention_at(words, i, name)
        if (
            span
            and not span[1]
            and span[0] < len(words)
            and words[span[0]] == "and"
            and (i == 0 or _capitalised(words, span[0] + 1))
        ):
            start = i
            other, i = _partner(words, span[0] + 1)  # "Sam and his friend Ann" -> "My friend Ann and I"
            other_core, other_tail = _split(other[-1])
            out += [*other[:-1], other_core, "and", ("I" if start == 0 else "me") + other_tail]
            if out[0] != "My" and out[0] == "my":
                out[0] = "My"
            last, plural = "me", True
        elif span:
            subject = out[-1:] == ["and"] and all(_capitalised(words, k) for k in range(i - 1))  # "Ann and NAME"
            i, last, tail = span[0], "me", _split(words[span[0] - 1])[1]
            if span[1]:
                out.append(("My" if not out else "my") + tail)
            elif subject:
                out.append("I" + tail)
                plural = True
            elif not out or _verb_follows(words, i):
                out.append("I" + tail)
                i = _agree(words, i, out)
            else:
                out.append("me" + tail)
        elif last == "me" and (low in _MINE or low == "her" or (not plural and low in _SINGULAR)):
            out.append((_MINE.get(low) or _SINGULAR.get(low) or ("me" if _her_is_object(words, i) else "my")) + tail)
            i += 1
            if out[-1] == "I":
                i = _agree(words, i, out)
        else:
            if _person_at(words, i):
                last = "other"
            out.append(_OURS[low] + tail if plural and low in _OURS else words[i])
            i += 1
    return " ".join(out).rstrip(" .") + "."


def third_person(line: str, speaker: str) -> str:
    """A line the `speaker` said in the first person, as a fact about them (the inverse of
    `first_person`): `My friend Ann and I argue.` -> `Sam Moore and their friend Ann argue.`"""
    words = line.split(" ")
    cores = [_split(w)[0] for w in words]
    if not speaker or not set(cores) & {"I", "I'm", "I've", "I'll", "I'd", "me", "my", "My"}:
        return line
    out: list[str] = []
    i, named, plural = 0, False, False
    if "I" in cores[2:8] and words[cores.index("I") - 1] == "and":  # "My friend Ann and I argue"
        i = cores.index("I")
        out = [speaker, "and"] + ["their" if c in ("My", "my") else w for c, w in zip(cores, words[: i - 1])]
        out[-1] += _split(words[i])[1]
        i, named, plural = i + 1, True, True
    while i < len(words):
        core, tail = _split(words[i])
        if core in ("I", "I'm", "I've", "I'll", "I'd"):
            verb = {"I'm": "is", "I've": "has", "I'll": "will", "I'd": "would"}.get(core)
            if named:
                out += ["they" + tail] if not verb else ["they", _plural(_first(verb)) + tail]
                i = i + 1 if verb else _agree(words, i + 1, out, plural=True)
            else:
                out += [speaker + tail] if not verb else [speaker, verb + tail]
                i = i + 1 if verb else _agree(words, i + 1, out, third=True)
            named = True
            continue
        if core in ("me", "my", "My", "mine", "myself"):
            word = {"me": "them" if named else speaker, "mine": "theirs", "myself": "themselves"}.get(
                core, "their" if named else f"{speaker}'s"
            )
            out.append(word + tail)
            named = named or core in ("me", "my", "My")
            plural = plural or (core == "me" and i > 0 and words[i - 1] == "and")
        elif plural and core.lower() in _THEIRS:
            out.append(_THEIRS[core.lower()] + tail)
        else:
            out.append(words[i])
        i += 1
    return " ".join(out)


def first_clause(fact: str) -> str:
    """A fact up to where a second clause or predicate begins (see `_CLAUSE_END`)."""
    for end in _CLAUSE_END.finditer(fact, 1):
        if not end.group("verb") or _first(end.group("verb")) in _VERBS:
            return fact[: end.start()]
    return fact


def names(fact: str, name: str) -> bool:
    """Whether a fact names the person `name` (the whole name, or the first name alone)."""
    return _mentions(fact.split(" "), name)


# ---- words --------------------------------------------------------------------------


def _split(word: str) -> tuple[str, str]:
    """A word and the punctuation after it: `week.` -> (`week`, `.`)."""
    core = word.rstrip(_PUNCT)
    return core, word[len(core) :]


def _mentions(words: list[str], name: str) -> bool:
    return any(_mention_at(words, i, name) for i in range(len(words)))


def _mention_at(words: list[str], i: int, name: str) -> tuple[int, bool] | None:
    """Where a mention of `name` at word `i` ends, and whether it is possessive (`Sam's`)."""
    parts = name.split(" ")
    for size in (len(parts), 1):
        got = [_split(w)[0] for w in words[i : i + size]]
        if len(got) < size:
            continue
        last = got[-1].removesuffix("'s").removesuffix("’s")
        if got[:-1] + [last] == parts[:size] and not (
            size == 1 and _capitalised(words, i + 1) and not _split(words[i])[1] and last == got[-1]
        ):
            return i + size, last != got[-1]
    return None


def _capitalised(words: list[str], i: int) -> bool:
    return i < len(words) and bool(re.match(r"[A-Z][\w'’-]*$", _split(words[i])[0])) and words[i] != "I"


def _partner(words: list[str], i: int) -> tuple[list[str], int]:
    """The person after "NAME and" (a name, or a relation of the speaker's with or without one:
    `his neighbour Adam Smith` -> `my neighbour Adam Smith`) and the index after it."""
    out: list[str] = []
    if i + 1 < len(words) and words[i] in ("his", "her", "their"):
        out, i = ["my", words[i + 1]], i + 2
    while _capitalised(words, i) and not (out and _split(out[-1])[1]):
        out.append(words[i])
        i += 1
    return (out, i) if out else ([words[i]], i + 1)


def _person_at(words: list[str], i: int) -> bool:
    """Whether a run of capitalised words starts at `i` that names a person, not a place
    (`the Oak Hill College`, `Johnson Park`) or a day."""
    if not _capitalised(words, i) or (i and (_capitalised(words, i - 1) or words[i - 1] in ("the", "a"))):
        return False
    end = i
    while _capitalised(words, end + 1) and not _split(words[end])[1]:
        end += 1
    return not {_split(words[i])[0], _split(words[end])[0]} & _NOT_PEOPLE


def _verb_follows(words: list[str], i: int) -> bool:
    """Whether the word after a mention (adverbs aside) is a verb it is the subject of."""
    while i < len(words) and words[i] in _ADVERBS:
        i += 1
    if i >= len(words):
        return False
    word = _split(words[i])[0]
    return (
        word in _MODALS
        or word in ("is", "has", "was", "does", "did", "had", "have", "are", "were", "do")
        or bool(re.match(r"[a-z]+[^s\W]s$", word) and word not in ("his", "its", "this"))
    )


def _her_is_object(words: list[str], i: int) -> bool:
    """`her` before a noun is a possessive (`her friends`); else an object (`told her`, `owes her a`)."""
    core, tail = _split(words[i])
    return bool(tail) or i + 1 >= len(words) or words[i + 1] in _HER_OBJECT


def _agree(words: list[str], i: int, out: list[str], third: bool = False, plural: bool = False) -> int:
    """Copy adverbs from word `i` on into `out`, then the verb agreeing with "I" (or, `third`,
    with a name; `plural`, with "they"): returns the index after it."""
    while i < len(words) and words[i] in _ADVERBS:
        out.append(words[i])
        i += 1
    if i >= len(words):
        return i
    core, tail = _split(words[i])
    verb = _third(core) if third else _plural(core) if plural else _first(core)
    if verb == "am" and out[-1] == "I":
        out[-1] = "I'm" + tail
    else:
        out.append(verb + tail)
    return i + 1


def _first(verb: str) -> str:
    """A verb as "I" says it: `is` -> `am`, `has` -> `have`, `argues` -> `argue`, `studies` -> `study`."""
    irregular = {"is": "am", "has": "have", "does": "do", "goes": "go", "are": "am", "were": "was"}
    if verb in irregular:
        return irregular[verb]
    if not re.match(r"[a-z]+[^s\W]s$", verb) or verb in ("his", "its", "this"):
        return verb
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"
    if re.search(r"(?:ss|sh|ch|x|z|o)es$", verb):
        return verb[:-2]
    return verb[:-1]


def _third(verb: str) -> str:
    """A verb said of a person by name: `am` -> `is`, `argue` -> `argues`; past and modal verbs stay."""
    irregular = {"am": "is", "have": "has", "do": "does", "go": "goes", "was": "was"}
    if verb in irregular:
        return irregular[verb]
    if verb in _MODALS or verb in _PAST or verb.endswith("ed") or not verb.isalpha() or not verb.islower():
        return verb
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    return verb + ("es" if re.search(r"(?:s|sh|ch|x|z|o)$", verb) else "s")


def _plural(verb: str) -> str:
    """A verb said of "they" (the speaker taken back): `am` -> `are`, `was` -> `were`."""
    return {"am": "are", "was": "were"}.get(verb, verb)
