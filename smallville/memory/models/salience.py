"""Seed 003's salience and consolidation memory.

- Rating: the brain tags each new memory with a source and an emotion (`TagMemories`);
  its importance is I = W_source x W_emotion from the settings' tables. Streams, events
  and requests carry I on the 1..10 scale too (`rating`: the tables' highest I is 10). A
  seed memory with an importance r given in its file has I = r / 10 x the highest I and
  is not tagged.
- The salience filter: a memory with I >= `threshold` is consolidated into long-term
  memory (the agent's stream) with probability `consolidation_prob`; seed memories always
  are. Every memory enters the working memory, the last `window_size` memories; one not
  consolidated is gone once it leaves it. The draw is the agent's next from a generator
  that draws nothing else (`consolidation_draw`: seeded from the run's seed and the agent,
  its state a count kept in `Mind`), one for every memory stored but seeds and insights,
  whatever its I: so neither where an agent walks (its own generator) nor any later draw
  depends on how a memory was tagged, and run-ahead can go on with a guessed tag (`guess`).
- Retrieval: the `top_k_significant` long-term memories of greatest strength
  S = I x exp(-l' x dt), dt in simulated days since the memory was made and
  l' = `decay_rate` x max(0, 1 - `emotion_decay` x W_emotion), followed by the working
  memory, newest first. With `relevance` > 0 the ranking is norm(S) + relevance x
  norm(cosine with the query) instead (min-max over the long-term memories).
- Reflection: not on the paper's trigger, but as the agent falls asleep: questions about
  the day's memories, and `insights` insights stored at I = 10 x `importance_boost`.

An agent's part of it (`Mind`: the working memory, each long-term memory's tags, when it
last reflected, the draws taken) is in its explicit state, so a checkpoint brings it back
whole.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from smallville import events
from smallville.brain import requests as rq
from smallville.memory.models.keywords import keyword_tag
from smallville.memory.record import Hit, Memory
from smallville.memory.scoring import normalise, span, top_k

INSIGHT = ("reflection", "neutral")  # an insight's source and emotion


def strength(importance: float, emotion: float, days: float, rate: float, emotion_decay: float = 0.5) -> float:
    """S = I x exp(-l' x dt), l' = rate x max(0, 1 - emotion_decay x W_emotion): how strongly
    a memory of importance I and emotion weight `emotion` stands out `days` after it was
    made (`rate` in the unit of `days`)."""
    return importance * math.exp(-rate * max(0.0, 1.0 - emotion_decay * emotion) * days)


def consolidation_draw(seed: int, agent_id: str, n: int) -> float:
    """An agent's `n`th consolidation draw, uniform in [0, 1): the first 53 bits of a hash
    of the run's seed, the agent and n. A generator whose whole state is n, which nothing
    else draws from."""
    digest = hashlib.blake2b(f"{seed}:consolidate:{agent_id}:{n}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") >> 11) / 2.0**53


@dataclass
class Mind:
    """An agent's salience state: the working memory (newest last), each long-term memory's
    [I, W_emotion, source, emotion] by its id, when it last reflected, and how many
    consolidation draws it has taken.

    A state written before the draws were counted (they were then taken from the agent's own
    generator) starts from the first draw: such a run goes on as determined as any, though
    not as the engine that wrote it would have gone on."""

    working: list[list] = field(default_factory=list)  # [text, kind, created, I, rating, source, emotion, id|None]
    tags: dict[str, list] = field(default_factory=dict)
    night: float = -math.inf
    draws: int = 0
    forgotten: list[list] = field(default_factory=list)  # [text, kind, created, rating] not kept since it reflected
    # (`reflect_on: all`)

    def get_state(self) -> dict:
        working = {
            "items": [list(x) for x in self.working],
            "night": self.night if math.isfinite(self.night) else None,
            "draws": self.draws,
        }
        if self.forgotten:
            working["forgotten"] = [list(x) for x in self.forgotten]
        return {"working": working, "salience": dict(self.tags)}

    @classmethod
    def from_state(cls, state: dict) -> Mind:
        working = state["working"]
        night = working["night"]
        return cls(
            [list(x) for x in working["items"]],
            {k: list(v) for k, v in state["salience"].items()},
            -math.inf if night is None else night,
            working.get("draws", 0),
            [list(x) for x in working.get("forgotten", [])],
        )


class Glimpse:
    """A working-memory item that is in no stream (not consolidated): read like a `Memory`,
    its id negative (-1 the newest), so nothing takes it for a stream's memory."""

    __slots__ = ("id", "text", "kind", "created", "importance")

    def __init__(self, id: int, text: str, kind: str, created: float, importance: int) -> None:
        self.id, self.text, self.kind, self.created, self.importance = id, text, kind, created, importance

    links: tuple[int, ...] = ()

    @property
    def last_accessed(self) -> float:
        return self.created

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "text": self.text,
            "kind": self.kind,
            "created": self.created,
            "last_accessed": self.created,
            "importance": self.importance,
            "links": [],
        }


class SalienceModel:
    """The salience memory model; see the module docstring and `smallville.memory.models`."""

    salience = True
    talks_rated_whole = False  # each line is tagged: its source (someone else's news) is the line's own

    def __init__(self, settings) -> None:
        self.settings = settings
        self.sources, self.emotions = dict(settings.sources), dict(settings.emotions)
        self.top = max(self.sources.values()) * max(self.emotions.values())

    @staticmethod
    def mind(agent) -> Mind:
        if agent.working is None:
            agent.working = Mind()
        return agent.working

    def rating(self, importance: float) -> int:
        """I on the 1..10 scale a stream and the requests hold: the tables' highest I is 10."""
        return max(1, min(10, round(10 * importance / self.top)))

    # ---- rating and storing ----------------------------------------------------------

    def rating_request(self, agent, texts: tuple[str, ...], kind: str) -> rq.Message:
        kinds = (kind,) * len(texts) if isinstance(kind, str) else tuple(kind)  # one, or one per text
        return rq.TagMemories(agent.id, agent.name, kinds, texts, tuple(self.sources), tuple(self.emotions))

    def ratings(self, answer: rq.Tags) -> tuple[rq.Tag, ...]:
        return answer.tags

    def local_ratings(self, sim, agent, texts) -> tuple[rq.Tag, ...] | None:
        """The tags `tagger: keywords` gives `texts` without asking the brain (by the table
        of the agent's type, else the model's own); None when the brain tags."""
        if self.settings.tagger != "keywords":
            return None
        table = sim.scenario.keyword_table(agent.spec.type) or self.settings.keywords
        return tuple(keyword_tag(text, table, self.sources, self.emotions) for text in texts)

    @staticmethod
    def counts_toward_reflection(kind: str) -> bool:
        return False  # no trigger sum: insights come at sleep

    def guess(self, request: rq.TagMemories) -> rq.Tags:
        """Run-ahead's guess at the tags not come yet (`smallville.sim.copies.Copy` says why
        it is safe): the source and emotion of the highest weights, so the highest I, which
        passes the filter whenever the true one would."""
        top = rq.Tag(max(self.sources, key=self.sources.get), max(self.emotions, key=self.emotions.get))
        return rq.Tags((top,) * len(request.texts))

    def store(self, sim, agent, text: str, kind: str, rating, links, created, said) -> int | None:
        """Tag, filter and keep (or only hold in the working memory) one memory."""
        if isinstance(rating, rq.Tag):
            source, emotion = rating.source, rating.emotion
            w = self.emotions.get(emotion, 1.0)
            importance = self.sources.get(source, 1.0) * w
        else:  # a seed memory's given 1..10: that share of the highest I
            source, emotion, w, importance = "given", "neutral", 1.0, rating / 10 * self.top
        kept = kind == "seed" or self.consolidates(sim, agent, importance)
        return self.hold(sim, agent, text, kind, importance, w, source, emotion, links, created, said, kept)

    def consolidates(self, sim, agent, importance: float) -> bool:
        """The salience filter: I >= threshold and the agent's next draw under
        `consolidation_prob`. The draw is taken whatever I is (see the module docstring)."""
        mind, s = self.mind(agent), self.settings
        draw = consolidation_draw(sim.seed, agent.id, mind.draws)
        mind.draws += 1
        return importance >= s.threshold and draw < s.consolidation_prob

    def hold(
        self, sim, agent, text, kind, importance, w, source, emotion, links=(), created=None, said=None, kept=True
    ) -> int | None:
        """Put a memory in the working memory, and (`kept`) in long-term memory."""
        mind, at = self.mind(agent), sim.env.now if created is None else created
        tags = {"salience": round(importance, 6), "source": source, "emotion": emotion}
        if kept:
            mid = sim.keep(agent, text, kind, self.rating(importance), links, created, said, **tags)
            mind.tags[str(mid)] = [importance, w, source, emotion]
        else:
            mid = None
            sim.count("forgotten")
            if self.settings.reflect_on == "all":
                mind.forgotten.append([text, kind, at, self.rating(importance)])
            sim.emit(
                events.MEMORY,
                agent.id,
                id=None,
                kind=kind,
                importance=self.rating(importance),
                text=text,
                links=list(links) or None,
                **(asdict(said) if said else {}),
                **tags,
            )
        if self.settings.window_size:
            mind.working.append([text, kind, at, importance, self.rating(importance), source, emotion, mid])
            del mind.working[: -self.settings.window_size]
        return mid

    # ---- retrieval -------------------------------------------------------------------

    def expect(self, sim, agent, queries: list, stored: list) -> None:
        """`queries` will be retrieved with soon: what embeds them may start now (if they are
        embedded: the strongest memories are searched, by relevance too). Texts to be
        `stored` are not: most never reach long-term memory."""
        s = self.settings
        if queries and len(agent.stream) and s.top_k_significant and s.relevance:
            agent.stream.expect(queries)

    def retrieve_many(self, sim, agent, queries: list, k: int) -> list[list[Hit]]:
        """`retrieve` for each query (text or its embedding)."""
        return [self.retrieve(sim, agent, query, k) for query in queries]

    def retrieve(self, sim, agent, query: str, k: int) -> list[Hit]:
        """The strongest long-term memories, then the working memory (`k` plays no part)."""
        s, mind, stream, now = self.settings, self.mind(agent), agent.stream, sim.env.now
        unit = s.decay_unit()
        working = list(reversed(mind.working))
        held = {item[7] for item in working if item[7] is not None}
        hits: list[Hit] = []
        n = len(stream)
        if n and s.top_k_significant:
            tags = [mind.tags.get(str(i)) or [self.top * stream[i].importance / 10, 1.0] for i in range(n)]
            importance = np.array([t[0] for t in tags])
            rate = s.decay_rate * np.maximum(0.0, 1.0 - s.emotion_decay * np.array([t[1] for t in tags]))
            fade = np.exp(-rate * (now - stream.columns.created[:n]) / unit)
            score = importance * fade
            relevance = np.zeros(n)
            if s.relevance:
                relevance = stream.embeddings() @ stream.embed_queries([query])[0]
                score = normalise(score, *span(float(score.min()), float(score.max()))) + s.relevance * normalise(
                    relevance, *span(float(relevance.min()), float(relevance.max()))
                )
            score[list(held)] = -np.inf
            best = [int(i) for i in top_k(score, min(n, s.top_k_significant)) if score[i] > -np.inf]
            hits = [
                Hit(Memory(stream, i), float(score[i]), float(fade[i]), float(importance[i]), float(relevance[i]))
                for i in best
            ]
        for j, (text, kind, created, importance, rating, _source, emotion, mid) in enumerate(working):
            memory = Memory(stream, mid) if mid is not None else Glimpse(-1 - j, text, kind, created, rating)
            fade = strength(1.0, self.emotions.get(emotion, 1.0), (now - created) / unit, s.decay_rate, s.emotion_decay)
            hits.append(Hit(memory, importance * fade, fade, importance, 0.0))
        return hits

    # ---- reflection ------------------------------------------------------------------

    def reflect_due(self, sim, agent) -> bool:
        return False  # no trigger: insights come as the agent falls asleep

    def reflect_due_at_sleep(self, mind: Mind, now: float) -> bool:
        """Whether this sleep reflects: every night, or (`reflect_every`) once that long has
        passed since the last reflection (since the start before the first)."""
        gap = self.settings.reflect_gap()
        return not gap or now - (mind.night if math.isfinite(mind.night) else 0.0) >= gap

    def at_sleep(self, sim, agent):
        """The day's memories (since the last night) give `insights` insights, one a question
        in turn, stored at I = 10 x importance_boost and linked to the memories they cite."""
        s, mind, stream, now = self.settings, self.mind(agent), agent.stream, sim.env.now
        if not sim.config.reflection or not s.insights or not self.reflect_due_at_sleep(mind, now):
            return
        day = [stream[i] for i in range(len(stream)) if stream[i].created > mind.night and stream[i].kind != "seed"]
        ids = {m.id for m in day}
        if s.reflect_on == "all":  # every memory of those days, kept or not
            day += [Glimpse(-1, t, kind, at, r) for t, kind, at, r in mind.forgotten if at > mind.night]
        else:
            day += [
                Glimpse(-1, t, kind, at, r)
                for t, kind, at, _i, r, _s, _e, mid in mind.working
                if mid is None and at > mind.night
            ]
        day = sorted(day, key=lambda m: m.created)[-sim.config.reflection_window :]
        mind.night, mind.forgotten = now, []
        if not day:
            return
        texts = sim.dated(day)  # (when, text), as every prompt's memories
        questions = yield sim.ask(agent, rq.ReflectQuestions(agent.id, agent.name, texts, s.insights))
        asks = [sim.ask(agent, rq.Insights(agent.id, agent.name, q, texts)) for q in questions.questions]
        answers = yield sim.env.all_of(asks)
        lists = [answers[a].insights for a in asks]
        chosen = [lst[r] for r in range(max(map(len, lists), default=0)) for lst in lists if r < len(lst)][: s.insights]
        sim.emit(
            events.REFLECT,
            agent.id,
            importance=round(sum(m.importance for m in day), 6),
            questions=list(questions.questions),
        )
        for insight in chosen:
            links = tuple(sorted({day[i].id for i in insight.because if 0 <= i < len(day) and day[i].id in ids}))
            self.hold(
                sim,
                agent,
                insight.text,
                "reflection",
                10 * s.importance_boost,
                self.emotions.get(INSIGHT[1], 1.0),
                *INSIGHT,
                links,
            )
