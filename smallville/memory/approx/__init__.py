"""Approximate retrieval for huge streams, `MemoryStream(..., index="hnsw")`: a threshold
search over an HNSW graph of the embeddings (`hnsw`), the rows and graph (`graph`), and
memories ordered by importance and last access (`ordered`).

    stream = MemoryStream(dim=384, index="hnsw")   # the stream builds an HNSWRetriever
"""

from smallville.memory.approx.hnsw import HNSWRetriever

__all__ = ["HNSWRetriever"]
