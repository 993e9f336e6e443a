"""How an agent's memory works: the seam between the agent's life (`smallville.sim.life`) and
the memory model the run uses (`smallville.scenario.memorymodel.MemoryModel`).

A `Simulation` holds one model (`sim.memory`), and its life asks it only this:

    sim.memory.rating_request(agent, texts, kind)   the request that rates new memories
    sim.memory.ratings(answer)                      its answer, one rating per text
    sim.memory.local_ratings(sim, agent, texts)     ratings made without the brain (a keyword tagger), or None
    sim.memory.guess(request)                       run-ahead's guess at that answer (sim.copies)
    sim.memory.store(sim, agent, text, kind, rating, links, created, said)
                                                    keep a memory, or not: its id or None
    sim.memory.expect(sim, agent, queries, stored)  texts retrieved with and stored soon: their embedding may start
    sim.memory.retrieve(sim, agent, query, k)       what comes to mind, best first (`Hit`s)
    sim.memory.retrieve_many(sim, agent, queries, k)  the same for several queries of one moment
    sim.memory.reflect_due(sim, agent)              whether the paper's reflection is due
    sim.memory.counts_toward_reflection(kind)       whether a memory of that kind adds to its trigger
    sim.memory.too_deep(stream, cited)              whether an insight citing those would pass `max_depth`
    sim.memory.at_sleep(sim, agent)                 (a generator) what happens as it falls asleep
    sim.memory.talks_rated_whole                    whether a conversation's lines take its summary's rating

`paper` (`PaperModel`) is Park et al. (2023) as the engine always had it; `salience`
(`SalienceModel`) is seed 003's salience and consolidation memory.
"""

from __future__ import annotations

from smallville.memory.models.paper import PaperModel
from smallville.memory.models.salience import Mind, SalienceModel, strength

__all__ = ["Mind", "PaperModel", "SalienceModel", "memory_model", "strength"]


def memory_model(settings) -> PaperModel | SalienceModel:
    """The model `settings` (a `MemoryModel`) names."""
    return SalienceModel(settings) if settings.salience else PaperModel(settings)
