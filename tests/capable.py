"""Answers of a capable model's size: the test server's `capable` mode.

A capable model (GPT-4o-mini, Llama 3.1 8B, Qwen 2.5 7B) does not answer in the fewest
words its schema allows: it plans a whole day in blocks of at most an hour, writes
activities of 6 to 15 words, lines of dialogue of one to three sentences, summaries and
memos of a sentence or two, and insights that cite their evidence. `realistic` takes a
valid answer (the offline brain's, when the prompt carries the request, else a random
instance of the schema) and brings it to those sizes, keeping it valid for the schema: only
free text grows (never a name from a list), a plan's long blocks are cut into hours (sleep
stays whole), and a plan gets its broad strokes. Everything is drawn from `rng`, which the
server seeds from the messages, so the same prompt gets the same answer.
"""

from __future__ import annotations

import random

# Words of free text by (request kind, field): (fewest, most). Sentences run 8 to 15 words.
WORDS = {
    ("plan_day", "activity"): (6, 15),
    ("plan_day", "broad"): (6, 12),
    ("decompose", "description"): (6, 15),
    ("react", "reason"): (12, 30),
    ("react", "thought"): (12, 30),
    ("speak", "text"): (8, 30),
    ("speak", "topic"): (2, 6),
    ("after_talk", "summary"): (12, 30),
    ("after_talk", "thought"): (10, 25),
    ("after_talk", "memo"): (8, 25),
    ("after_talk", "view"): (10, 25),
    ("after_talk", "topic"): (2, 6),
    ("summarize", "core"): (15, 35),
    ("summarize", "occupation"): (12, 30),
    ("summarize", "progress"): (10, 25),
    ("reflect_questions", "questions"): (8, 16),
    ("insights", "text"): (10, 25),
    ("interview", "text"): (25, 60),
    ("judge", "claim"): (6, 15),
}
CLAUSES = (
    "taking care to get the details right",
    "while keeping an eye on the time",
    "as planned earlier",
    "at an easy and steady pace",
    "before moving on to the next thing",
    "with a cup of tea close at hand",
    "making a note of what is left to do",
    "in the usual spot by the window",
    "with full attention",
)
SENTENCES = (
    "It has been a fairly ordinary day so far.",
    "There is still a good deal to do before the evening.",
    "Everyone around seems to be in a good mood today.",
    "It would be nice to catch up with a friend later.",
    "The plan for the afternoon still feels about right.",
    "Nothing unusual has come up since the morning.",
    "That is worth keeping in mind for the next few days.",
    "It is good to hear how things are going.",
)
ACTIVITIES = (
    "working on the main task of the day",
    "having a meal",
    "taking a walk around the neighbourhood",
    "reading at home",
    "tidying up the place",
    "meeting a friend for coffee",
    "running errands in town",
)
KINDS = (
    ("blocks", "plan_day"),
    ("steps", "decompose"),
    ("scores", "rate_importance"),
    ("tags", "tag_memories"),
    ("core", "summarize"),
    ("questions", "reflect_questions"),
    ("insights", "insights"),
    ("cites", "interview"),
    ("ranking", "judge"),
    ("memo", "after_talk"),
    ("action", "react"),
    ("end", "speak"),
)
"""A property of each kind's answer that no other kind's has: the kind of a schema sent
without its name (json_object and prompt modes name none)."""
DAY = 24 * 60


def kind_of(schema: dict) -> str | None:
    """The request kind whose answer `schema` describes, from its properties."""
    props = schema.get("properties", {})
    return next((kind for name, kind in KINDS if name in props), None)


def realistic(kind: str | None, schema: dict, data: dict, rng: random.Random, start: int | None = None) -> dict:
    """`data` (valid for `schema`) at the size a capable model writes. `start`: the minute a
    day plan begins from, known when the prompt carries the request; else a whole day."""
    if kind == "plan_day":
        data = _day(schema, data, rng, start)
    if kind == "decompose" and start is None:  # an hour's block, in the dark: 4 to 8 actions
        steps = data["steps"] or [{"minutes": 10, "description": "", "object": None}]
        data = {**data, "steps": [steps[i % len(steps)] for i in range(rng.randint(4, 8))]}
    return _grown(kind, schema, data, rng, "")


def _grown(kind: str | None, schema: dict, value, rng: random.Random, name: str):
    """`value` with every free string grown to the words of (kind, its field)."""
    if isinstance(value, dict):
        props = schema.get("properties", {})
        return {k: _grown(kind, props.get(k, {}), v, rng, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_grown(kind, schema.get("items", {}), v, rng, name) for v in value]
    if isinstance(value, str) and "enum" not in schema and (kind, name) in WORDS:
        return grow(value, *WORDS[kind, name], rng, sentences=WORDS[kind, name][1] > 15)
    return value


def grow(text: str, fewest: int, most: int, rng: random.Random, sentences: bool) -> str:
    """`text` lengthened to between `fewest` and `most` words, by clauses (an activity) or by
    whole sentences (dialogue, summaries); a text long enough already is left as it is."""
    want, out = rng.randint(fewest, most), text.strip()
    if len(out.split()) >= fewest:
        return text
    if sentences:
        pieces, glue = SENTENCES, " "
        if out and out[-1] not in ".!?":
            out += "."
    else:
        pieces, glue = CLAUSES, ", "
        out = out or "getting on with the day"
    while len(out.split()) < want:
        piece = rng.choice(pieces)
        if len(out.split()) >= fewest and len(out.split()) + len(piece.split()) > most:
            break
        out = (out + glue + piece) if out else piece
    return out


def _day(schema: dict, data: dict, rng: random.Random, start: int | None) -> dict:
    """A day plan in blocks of at most an hour (sleep one block), from the offline brain's
    (`start` known) or made up for the whole day; with 5 to 8 broad strokes."""
    block = schema["properties"]["blocks"]["items"]["properties"]
    places = [p for p in block["where"].get("enum", [""]) if p] or [""]
    if start is None:
        blocks = _whole_day(places, rng)
    else:
        blocks = [piece for b in data["blocks"] for piece in _hours(b)]
    if "sleep" in block:  # the night's block says it is sleep
        blocks = [{**b, "sleep": bool(b.get("sleep", "sleep" in b["activity"]))} for b in blocks]
    broad = schema["properties"].get("broad")
    if broad is None:
        return {**data, "blocks": blocks}
    fewest, most = broad.get("minItems", 5), broad.get("maxItems", 8)
    strokes = list(dict.fromkeys(f"{b['activity']} at {b['start'] // 60 % 24}:{b['start'] % 60:02d}" for b in blocks))
    while len(strokes) < fewest:
        strokes.append(f"{rng.choice(CLAUSES)} in the afternoon")
    return {**data, "broad": strokes[: max(fewest, min(most, len(strokes)))], "blocks": blocks}


def _hours(block: dict) -> list[dict]:
    """A block cut into pieces of at most an hour, on the hour; a night's sleep stays whole."""
    if block.get("sleep", "sleep" in block["activity"]) or block["end"] - block["start"] <= 60:
        return [block]
    cuts = [block["start"]] + [m for m in range(block["start"] // 60 * 60 + 60, block["end"], 60)] + [block["end"]]
    return [{**block, "start": a, "end": b} for a, b in zip(cuts, cuts[1:]) if b > a]


def _whole_day(places: list[str], rng: random.Random) -> list[dict]:
    """Waking between 6 and 8, an hour at a time until bed at 22 or 23, then sleep until the
    next wake-up: a realistic day of about 17 blocks."""
    wake, bed = rng.choice((360, 420, 480)), rng.choice((1320, 1380))
    home = places[0]
    blocks = [
        {"start": t, "end": t + 60, "activity": rng.choice(ACTIVITIES), "where": rng.choice(places)}
        for t in range(wake, bed, 60)
    ]
    blocks.append(
        {"start": bed, "end": wake + DAY, "activity": "going to bed and sleeping through the night", "where": home}
    )
    return blocks
