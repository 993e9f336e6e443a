"""The paper's memory (Park et al. 2023): every memory rated 1..10 and kept, retrieved by
recency + importance + relevance (`MemoryStream.retrieve`), reflection when the importance
of what was stored since the last one passes a threshold."""

from __future__ import annotations

from smallville.brain import requests as rq
from smallville.memory.models.adjust import adjusted, people_pattern


class PaperModel:
    """The default memory model; see the module docstring and `smallville.memory.models`."""

    salience = False
    talks_rated_whole = True  # a conversation's lines take the rating of its summary

    def __init__(self, settings) -> None:
        self.settings = settings
        self.people: dict[str, object] = {}  # agent id -> the pattern of the others' names

    def counts_toward_reflection(self, kind: str) -> bool:
        """Whether a memory of `kind` adds to the reflection trigger: perceived events (the
        paper), or every memory (`reflection.counts: all`)."""
        return self.settings.reflection.counts == "all" or kind == "observation"

    def rating_request(self, agent, texts: tuple[str, ...], kind) -> rq.Message:
        """The rating of `texts` for this agent (who it is and what occupies it) with each
        memory's kind (`kind`: one for all, or one per text)."""
        kinds = (kind,) * len(texts) if isinstance(kind, str) else tuple(kind)
        return rq.RateImportance(agent.id, agent.name, texts, kinds, agent.identity())

    def ratings(self, answer: rq.Importance) -> tuple[int, ...]:
        return answer.scores

    def local_ratings(self, sim, agent, texts) -> None:
        return None  # the brain rates every memory

    def guess(self, request: rq.RateImportance) -> rq.Importance:
        """Run-ahead's guess at ratings not come yet: the highest, 10 (`smallville.sim.copies.Copy`
        says why it is safe)."""
        return rq.Importance((10,) * len(request.texts))

    def store(self, sim, agent, text: str, kind: str, rating: int, links, created, said) -> int:
        """Keep a memory at the brain's rating, adjusted by 000's rules when they are on and
        raised to `insight_floor` for an insight."""
        s = self.settings
        if s.importance_adjust is not None and kind != "seed":
            rating = adjusted(rating, text, s.importance_adjust, self.others(sim, agent))
        if kind == "reflection":
            rating = max(rating, s.insight_floor)
        return sim.keep(agent, text, kind, rating, links, created, said)

    def others(self, sim, agent):
        """The pattern of the names of the town's other people (for `named_person`)."""
        if agent.id not in self.people:
            self.people[agent.id] = people_pattern(a.name for a in sim.scenario.agents if a.id != agent.id)
        return self.people[agent.id]

    def depth(self, stream, mid: int) -> int:
        """How many insights deep a memory stands: 0 for any other memory, else one more
        than the deepest insight it cites."""
        memory = stream[mid]
        if memory.kind != "reflection":
            return 0
        return 1 + max((self.depth(stream, i) for i in memory.links), default=0)

    def too_deep(self, stream, cited) -> bool:
        """Whether an insight citing `cited` would stand deeper than `reflection.max_depth`."""
        bound = self.settings.reflection.max_depth
        return bool(bound) and 1 + max((self.depth(stream, i) for i in cited), default=0) > bound

    def expect(self, sim, agent, queries: list, stored: list) -> None:
        """`queries` will be retrieved with and `stored` stored (every memory is) soon: what
        embeds them may start now, in one call (a query only if there is a memory to search)."""
        texts = stored + (queries if len(agent.stream) else [])
        if texts:
            agent.stream.expect(texts)

    def retrieve(self, sim, agent, query: str, k: int) -> list:
        return agent.stream.retrieve(query, k=k, now=sim.env.now) if len(agent.stream) else []

    def retrieve_many(self, sim, agent, queries: list, k: int) -> list[list]:
        """`retrieve` for several queries of one moment, in one pass (`MemoryStream.retrieve_many`)."""
        if not len(agent.stream) or not queries:
            return [[] for _ in queries]
        return agent.stream.retrieve_many(queries, k, now=sim.env.now)

    def reflect_due(self, sim, agent) -> bool:
        return (
            sim.config.reflection
            and agent.since_reflection >= sim.config.reflection_threshold
            and agent.since_count >= self.settings.reflection.min_memories
        )

    def at_sleep(self, sim, agent):
        return
        yield
