"""Embeddings asked for now and read later: what lets a run's engine go on while its texts
are embedded in another process (`smallville.embed.process`).

An embedder's `submit(texts)` returns a `Later`: `ready` says whether the rows are in,
calling it waits for them. `Base` gives every embedder a `submit` that embeds at once; the
caches (`TextCache`: `CachedEmbedder`, `RecordedEmbedder`) keep what is still coming in
`Coming`, so that they take rows in the order the texts were asked for, whichever is awaited
first (a run's record of embeddings is written in that order, the same with or without a
process).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

import numpy as np


class Later:
    """Rows being computed: `ready` (no wait) says whether they are in; calling waits for
    them, once."""

    def __init__(self, get: Callable[[], np.ndarray], ready: Callable[[], bool]) -> None:
        self._get, self._ready = get, ready
        self._rows: np.ndarray | None = None

    @classmethod
    def of(cls, rows: np.ndarray) -> Later:
        """Rows already computed."""
        later = cls(lambda: rows, lambda: True)
        later._rows = rows
        return later

    @property
    def ready(self) -> bool:
        return self._rows is not None or self._ready()

    def __call__(self) -> np.ndarray:
        if self._rows is None:
            self._rows = self._get()
        return self._rows


class Base:
    """What every embedder has beside `name`, `dim` and `embed`: `submit`, here embedding
    at once (an embedder that works elsewhere returns before the rows are in), and
    `close`, here nothing to end."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError

    def submit(self, texts: Sequence[str], soon: bool = False) -> Later:
        """`texts`' rows, later; `soon`: the caller is about to wait for them."""
        return Later.of(self.embed(texts))

    def expect(self, texts: Sequence[str]) -> None:
        """`texts` will be embedded soon: an embedder that keeps what it embedded (`TextCache`)
        asks for them now; here, nothing (they would be embedded twice)."""

    def close(self) -> None:
        """End what it holds (a process, open files); it can still embed afterwards."""


class Coming:
    """A cache's texts asked of its embedder and not yet kept, oldest first. A text's row is
    read from its call as soon as that call is in (`row`); the calls are kept, through
    `keep`, only in the order asked (`take`)."""

    def __init__(self, keep: Callable[[list[str], np.ndarray], None]) -> None:
        self.keep = keep
        self.queue: deque[tuple[list[str], Later]] = deque()
        self.where: dict[str, tuple[Later, int]] = {}  # a text coming -> its call and place in it

    def __contains__(self, text: str) -> bool:
        return text in self.where

    def ask(self, texts: list[str], later: Later) -> None:
        """`texts` (none of them known or coming) were asked for, their rows `later`."""
        if not self.queue and later.ready:  # computed at once: nothing to keep in order
            self.keep(texts, later())
            return
        self.queue.append((texts, later))
        self.where.update((text, (later, i)) for i, text in enumerate(texts))
        self.take()

    def take(self, wait: bool = False) -> None:
        """Keep the calls that are in, oldest first, up to the first still out (with `wait`:
        all of them, waiting for each)."""
        while self.queue and (wait or self.queue[0][1].ready):
            texts, later = self.queue.popleft()
            self.keep(texts, later())
            for text in texts:
                del self.where[text]

    def row(self, text: str) -> np.ndarray:
        """The row of a text coming (waiting for its call)."""
        later, i = self.where[text]
        row: np.ndarray = later()[i]
        return row

    def later(self, texts: list[str], rows: Callable[[], np.ndarray]) -> Later:
        """A `Later` for `texts`, read by `rows` (which reads a text coming by `row`)."""
        calls = [self.where[t][0] for t in texts if t in self.where]
        if not calls:
            return Later.of(rows())
        return Later(rows, lambda: all(call.ready for call in calls))


class TextCache(Base):
    """Embeds each distinct text once: a text it `known`s is answered at once, the others of
    a call go to `inner` in one call, are read as soon as they are in and kept, through
    `keep`, in the order asked (`coming`). `misses` counts the texts sent to `inner`, `hits`
    the texts answered without it (a repeat within one call is a hit, and so is a text
    submitted before and still coming)."""

    def __init__(self, inner, keep: Callable[[list[str], np.ndarray], None]) -> None:
        self.inner = inner
        self.coming = Coming(keep)
        self.hits = self.misses = 0

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def known(self, text: str) -> np.ndarray | None:
        """The row of a text already kept, if it is."""
        raise NotImplementedError

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.submit(texts, soon=True)()

    def submit(self, texts: Sequence[str], soon: bool = False) -> Later:
        texts, coming = list(texts), self.coming
        if len(texts) == 1 and texts[0] not in coming:  # the usual call: one memory stored
            row = self.known(texts[0])
            if row is not None:
                self.hits += 1
                return Later.of(row[None, :])
        todo = list(dict.fromkeys(t for t in texts if t not in coming and self.known(t) is None))
        if todo:
            coming.ask(todo, self.inner.submit(todo, soon))
        self.misses += len(todo)
        self.hits += len(texts) - len(todo)
        return coming.later(texts, lambda: self._stack(texts))

    def expect(self, texts: Sequence[str]) -> None:
        """Ask for `texts` now (in one call), awaited soon: `embed` then finds them known or
        coming."""
        self.submit(texts, soon=True)

    def _stack(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        coming = self.coming
        return np.stack([coming.row(t) if t in coming else self.known(t) for t in texts]).astype(np.float32, copy=False)

    def close(self) -> None:
        """Keep what has come and end the embedder (what has not come is asked again if
        needed: a checkpoint waited for everything it refers to)."""
        self.coming.take()
        self.inner.close()
