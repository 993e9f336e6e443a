"""An agent's memory stream: append-only memories, retrieved by the paper's formula."""

from __future__ import annotations

import math
import numbers
import operator
from collections import deque
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from smallville.embed import Embedder, Later
from smallville.memory import storage
from smallville.memory.record import Columns, Hit, Memory
from smallville.memory.retriever import NORMALIZE, make_retriever
from smallville.memory.scoring import Helpers

Query = str | np.ndarray | Sequence[float]
"""A retrieval query: an embedding, or a text when the stream has an embedder."""


class Mark(NamedTuple):
    """A stream's place at one moment (`MemoryStream.mark`): how many memories and distinct
    embeddings it held, and each memory's last-access time then."""

    count: int
    rows: int
    accessed: np.ndarray


class MemoryStream:
    """One agent's memories: texts and links in lists, times and ratings in numpy arrays
    grown by doubling (so `add` is amortised O(1)), embeddings in a FAISS index (`index`)
    that its retriever owns, each distinct embedding stored once
    (`smallville.memory.vectors`). All of it is `columns`, the view its storage,
    retrieval and index read (`smallville.memory.record.Columns`).

    `weights` are (recency, importance, relevance); `decay` is per game hour; `normalize`
    is how the terms are scaled before they are weighted: "minmax" (each over the stream,
    the paper's) or "fixed" (importance / 10, raw cosine, raw recency; exact index only). With an
    `embedder`, `dim` may be left out and texts may stand for embeddings; one that embeds
    elsewhere (`smallville.embed.later`) lets `add` return before the row is in: the memory is
    there at once, its row is taken in when the table or rows are first read. `index` is
    "exact" (default: every memory scored, one pass over the embeddings) or "hnsw"
    (approximate, for huge streams: see `smallville.memory.approx`; needs non-negative
    weights; `hnsw_m`, `ef_construction` and `ef_search` tune its graph): the retriever
    it is built with (`smallville.memory.retriever`). Searches over a large stream use
    `helpers`' threads: the stream's own (end them with `close`), or its owner's (a
    `Simulation` lends its agents' streams its own, and ends them).
    """

    def __init__(
        self,
        dim: int | None = None,
        weights: Sequence[float] = (1.0, 1.0, 1.0),
        decay: float = 0.995,
        embedder: Embedder | None = None,
        index: str = "exact",
        *,
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int = 64,
        helpers: Helpers | None = None,
        normalize: str = "minmax",
    ) -> None:
        if dim is None:
            if embedder is None:
                raise ValueError("MemoryStream needs a dim or an embedder to learn it from")
            dim = embedder.dim
        if not isinstance(dim, numbers.Integral) or isinstance(dim, bool) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if embedder is not None and embedder.dim != dim:
            raise ValueError(f"dim {dim} does not match embedder {embedder.name!r} of dim {embedder.dim}")
        ws = tuple(float(w) for w in weights)
        if len(ws) != 3 or not all(math.isfinite(w) for w in ws):
            raise ValueError(f"weights must be 3 finite numbers (recency, importance, relevance), got {weights!r}")
        if not 0.0 < float(decay) <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {decay!r}")
        if normalize not in NORMALIZE or (normalize == "fixed" and index != "exact"):
            raise ValueError(f"normalize must be minmax, or fixed with the exact index, got {normalize!r}")
        self.dim = int(dim)
        self.weights = ws
        self.normalize = normalize
        self.decay = float(decay)
        self.embedder = embedder
        self.embedder_name: str | None = embedder.name if embedder is not None else None
        self._retriever = make_retriever(
            index, self.dim, ws, hnsw_m=hnsw_m, ef_construction=ef_construction, ef_search=ef_search
        )
        self.index_kind = self._retriever.kind
        self.columns = Columns(self._retriever.table, settle=self._settle)
        self._coming: deque[tuple[int, Later]] = deque()  # memories whose embeddings are still coming
        self.on_disk: dict | None = None  # what the last save or load wrote where (`storage` keeps it)
        self.helpers = helpers if helpers is not None else Helpers()

    def close(self) -> None:
        """End the helper threads of its searches (a later search starts them again)."""
        self.helpers.close()

    @property
    def index(self):
        """The FAISS index holding the distinct embeddings (IndexFlatIP or IndexHNSWFlat;
        an HNSW index takes the newest rows in at the next retrieval, and its entries may
        be in an order of their own: `GraphTable.nearest` answers in rows)."""
        return self.columns.table.index

    # -- adding -------------------------------------------------------------------------

    def add(
        self,
        text: str,
        embedding: np.ndarray | Sequence[float] | None = None,
        *,
        importance: int,
        created: float,
        kind: str = "observation",
        links: Sequence[int] = (),
    ) -> int:
        """Append a memory and return its id; it counts as last accessed when created.
        Without `embedding`, the stream's embedder embeds `text`."""
        if not isinstance(text, str):
            raise ValueError(f"memory text must be a str, got {type(text).__name__}")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"memory kind must be a non-empty str, got {kind!r}")
        if not isinstance(importance, numbers.Integral) or isinstance(importance, bool) or not 1 <= importance <= 10:
            raise ValueError(f"importance must be an int from 1 to 10, got {importance!r} for memory {text!r}")
        if not isinstance(created, numbers.Real) or isinstance(created, bool) or not math.isfinite(created):
            raise ValueError(f"created must be a finite number of seconds, got {created!r}")
        links, n = tuple(links), self.columns.count
        bad = [x for x in links if not isinstance(x, numbers.Integral) or isinstance(x, bool) or not 0 <= x < n]
        if bad:
            raise ValueError(f"links {bad!r} of memory {text!r} are not ids of existing memories (0..{n - 1})")
        links = tuple(int(x) for x in links)
        if embedding is None:
            if self.embedder is None:
                raise ValueError(f"memory {text!r} has no embedding and the stream has no embedder")
            later = self.embedder.submit([text])
            if self._coming or not later.ready:  # taken in when its row is first read (`_settle`)
                i = self._append(text, -1, int(importance), float(created), kind, links, float(created))
                self._coming.append((i, later))
                return i
            embedding = later()[0]
        vector = self._unit(embedding, f"embedding of memory {text!r}")
        row = self.columns.table.add(vector)
        return self._append(text, row, int(importance), float(created), kind, links, float(created))

    def _append(
        self, text: str, row: int, importance: int, created: float, kind: str, links: tuple[int, ...], accessed: float
    ) -> int:
        """Append a validated memory whose embedding is already row `row` (-1: still coming)."""
        c = self.columns
        self._reserve(c.count + 1)
        i = c.count
        c.stored_rows[i] = row
        c.created[i] = created
        c.accessed[i] = accessed
        c.importance[i] = importance
        c.texts.append(text)
        c.kinds.append(kind)
        c.links.append(links)
        if row >= 0:
            self._retriever.add(i, row, importance, accessed)
        c.count += 1
        return i

    def _settle(self) -> None:
        """Take in the embeddings still coming, in the order their memories were added (so
        the table is the one the stream would have had with every embedding at once)."""
        c = self.columns
        while self._coming:
            i, later = self._coming[0]
            row = c.stored.add(self._unit(later()[0], f"embedding of memory {c.texts[i]!r}"))
            c.stored_rows[i] = row
            self._retriever.add(i, row, int(c.importance[i]), float(c.accessed[i]))
            self._coming.popleft()

    def append_loaded(self, records: list[dict], accessed: np.ndarray) -> None:
        """Append memories read back from disk at once (ids in order, each record's `row`
        already in `columns.table`), last accessed at `accessed` (`smallville.memory.storage`)."""
        c = self.columns
        n, m, u = c.count, len(records), len(c.table)
        rows = np.array([r["row"] for r in records], dtype=np.int64)
        importance = np.array([r["importance"] for r in records], dtype=np.int64)
        if m and (rows.min() < 0 or rows.max() >= u or importance.min() < 1 or importance.max() > 10):
            raise ValueError("a record names a missing row or an importance outside 1..10")
        self._reserve(n + m)
        c.rows[n : n + m] = rows
        c.importance[n : n + m] = importance
        c.created[n : n + m] = [float(r["created"]) for r in records]
        c.accessed[n : n + m] = accessed
        c.texts.extend(str(r["text"]) for r in records)
        c.kinds.extend(str(r["kind"]) for r in records)
        c.links.extend(tuple(int(x) for x in r["links"]) for r in records)
        self._retriever.bulk_add(n, rows, importance, accessed)
        c.count += m

    def _unit(self, vector: np.ndarray | Sequence[float], what: str) -> np.ndarray:
        v = np.asarray(vector, dtype=np.float64)
        if v.ndim == 2 and v.shape[0] == 1:
            v = v[0]
        if v.shape != (self.dim,):
            raise ValueError(f"{what} has shape {v.shape}, expected ({self.dim},)")
        norm = math.sqrt(float(v @ v))
        if not math.isfinite(norm) or norm == 0.0:
            raise ValueError(f"{what} must be finite and non-zero")
        return (v / norm).astype(np.float32)

    def _reserve(self, size: int) -> None:
        c = self.columns
        if size <= len(c.created):
            return
        cap = max(size, 2 * len(c.created))
        for name in ("stored_rows", "created", "accessed", "importance"):
            old = getattr(c, name)
            new = np.zeros(cap, dtype=old.dtype)
            new[: c.count] = old[: c.count]
            setattr(c, name, new)

    # -- retrieval ----------------------------------------------------------------------

    def retrieve(self, query: Query, k: int = 10, *, now: float) -> list[Hit]:
        """The k memories with the highest score, best first, marked as accessed at `now`.

        For every memory i (the whole stream, not only candidates):

            recency_i    = decay ** ((now - last_accessed_i) / 3600)
            importance_i = its 1..10 rating
            relevance_i  = cosine(query, embedding_i)
            score_i      = w_rec*norm(recency)_i + w_imp*norm(importance)_i
                           + w_rel*norm(relevance)_i

        `norm` is min-max over the stream to [0, 1]; a term equal for all memories
        normalises to 0.5 for all (as in the paper's code), so it ranks nobody. Equal
        scores rank the newer memory (higher id) first. `query` is an embedding or, when
        the stream has an embedder, a text. With index="hnsw" the result is approximate.
        """
        return self.retrieve_many([query], k, now=now)[0]

    def retrieve_many(self, queries: Sequence[Query], k: int = 10, *, now: float) -> list[list[Hit]]:
        """`retrieve` for several queries in one pass: one hit list per query.

        All queries are scored against the stream as it is before the call; only then are
        the returned memories marked accessed at `now`. So the result equals calling
        `retrieve` for each query in order except that an earlier query's refresh does not
        raise a memory's recency for a later query of the same call.
        """
        if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k must be a non-negative int, got {k!r}")
        if not isinstance(now, numbers.Real) or not math.isfinite(now):
            raise ValueError(f"now must be a finite number of seconds, got {now!r}")
        if isinstance(queries, str) or (isinstance(queries, np.ndarray) and queries.ndim == 1):
            queries = [queries]
        qs = self.embed_queries(list(queries))
        self._settle()
        if self.columns.count == 0 or k == 0:
            return [[] for _ in range(len(qs))]
        found = self._retriever.search(self, qs, int(k), float(now))
        results = [
            [Hit(Memory(self, int(i)), float(s), float(rc), float(im), float(rl)) for i, s, rc, im, rl in zip(*columns)]
            for columns in found
        ]
        touched = list(dict.fromkeys(int(i) for columns in found for i in columns[0]))
        self.columns.accessed[touched] = float(now)
        self._retriever.touch(touched, float(now))
        return results

    def expect(self, queries: Sequence[Query]) -> None:
        """The text `queries` of a retrieval to come (or texts to be added): the embedder may
        start on them now."""
        texts = [q for q in queries if isinstance(q, str)]
        if texts and self.embedder is not None:
            self.embedder.expect(texts)

    def embed_queries(self, queries: list) -> np.ndarray:
        """Retrieval queries (texts or embeddings) as a (len(queries), dim) array of unit rows."""
        texts = [q for q in queries if isinstance(q, str)]
        if texts and self.embedder is None:
            raise ValueError(f"query {texts[0]!r} is text but the stream has no embedder")
        embedded = iter(self.embedder.embed(texts)) if texts else iter(())
        rows = [self._unit(next(embedded) if isinstance(q, str) else q, f"query {j}") for j, q in enumerate(queries)]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    # -- reading ------------------------------------------------------------------------

    def last_accessed(self) -> np.ndarray:
        """Every memory's last-access time, in id order (a read-only view)."""
        c = self.columns
        view = c.accessed[: c.count]
        view.flags.writeable = False
        return view

    def __len__(self) -> int:
        return self.columns.count

    def __getitem__(self, mid: int) -> Memory:
        i = operator.index(mid)
        if not 0 <= i < self.columns.count:
            raise IndexError(f"no memory {mid!r} in a stream of {self.columns.count}")
        return Memory(self, i)

    def __iter__(self) -> Iterator[Memory]:
        return (Memory(self, i) for i in range(self.columns.count))

    def texts(self) -> list[str]:
        """Every memory's text, in id order (a copy)."""
        return list(self.columns.texts)

    def kinds(self) -> list[str]:
        """Every memory's kind, in id order (a copy)."""
        return list(self.columns.kinds)

    def importances(self) -> np.ndarray:
        """Every memory's 1..10 rating, in id order (a copy)."""
        return self.columns.importance[: self.columns.count].copy()

    def embeddings(self) -> np.ndarray:
        """The (n, dim) float32 unit-length embeddings, in id order (a read-only copy)."""
        c = self.columns
        out = c.table.matrix()[c.rows[: c.count]]
        out.flags.writeable = False
        return out

    def records(self, start: int = 0) -> list[tuple]:
        """The memories from id `start` on, each `(text, kind, created, importance, links, row)`:
        `row` is its embedding's place among `distinct_rows()` (what a checkpoint writes)."""
        c, n = self.columns, self.columns.count
        return list(
            zip(
                c.texts[start:n],
                c.kinds[start:n],
                c.created[start:n].tolist(),
                c.importance[start:n].tolist(),
                [list(x) for x in c.links[start:n]],
                c.rows[start:n].tolist(),
            )
        )

    def distinct_rows(self, start: int = 0) -> np.ndarray:
        """The distinct embeddings its memories use, from row `start` on (a read-only view):
        a text remembered twice is embedded once."""
        table = self.columns.table
        view = table.matrix()[start : len(table)]
        view.flags.writeable = False
        return view

    def embedding_of(self, mid: int) -> np.ndarray:
        """A copy of memory `mid`'s embedding."""
        return self.columns.table.row(int(self.columns.rows[mid])).copy()

    def __repr__(self) -> str:
        return (
            f"MemoryStream(n={self.columns.count}, dim={self.dim}, weights={self.weights}, "
            f"decay={self.decay}, embedder={self.embedder_name!r}, "
            f"index={self.index_kind!r})"
        )

    # -- branching ----------------------------------------------------------------------

    def mark(self) -> Mark:
        """Where the stream stands now: `branch(mark)` gives the stream as it is now, however
        much is added or retrieved meanwhile."""
        c = self.columns
        return Mark(c.count, len(c.table), c.accessed[: c.count].copy())

    def branch(self, mark: Mark | None = None, embedder=None) -> MemoryStream:
        """A new stream holding this one's memories as they were at `mark` (default: now),
        with the same settings and embedder (or `embedder`). The two share nothing: what is
        added to or retrieved from either leaves the other as it was."""
        mark = mark or self.mark()
        n, u = mark.count, mark.rows
        other = MemoryStream(
            self.dim,
            self.weights,
            self.decay,
            self.embedder if embedder is None else embedder,
            self.index_kind,
            normalize=self.normalize,
        )
        other.embedder_name = self.embedder_name
        mine, theirs = self.columns, other.columns
        theirs.table.extend_from(mine.table, u)
        other._reserve(n)
        for name in ("stored_rows", "created", "importance"):
            getattr(theirs, name)[:n] = getattr(mine, name)[:n]
        theirs.accessed[:n] = mark.accessed
        theirs.texts, theirs.kinds, theirs.links = mine.texts[:n], mine.kinds[:n], mine.links[:n]
        other._retriever.bulk_add(0, theirs.rows[:n], theirs.importance[:n], theirs.accessed[:n])
        theirs.count = n
        return other

    # -- persistence --------------------------------------------------------------------

    def save(self, path: str) -> None:
        """Write the stream to directory `path` (created if missing). Saving again to the
        same path appends only what is new; see `smallville.memory.storage`."""
        storage.save(self, path)

    @classmethod
    def load(
        cls,
        path: str,
        embedder: Embedder | None = None,
        *,
        count: int | None = None,
        accessed: np.ndarray | None = None,
    ) -> MemoryStream:
        """The stream saved at `path`; `embedder` must be the one it was built with. With
        `count`, only its first `count` memories (the stream as it was when it held that
        many), with `accessed` as their last-access times."""
        return storage.load(cls, path, embedder, count=count, accessed=accessed)
