"""The paper's memory (Park et al. 2023): every memory rated 1..10 and kept, retrieved by
recency + importance + relevance (`MemoryStream.retrieve`), reflection when the importance
of what was stored since the last one passes a threshold."""

from __future__ import annotations

from smallville.brain import requests as rq


class PaperModel:
    """The default memory model; see the module docstring and `smallville.memory.models`."""

    salience = False
    talks_rated_whole = True    # a conversation's lines take the rating of its summary

    def __init__(self, settings) -> None:
        self.settings = settings

    def rating_request(self, agent, texts: tuple[str, ...], kind) -> rq.Message:
        """The rating of `texts` for this agent (who it is and what occupies it) with each
        memory's kind (`kind`: one for all, or one per text)."""
        kinds = (kind,) * len(texts) if isinstance(kind, str) else tuple(kind)
        return rq.RateImportance(agent.id, agent.name, texts, kinds, agent.identity())

    def ratings(self, answer: rq.Importance) -> tuple[int, ...]:
        return answer.scores

    def guess(self, request: rq.RateImportance) -> rq.Importance:
        """Run-ahead's guess at ratings not come yet: the highest, 10 (`smallville.sim.copies.Copy`
        says why it is safe)."""
        return rq.Importance((10,) * len(request.texts))

    def store(self, sim, agent, text: str, kind: str, rating: int, links, created, said) -> int:
        return sim.keep(agent, text, kind, rating, links, created, said)

    def retrieve(self, sim, agent, query: str, k: int) -> list:
        return agent.stream.retrieve(query, k=k, now=sim.env.now) if len(agent.stream) else []

    def retrieve_many(self, sim, agent, queries: list, k: int) -> list[list]:
        """`retrieve` for several queries of one moment, in one pass (`MemoryStream.retrieve_many`)."""
        if not len(agent.stream) or not queries:
            return [[] for _ in queries]
        return agent.stream.retrieve_many(queries, k, now=sim.env.now)

    def reflect_due(self, sim, agent) -> bool:
        return sim.config.reflection and agent.since_reflection >= sim.config.reflection_threshold

    def at_sleep(self, sim, agent):
        return
        yield
