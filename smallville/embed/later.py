"""Embeddings asked for now and read later: what lets a run's engine go on while its texts
are embedded in another process (`smallville.embed.process`).

An embedder's `submit(texts)` returns a `Later`: `ready` says whether the rows are in,
calling it waits for them. `Base` gives every embedder a `submit` that embeds at once; the
caches keep what is still coming in `Coming`, so that they take rows in the order the texts
were asked for, whichever is awaited first (a run's record of embeddings is written in that
order, the same with or without a process).
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
