"""Short labels for the people on the map: initials, lengthened where two would be the same
("Maria Lopez" MaL, "Mei Lin" MeL), so each label names one person in any town."""

from __future__ import annotations

from collections import defaultdict


def initials(names: dict[str, str]) -> dict[str, str]:
    """A label per agent id, unique among them: the name's initials; for people who share
    them, a word lengthened by the fewest letters that tell them apart (again within those
    still alike); numbered, by id, where no letters do (namesakes)."""
    words = {a: name.split() or [a] for a, name in names.items()}
    out: dict[str, str] = {}
    for ids in _alike(sorted(words), words, {a: [1] * len(words[a]) for a in words}).values():
        _resolve(ids, words, {a: [1] * len(words[a]) for a in ids}, out)
    return _distinct(out)


def _label(words: list[str], lengths: list[int]) -> str:
    return "".join(w[:n] for w, n in zip(words, lengths))


def _alike(ids: list[str], words: dict, lengths: dict) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for a in ids:
        groups[_label(words[a], lengths[a])].append(a)
    return groups


def _resolve(ids: list[str], words: dict, lengths: dict, out: dict) -> None:
    """Labels for `ids`, whose labels at `lengths` are the same, into `out`."""
    if len(ids) == 1:
        out[ids[0]] = _label(words[ids[0]], lengths[ids[0]])
        return
    step = _split(ids, words, lengths)
    if step is None:
        label = _label(words[ids[0]], lengths[ids[0]])
        out.update((a, f"{label}{n}") for n, a in enumerate(ids, 1))
        return
    index, length = step
    longer = {a: [length if i == index else n for i, n in enumerate(lengths[a])] for a in ids}
    for group in _alike(ids, words, longer).values():
        _resolve(group, words, longer, out)


def _split(ids: list[str], words: dict, lengths: dict) -> tuple[int, int] | None:
    """The word (its index) and its length that tell some of `ids` apart: the fewest letters
    added, then the most groups made, then the earliest word; None for namesakes."""
    best = None
    if len({len(words[a]) for a in ids}) > 1:
        return None
    for index in range(len(words[ids[0]])):
        now = lengths[ids[0]][index]
        for length in range(now + 1, max(len(words[a][index]) for a in ids) + 1):
            seen = {words[a][index][:length] for a in ids}
            if len(seen) > 1:
                key = (length - now, -len(seen), index)
                best = min(best, (key, (index, length))) if best else (key, (index, length))
                break
    return best[1] if best else None


def _distinct(labels: dict[str, str]) -> dict[str, str]:
    """A guard for names the letters cannot keep apart (lower-case words run together):
    a label held twice is numbered."""
    count: dict[str, int] = defaultdict(int)
    for label in labels.values():
        count[label] += 1
    taken, out = set(labels.values()), {}
    for a in sorted(labels):
        label = labels[a]
        if count[label] > 1:
            n = 1
            while f"{label}{n}" in taken:
                n += 1
            taken.add(f"{label}{n}")
            label = f"{label}{n}"
        out[a] = label
    return out
