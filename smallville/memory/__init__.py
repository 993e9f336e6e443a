"""Memory streams: what each agent remembers, and how it recalls it.

    from smallville.memory import MemoryStream
    stream = MemoryStream(dim=512)
    mid = stream.add("Isabella is planning a party", embedding=v, importance=7, created=3600.0)
    hits = stream.retrieve(query_vec, k=10, now=7200.0)   # best first

`index="hnsw"` (one of INDEXES) retrieves approximately, for huge streams
(`smallville.memory.retriever`, `smallville.memory.approx`). How a run's agents use their
streams (the paper's memory, or the salience and consolidation model) is
`smallville.memory.models`.
"""

from smallville.memory.record import Hit, Memory
from smallville.memory.retriever import INDEXES
from smallville.memory.scoring import CONSTANT_TERM
from smallville.memory.stream import MemoryStream

__all__ = ["CONSTANT_TERM", "INDEXES", "Hit", "Memory", "MemoryStream"]
