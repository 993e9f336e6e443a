"""The offline brain: rule-based and deterministic for a seed. It is not a model.

It follows each persona's routine with some variation, rates importance from the words of
a memory, talks when it meets people it knows (and sometimes strangers), shares in
conversation the most important thing it remembers that it has not yet discussed with
the listener, and reflects on the people and places that recur in its recent memories.
Each answer is a pure function of the seed and the request, so a run is reproducible and
answers never depend on the order in which requests were asked.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence

from smallville.brain import requests as rq
from smallville.brain.base import Brain, override
from smallville.brain.contract import BROAD
from smallville.brain.dayplan import hourly
from smallville.brain.text import (
    MEMO_MARK,
    OWN_MARK,
    SHARE_MARK,
    first_name,
    mentions_sleep,
    names_in,
    progressive,
    shared_fact,
)
from smallville.brain.voice import first_person, names

# Word stems and the importance they lend a memory (the highest match wins).
_WEIGHTS: tuple[tuple[str, int], ...] = (
    ("died", 9),
    ("hospital", 8),
    ("wedding", 8),
    ("engaged", 8),
    ("valentine", 7),
    ("party", 7),
    ("mayor", 7),
    ("election", 7),
    ("running for", 7),
    ("candida", 6),
    ("campaign", 6),
    ("love", 6),
    ("crush", 6),
    ("invit", 6),
    ("secret", 6),
    ("argu", 6),
    ("fight", 6),
    ("sick", 6),
    ("birthday", 6),
    ("celebrat", 5),
    ("deadline", 5),
    ("exam", 5),
    ("date", 5),
    ("thesis", 4),
    ("book", 4),
    ("research", 4),
    ("news", 4),
    ("friend", 4),
    ("work", 3),
    ("class", 3),
    ("lecture", 3),
    ("music", 3),
    ("paint", 3),
)
_DULL = ("is idle", "is sleeping", "is asleep", "is empty", "is closed", "is off", "is in use")
_CHAT = re.compile(r" said to ")
_TIME = re.compile(r"\b(\d{1,2})(?::(\d{2}))?\s*(am|pm)\b", re.I)
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_QUESTION_WORDS = {
    "about",
    "know",
    "what",
    "when",
    "where",
    "which",
    "does",
    "have",
    "your",
    "with",
    "that",
    "this",
    "there",
    "their",
    "think",
    "tell",
    "anything",
    "heard",
    "hear",
    "going",
    "would",
}
_SHAREABLE = ("seed", "chat", "thought", "reflection")
ON_MIND = " has been thinking about this: "  # a summary's last sentence: what is on the agent's mind
_ON_MIND = re.compile(re.escape(ON_MIND) + r"(.+?)\.?$")
# What was talked about, seen or heard around, rather than news itself ("Ann talked with Bob
# about Isabella's party", the insights below), and the hours of someone's plan: not passed
# on, nor taken for what matters.
_HEARSAY = re.compile(
    r"\b(?:talked|talking) with .+ about |\bhas been hearing about |\boften sees |"
    r"\bhas been a part of |\bhas often been |'s plan (?:for|until) "
)
# Between the steps of an activity. The brain knows no one's pronouns, so none says whose.
_FILLERS = ("taking a short break", "checking messages", "tidying up a little", "looking over some notes")
_ABOUT = "What do I think about "  # a reflection question on someone or something


def _the(label: str) -> str:
    """An object as the brain is offered it, in words: "the desk", "the fridge in the
    kitchen", "the bed in Eddy Lin's bedroom"."""
    name, room = rq.object_of(label)
    if not room:
        return f"the {name}"
    return f"the {name} in {room}" if "'s" in room else f"the {name} in the {room}"


def rate(text: str) -> int:
    """Importance 1..10 of a memory from its words."""
    low = text.lower()
    score = max((w for stem, w in _WEIGHTS if stem in low), default=2)
    if any(d in low for d in _DULL) and score <= 3:
        return 1
    if _CHAT.search(text):
        score = max(score, 3)
    return min(score, 10)


# Word stems and the emotion they lend a memory (the first match wins; else neutral).
_FEELINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("trauma", ("died", "death", "accident", "flood", "fire", "injur")),
    ("fear", ("afraid", "scared", "danger", "emergency", "worried")),
    ("anger", ("argu", "fight", "angry", "furious")),
    ("sadness", ("sad", "sick", "lonely", "miss ", "hospital")),
    ("joy", ("party", "valentine", "celebrat", "birthday", "wedding", "love", "engaged", "happy", "fun")),
    ("surprise", ("surpris", "news", "sudden", "election", "mayor")),
    ("boredom", _DULL),
)


def tag(text: str, kind: str, name: str, sources: Sequence[str], emotions: Sequence[str]) -> rq.Tag:
    """A memory's source (from its kind and words: a chat line of no notable words is small
    talk, `routine`) and emotion (from its words), each one of the names offered."""
    low = text.lower()
    if kind == "chat" and rate(text) <= 3:  # small talk: as everyday as a sight
        source = "routine"
    elif kind == "chat":
        source = "personal" if text.startswith(name + " said to ") else "neighbour"
    elif kind == "plan":
        source = "strategic"
    elif kind in ("thought", "seed", "reflection"):
        source = "personal"
    else:
        source = "impact" if rate(text) >= 7 else "routine"
    emotion = next((feeling for feeling, stems in _FEELINGS if any(s in low for s in stems)), "neutral")

    def offered(wanted: str, names: Sequence[str], usual: str) -> str:
        return wanted if wanted in names else usual if usual in names else names[0]

    return rq.Tag(offered(source, sources, "personal"), offered(emotion, emotions, "neutral"))


class OfflineBrain(Brain):
    """Answers every request by rule; see the module docstring."""

    name = "offline"

    def __init__(
        self,
        seed: int = 0,
        talk_chance: float = 0.25,
        stranger_chance: float = 0.08,
        attend_chance: float = 0.6,
        gossip: float = 0.1,
    ) -> None:
        self.seed = seed
        self.talk_chance = talk_chance  # chance to start a talk with someone known, per meeting
        self.stranger_chance = stranger_chance  # the same with someone not known
        self.attend_chance = attend_chance  # chance to go to an event someone told them about
        self.gossip = gossip  # scales the chance to pass news on

    @override
    def describe(self) -> dict:
        return {
            "name": self.name,
            "kind": "rule-based",
            "seed": self.seed,
            "talk_chance": self.talk_chance,
            "stranger_chance": self.stranger_chance,
            "attend_chance": self.attend_chance,
            "gossip": self.gossip,
        }

    @override
    def answer(self, requests: Sequence[rq.Message]) -> list[rq.Message]:
        return [self._answer(r) for r in requests]

    def _rng(self, request: rq.Message) -> random.Random:
        return random.Random(f"{self.seed}:{rq.request_key(request)}")

    def _answer(self, request: rq.Message) -> rq.Message:
        request = rq.unframed(request)  # the rules read the question, not how a prompt lays it out
        handler = getattr(self, "_" + request.kind)
        return handler(request, self._rng(request))

    # ---- memory ---------------------------------------------------------------------

    def _rate_importance(self, req: rq.RateImportance, rng: random.Random) -> rq.Importance:
        return rq.Importance(tuple(rate(t) for t in req.texts))

    def _tag_memories(self, req: rq.TagMemories, rng: random.Random) -> rq.Tags:
        return rq.Tags(tuple(tag(t, k, req.name, req.sources, req.emotions) for t, k in zip(req.texts, req.kinds)))

    def _summarize(self, req: rq.Summarize, rng: random.Random) -> rq.Summary:
        """Who they are from their file; what they do from the day's plan (else a plan
        recalled); what is on their mind from the weightiest memory on their progress."""
        me = first_name(req.name)
        plan = req.plan or next((m for _, m in req.occupation if "'s plan for " in m), "")
        occupation = f"Lately {me}'s days go: {plan.split(': ', 1)[1]}." if ": " in plan else ""
        weighty = sorted(
            (-rate(m), i, m)
            for i, (_, m) in enumerate(req.progress)
            if rate(m) >= 5 and not _HEARSAY.search(shared_fact(m))
        )
        progress = (
            f"{me}{ON_MIND}{shared_fact(weighty[0][2]).rstrip('.')}."
            if weighty
            else f"{me} feels the days have been going as usual."
        )
        return rq.Summary(req.persona, occupation, progress)

    # ---- planning -------------------------------------------------------------------

    def _plan_day(self, req: rq.PlanDay, rng: random.Random) -> rq.DayPlan:
        if req.start:  # a re-plan: the plan being replaced, from then on
            blocks = [
                rq.Block(max(start, req.start), end, what, where, mentions_sleep(what))
                for start, end, what, where in req.current
                if end > req.start
            ]
            blocks = _insert_engagements(blocks, req, rng, self.attend_chance)
            return rq.DayPlan(tuple(blocks), _broad(blocks))
        routine = sorted(req.routine)
        if not routine:
            routine = [(7 * 60, "wake up and get ready", ""), (23 * 60, "go to bed and sleep", "")]
        starts = [at + (rng.randint(-15, 15) if i else rng.randint(-10, 20)) for i, (at, _, _) in enumerate(routine)]
        starts = [max(0, s) for s in starts]
        starts[0] = min(starts[0], req.plan_from)  # the day is covered from when it was asked
        for i in range(1, len(starts)):  # keep the order after jitter
            starts[i] = max(starts[i], starts[i - 1] + 15)
        day_end = routine[0][0] + 24 * 60  # the next wake-up
        blocks: list[rq.Block] = []
        for i, (_, what, where) in enumerate(routine):
            end = starts[i + 1] if i + 1 < len(routine) else day_end
            if end <= starts[i]:
                continue
            blocks.extend(_hourly(starts[i], end, progressive(what), where))
        blocks = _insert_engagements(blocks, req, rng, self.attend_chance)
        return rq.DayPlan(tuple(blocks), _broad(blocks))

    def _decompose(self, req: rq.Decompose, rng: random.Random) -> rq.Actions:
        total = max(1, req.end - req.start)
        if "sleep" in req.activity:
            bed = next((o for o in req.objects if "bed" in o), None)
            return rq.Actions((rq.Step(min(total, 180), "sleeping", bed),))
        steps: list[rq.Step] = []
        left = total
        if req.reason:
            first = min(left, 5)
            steps.append(rq.Step(first, "thinking over what just happened"))
            left -= first
        while left > 0:
            minutes = min(left, rng.choice((5, 10, 10, 15, 15)))
            if 0 < left - minutes < 5:  # no step under 5 minutes but the block's last
                minutes = left if left <= 15 else left - 5
            roll = rng.random()
            if roll < (0.55 if req.objects else 0.2 if req.elsewhere else 0):  # an object, now and then another room's
                away = not req.objects or (req.elsewhere and rng.random() < 0.2)
                obj = rng.choice(req.elsewhere if away else req.objects)
                steps.append(rq.Step(minutes, f"{req.activity} (using {_the(obj)})", obj))
            elif roll < 0.9 or minutes == total:
                steps.append(rq.Step(minutes, req.activity))
            else:
                steps.append(rq.Step(minutes, rng.choice(_FILLERS)))
            left -= minutes
        return rq.Actions(tuple(steps))

    def _react(self, req: rq.React, rng: random.Random) -> rq.Reaction:
        events = [o for o in req.observations if rate(o) >= 7 and not _CHAT.search(o)]
        if events:
            return rq.Reaction("replan", reason=events[0])
        known = dict(req.relationships)
        for pid, pname, *_ in sorted(req.people, key=lambda p: (p[0] not in known, p[0])):
            chance = self.talk_chance if pid in known else self.stranger_chance
            if rng.random() < chance:
                return rq.Reaction("talk", target=pid, reason=f"wants to talk with {pname}")
        return rq.Reaction("continue")

    # ---- conversation ---------------------------------------------------------------

    def _speak(self, req: rq.Speak, rng: random.Random) -> rq.Utterance:
        listener = first_name(req.listener_name)
        lines = [line for _, line in req.history] + list(req.earlier)
        said = {shared_fact(line) for line in lines}
        news = []
        memories = list(req.memories)
        on_mind = _ON_MIND.search(req.summary)  # the speaker's summary, as a prompt gives it, says what is on its mind
        if on_mind:
            memories.append(("", on_mind.group(1) + ".", rate(on_mind.group(1)), "thought"))
        for i, (_, text, importance, kind) in enumerate(memories):
            fact = shared_fact(text)
            if (kind == "reflection" and fact == text.strip()) or _HEARSAY.search(fact):
                continue  # an inference of one's own: only a fact it holds is news
            if kind == "chat" and SHARE_MARK not in text and OWN_MARK not in text:
                continue  # small talk, not news
            own = first_person(fact, req.name)  # one's own news is said in the first person
            told = fact in said or (own is not None and any(own in line for line in lines))
            if (
                kind in _SHAREABLE
                and importance >= 4
                and not told
                and not names(fact, req.listener_name)
                and not fact.startswith("I ")
            ):  # one's own thoughts and memos are not news
                news.append((-importance, i, fact))
        news.sort()
        # Whether to pass a piece of news on to this listener is decided once per talk.
        news = [n for n in news if self._tells(req, n[2], -n[0])]
        opening = not req.history
        last_shared = bool(req.history) and (SHARE_MARK in req.history[-1][1] or OWN_MARK in req.history[-1][1])
        if news:
            prefix = f"Hi {listener}! " if opening else ("Oh, I didn't know that. " if last_shared else "")
            own = first_person(news[0][2], req.name)
            text = f"{prefix}{OWN_MARK}{own}" if own else f"{prefix}{SHARE_MARK}{news[0][2]}"
            return rq.Utterance(text, topic=_topic(news[0][2]))
        if opening:
            return rq.Utterance(f"Hi {listener}! How is your day going?")
        if len(req.history) < 2:
            return rq.Utterance(
                rng.choice(("Pretty good, thanks. Busy as usual.", "Not bad at all, thanks for asking."))
            )
        reply = "Oh, I didn't know that. " if last_shared else ""
        return rq.Utterance(f"{reply}Good talking to you, {listener}. See you around!", end=True)

    def _tells(self, req: rq.Speak, fact: str, importance: int) -> bool:
        """One's own important news is always told. Other news is passed on more often the
        more it matters: with gossip g, importance 4 -> g/7 of the time, 10 -> g."""
        if importance >= 6 and names(fact, req.name):
            return True
        draw = random.Random(f"{self.seed}:{req.agent}:{req.listener}:{len(req.earlier)}:{fact}").random()
        return draw < self.gossip * (importance - 3) / 7

    def _after_talk(self, req: rq.AfterTalk, rng: random.Random) -> rq.TalkNotes:
        """The news told (if any) is the topic; an appointment of someone else's becomes the memo;
        the thought names the news in a few words, one's own as "my ..."."""
        me, other = first_name(req.name), first_name(req.other_name)
        told = [
            shared_fact(f"{who} said to someone: {line}")
            for who, line in req.lines
            if SHARE_MARK in line or OWN_MARK in line
        ]
        topic = _topic(told[0]) if told else "how their days are going"
        summary = f"{me} talked with {other} about {topic}" + (f": {told[0].rstrip('.')}." if told else "")
        engagement = next(
            (f for f in told if _TIME.search(f) and any(m in f.lower() for m in _MONTHS) and not names(f, req.name)), ""
        )
        memo = f"{MEMO_MARK}{engagement}" if engagement else ""
        if not told:
            thought = f"It was nice to catch up with {other}"
        elif names(told[0], req.name):
            thought = f"I told {other} about " + re.sub(rf"^{re.escape(me)}['’]s ", "my ", topic)
        else:
            thought = f"I want to keep {topic} in mind when I plan my day"
        view = (
            f"someone {me} has talked with, most recently about {topic}"
            if req.view == "" or req.view.startswith("someone ")
            else f"{req.view.split('; ')[0]}; they last talked about {topic}"
        )
        return rq.TalkNotes(summary, thought, memo, view, topic)

    # ---- reflection -----------------------------------------------------------------

    def _reflect_questions(self, req: rq.ReflectQuestions, rng: random.Random) -> rq.Questions:
        """The people and places that recur most in the latest memories; when there are too few,
        how the agent has been spending its days."""
        counts = Counter(
            n for _, text in req.memories for n in {m.removesuffix("'s") for m in names_in(text)} if n != req.name
        )
        topics = [n for n, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))][: req.count]
        questions = [f"{_ABOUT}{t}?" for t in topics]
        if len(questions) < req.count:
            questions.append(_days_question(req.name))
        return rq.Questions(tuple(questions[: req.count]))

    def _insights(self, req: rq.Insights, rng: random.Random) -> rq.InsightList:
        """Up to three insights the agent does not hold yet (`req.known`), drawn from the
        evidence on the question's topic (the agent itself, asked how it spends its days):
        what matters most in it, what the agent has talked about with or about the topic, what
        it sees the topic doing; else that the topic has been a part of its days."""
        me = first_name(req.name)
        topic = req.question.removeprefix(_ABOUT).rstrip("?") if req.question.startswith(_ABOUT) else req.name
        evidence = [text for _, text in req.evidence]
        about = tuple(i for i, e in enumerate(evidence) if topic in e) or tuple(range(len(evidence)))
        known = set(req.known)
        found: dict[str, list[int]] = {}  # insight -> the evidence it cites, in order of preference
        for i in sorted(about, key=lambda i: (-rate(evidence[i]), -i)):
            if rate(evidence[i]) >= 5 and not _HEARSAY.search(shared_fact(evidence[i])):
                found.setdefault(f"{me} thinks this matters: {shared_fact(evidence[i])}", []).append(i)
        for i in reversed(about):  # the latest first
            said = _insight_of(evidence[i], topic, req.name)
            if said:
                found.setdefault(said, []).append(i)
        if about and topic != req.name:
            found.setdefault(f"{topic} has been a part of {me}'s days lately", list(about))
        new = [rq.Insight(text, tuple(cites[:5])) for text, cites in found.items() if text not in known]
        return rq.InsightList(tuple(new[:3]))

    # ---- interviews -----------------------------------------------------------------

    def _interview(self, req: rq.Interview, rng: random.Random) -> rq.Reply:
        """The most relevant memories that share a word with the question (or, for a question
        about the agent, those about it), said back in the first person, with their ids."""
        words = {w for w in re.findall(r"[a-z']+", req.question.lower()) if len(w) > 3} - _QUESTION_WORDS
        stems = {w[:4] for w in words}  # "working" finds "work", "days" finds "day's"
        on_topic = [
            (mid, text)
            for mid, _, text in req.memories
            if stems & {w[:4] for w in re.findall(r"[a-z']+", text.lower()) if len(w) > 2}
        ]
        me = first_name(req.name)
        about_me = [(mid, text) for mid, _, text in req.memories if me in text or text.startswith("I ")]
        said: dict[str, list] = {}  # each fact once (however worded), with the memories carrying it
        for mid, text in on_topic or (about_me if re.search(r"\byour?\b", req.question.lower()) else []):
            fact = shared_fact(text).rstrip(".")
            key = fact.lower().replace(req.name.lower(), me.lower())
            said.setdefault(next((k for k in said if key in k or k in key), key), [fact]).append(mid)
        if not said:
            return rq.Reply("I don't remember anything about that.")
        chosen = list(said.values())[:3]
        return rq.Reply(
            f"From what I remember: {'; '.join(c[0] for c in chosen)}.", tuple(m for c in chosen for m in c[1:])
        )

    def _judge(self, req: rq.Judge, rng: random.Random) -> rq.Verdict:
        """Rules, not a model: see smallville/brain/rulejudge.py."""
        from smallville.brain.rulejudge import rule_verdict

        return rule_verdict(req)


def _days_question(name: str) -> str:
    """The reflection question an agent asks of itself when no one recurs in its memories."""
    return f"How has {first_name(name)} been spending the days?"


def _insight_of(text: str, topic: str, name: str) -> str:
    """What one piece of evidence says of `topic` (a person, a place, or the agent `name`
    itself): who talked with whom about what, what someone is seen doing; else ""."""
    me = first_name(name)
    if _CHAT.search(text):
        news = shared_fact(text) if SHARE_MARK in text or OWN_MARK in text else ""
        subject = _topic(news) if news else "how the days are going"
        between = text.split(": ", 1)[0]  # "Ann Lee said to Maria Lopez"
        other = next((n for n in between.split(" said to ") if n != name), "")
        if topic == name and other:
            return f"{me} has talked with {first_name(other)} about {subject}"
        return (
            f"{me} has talked with {first_name(topic)} about {subject}"
            if topic in between
            else f"{me} has been hearing about {topic} in talks about {subject}"
        )
    if " is " not in text or not text.startswith(topic):
        return ""
    doing = text.split(" is ", 1)[1].split(" (")[0]
    if topic != name:
        return f"{me} often sees {first_name(topic)} {doing}"
    if rate(text) > 1 and not doing.startswith(("walking to ", "talking with ", "idling", "waking up")):
        return f"{me} has often been {doing} lately"
    return ""


def _broad(blocks: list[rq.Block]) -> tuple[str, ...]:
    """The day's blocks in broad strokes: runs of one activity, the two shortest neighbours
    joined until there are at most eight."""
    strokes: list[list] = []  # [start, end, activity]
    for b in blocks:
        if strokes and strokes[-1][2] == b.activity:
            strokes[-1][1] = b.end
        else:
            strokes.append([b.start, b.end, b.activity])
    while len(strokes) > BROAD[1]:
        i = min(range(len(strokes) - 1), key=lambda k: (strokes[k + 1][1] - strokes[k][0], k))
        strokes[i : i + 2] = [[strokes[i][0], strokes[i + 1][1], f"{strokes[i][2]}, then {strokes[i + 1][2]}"]]
    return tuple(f"{a} at {start // 60 % 24}:{start % 60:02d}" for start, _, a in strokes)


def _topic(fact: str) -> str:
    """A few words for what a piece of news is about, as a passer-by would catch it, never a
    sentence: `Ann Lee is planning a birthday party at ...` -> `Ann's party`, other news of a
    person -> `Ann's news`, `The fair at the park has started` -> `the fair`, else `the news`."""
    clause = re.split(r",? (?:at|on|from|in|and) ", fact.rstrip("."), maxsplit=1)[0]
    thing = re.match(r"^(?:The|A|An) (?:[\w'’-]+ )*?([a-z]+)(?: (?:is|was|has|have|are|were|will)\b|$)", clause)
    if thing:
        return f"the {thing.group(1)}"
    person = re.match(r"^([A-Z][\w-]*)(?:['’]s)?(?: [A-Z][\w'’-]*)* ", clause)
    if not person:
        return "the news"
    named = re.match(r"^[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)* (?:is|was|will be) \w+ing (?:a|an|the) (?:.+ )?(\w+)$", clause)
    return f"{person.group(1)}'s {named.group(1) if named else 'news'}"


def _hourly(start: int, end: int, activity: str, where: str) -> list[rq.Block]:
    """A broad block refined into blocks of at most an hour; sleep stays one block."""
    if mentions_sleep(activity):
        return [rq.Block(start, end, activity, where, True)]
    return hourly(start, end, activity, where)


def _insert_engagements(
    blocks: list[rq.Block], req: rq.PlanDay, rng: random.Random, attend_chance: float
) -> list[rq.Block]:
    """Remembered appointments for this date ("... at Hobbs Cafe on February 14th, 5pm")
    replace whatever the routine had then, leaving a quarter of an hour to get there.
    One's own event is always kept; someone else's is attended with `attend_chance`."""
    month_day = req.date.split(", ")[1].lower() if ", " in req.date else ""
    for _, text in req.memories:
        low = text.lower()
        day = re.search(r"(" + "|".join(_MONTHS) + r") (\d{1,2})(?:st|nd|rd|th)?\b", low)
        if not day or f"{day.group(1)} {int(day.group(2))}" != month_day:
            continue
        place = next((p for p in sorted(req.places, key=len, reverse=True) if p.lower() in low), None)
        times = _TIME.findall(text)
        if not place or not times:
            continue
        start = _minutes(times[0])
        end = _minutes(times[1]) if len(times) > 1 else start + 120
        own = shared_fact(text).startswith(first_name(req.name))
        if end <= start:
            continue
        if not own and rng.random() >= attend_chance:
            return blocks
        start -= 15
        if any(b.sleep and b.start < end and start < b.end for b in blocks):
            continue
        kept: list[rq.Block] = []
        for b in blocks:
            if b.end <= start or b.start >= end:
                kept.append(b)
                continue
            if b.start < start:
                kept.append(rq.Block(b.start, start, b.activity, b.where, b.sleep))
            if b.end > end:
                kept.append(rq.Block(end, b.end, b.activity, b.where, b.sleep))
        kept.extend(_hourly(start, end, f"going to an event at {place}", place))
        return sorted(kept, key=lambda b: b.start)
    return blocks


def _minutes(match: tuple[str, str, str]) -> int:
    hour, minute, half = int(match[0]) % 12, int(match[1] or 0), match[2].lower()
    return (hour + (12 if half == "pm" else 0)) * 60 + minute
