"""The memory stream: retrieval is the paper's formula exactly, checked against a slow
pure-Python reference; plus refresh, weights, persistence and validation."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest

from smallville.embed import CachedEmbedder, Later, LexicalEmbedder
from smallville.errors import RunError
from smallville.memory import CONSTANT_TERM, Hit, Memory, MemoryStream

# -- the reference: the formula, one memory at a time, in plain Python ------------------


class Reference:
    """A brute-force model of the stream: lists of floats, no numpy."""

    def __init__(self, weights, decay):
        self.weights, self.decay = weights, decay
        self.vectors: list[list[float]] = []
        self.importance: list[int] = []
        self.accessed: list[float] = []

    def add(self, vector, importance, created):
        norm = math.sqrt(sum(float(x) ** 2 for x in vector))
        self.vectors.append([float(x) / norm for x in vector])
        self.importance.append(importance)
        self.accessed.append(created)

    @staticmethod
    def norm(values):
        lo, hi = min(values), max(values)
        if hi == lo:
            return [CONSTANT_TERM] * len(values)
        return [(v - lo) / (hi - lo) for v in values]

    def retrieve(self, query, k, now):
        if not self.vectors:
            return []
        qn = math.sqrt(sum(float(x) ** 2 for x in query))
        q = [float(x) / qn for x in query]
        rec = self.norm([self.decay ** ((now - a) / 3600) for a in self.accessed])
        imp = self.norm([float(i) for i in self.importance])
        rel = self.norm([sum(a * b for a, b in zip(q, v)) for v in self.vectors])
        w_rec, w_imp, w_rel = self.weights
        scores = [w_rec * rec[i] + w_imp * imp[i] + w_rel * rel[i] for i in range(len(rec))]
        best = sorted(range(len(scores)), key=lambda i: (-scores[i], -i))[:k]
        for i in best:
            self.accessed[i] = now
        return [(i, scores[i], rec[i], imp[i], rel[i]) for i in best]


def assert_same(hits: list[Hit], expected: list[tuple]) -> None:
    assert [h.memory.id for h in hits] == [e[0] for e in expected]
    for h, (_, score, rec, imp, rel) in zip(hits, expected):
        assert h.score == pytest.approx(score, abs=1e-6)
        assert h.recency == pytest.approx(rec, abs=1e-6)
        assert h.importance == pytest.approx(imp, abs=1e-6)
        assert h.relevance == pytest.approx(rel, abs=1e-6)


def random_pair(seed, n, dim=16, weights=None, decay=None):
    """The same random stream built twice: as a MemoryStream and as a Reference."""
    rng = np.random.default_rng(seed)
    weights = weights or tuple(float(w) for w in rng.uniform(0.2, 2.0, 3))
    decay = decay or float(rng.uniform(0.9, 0.999))
    stream, ref = MemoryStream(dim=dim, weights=weights, decay=decay), Reference(weights, decay)
    created = np.sort(rng.uniform(0, 3 * 86400, n))
    for i in range(n):
        v = rng.normal(size=dim).astype(np.float32)
        imp = int(rng.integers(1, 11))
        stream.add(f"memory {i}", v, importance=imp, created=float(created[i]))
        ref.add(v, imp, float(created[i]))
    return stream, ref, rng


# -- retrieval against the reference ----------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dim", [16, 512])
def test_retrieve_matches_brute_force(seed, dim):
    n = [1, 2, 7, 50, 200, 333, 64, 120][seed]
    stream, ref, rng = random_pair(seed, n, dim)
    now = 3 * 86400.0
    for _ in range(6):  # each retrieval refreshes what it returns, changing the next one
        now += float(rng.uniform(0, 7200))
        k = int(rng.integers(1, n + 6))
        query = rng.normal(size=dim).astype(np.float32)
        assert_same(stream.retrieve(query, k=k, now=now), ref.retrieve(query, k, now))
    assert [m.last_accessed for m in stream] == ref.accessed


@pytest.mark.parametrize("seed", range(4))
def test_duplicated_embeddings_match_brute_force(seed):
    """Repeated observations share one stored row; retrieval still scores each memory."""
    rng = np.random.default_rng(100 + seed)
    dim, n = 24, [30, 90, 200, 400][seed]
    weights = (1.0, 0.7, 1.3)
    stream, ref = MemoryStream(dim, weights, 0.99), Reference(weights, 0.99)
    pool = rng.normal(size=(max(2, n // 5), dim)).astype(np.float32)
    for i in range(n):
        v = pool[rng.integers(len(pool))] if rng.random() < 0.6 else rng.normal(size=dim)
        imp, t = int(rng.integers(1, 11)), float(rng.uniform(0, 86400))
        stream.add(str(i), v, importance=imp, created=t)
        ref.add(v, imp, t)
    assert stream.index.ntotal < n
    now = 2 * 86400.0
    for _ in range(4):
        q = rng.normal(size=dim)
        assert_same(stream.retrieve(q, k=12, now=now), ref.retrieve(q, 12, now))
        now += 600.0
    assert [m.last_accessed for m in stream] == ref.accessed


def test_every_memory_just_accessed():
    stream, ref, rng = random_pair(21, 30)
    q0 = rng.normal(size=16)
    stream.retrieve(q0, k=30, now=5e5)  # touches all: recency is flat afterwards
    ref.retrieve(q0, 30, 5e5)
    q = rng.normal(size=16)
    hits = stream.retrieve(q, k=7, now=5e5)
    assert {h.recency for h in hits} == {CONSTANT_TERM}
    assert_same(hits, ref.retrieve(q, 7, 5e5))


def test_ties_do_not_depend_on_how_the_stream_grew(tmp_path):
    rng = np.random.default_rng(5)
    bed = rng.normal(size=384)
    grown = MemoryStream(dim=384, weights=(0.0, 0.0, 1.0))
    for i in range(300):
        grown.add(str(i), bed if i % 4 == 0 else rng.normal(size=384), importance=3, created=0.0)
    grown.save(tmp_path / "s")
    q = rng.normal(size=384)
    loaded = MemoryStream.load(tmp_path / "s")
    a, b = grown.retrieve(q, k=300, now=0.0), loaded.retrieve(q, k=300, now=0.0)
    assert [(h.memory.id, h.score) for h in a] == [(h.memory.id, h.score) for h in b]
    beds = [h for h in a if h.memory.id % 4 == 0]
    assert len({h.relevance for h in beds}) == 1


def test_k_larger_than_stream_returns_all():
    stream, ref, rng = random_pair(1, 5)
    q = rng.normal(size=16)
    hits = stream.retrieve(q, k=100, now=4e5)
    assert len(hits) == 5
    assert_same(hits, ref.retrieve(q, 100, 4e5))


def test_single_memory_scores_constant_terms():
    stream = MemoryStream(dim=3, weights=(1.0, 2.0, 3.0))
    stream.add("alone", [1, 0, 0], importance=4, created=0.0)
    (hit,) = stream.retrieve([0, 1, 0], k=10, now=100.0)
    assert (hit.memory.id, hit.recency, hit.importance, hit.relevance) == (0, 0.5, 0.5, 0.5)
    assert hit.score == pytest.approx(3.0)


def test_equal_importances_and_equal_recency():
    rng = np.random.default_rng(3)
    stream, ref = MemoryStream(dim=8), Reference((1.0, 1.0, 1.0), 0.995)
    for i in range(20):  # all created at the same time, all rated 6
        v = rng.normal(size=8)
        stream.add(str(i), v, importance=6, created=500.0)
        ref.add(v, 6, 500.0)
    q = rng.normal(size=8)
    hits = stream.retrieve(q, k=5, now=500.0)
    assert {(h.recency, h.importance) for h in hits} == {(0.5, 0.5)}
    assert_same(hits, ref.retrieve(q, 5, 500.0))
    cos = stream.embeddings() @ (q / np.linalg.norm(q)).astype(np.float32)
    assert [h.memory.id for h in hits] == list(np.argsort(-cos)[:5])


def test_ties_rank_newer_first():
    stream = MemoryStream(dim=4)
    for _i in range(6):
        stream.add("the bed is idle", [1, 1, 0, 0], importance=3, created=0.0)
    stream.add("other", [0, 0, 1, 0], importance=3, created=0.0)
    hits = stream.retrieve([1, 1, 0, 0], k=4, now=0.0)
    assert [h.memory.id for h in hits] == [5, 4, 3, 2]
    assert len({h.score for h in hits}) == 1


@pytest.mark.parametrize("dim", [16, 384, 512])
def test_repeated_memories_tie_exactly(dim):
    """Identical memories ("the bed is idle" seen again) get bit-equal scores, whatever
    their position: the order among them is by id, never by floating-point noise."""
    rng = np.random.default_rng(dim)
    stream = MemoryStream(dim=dim, weights=(0.0, 0.0, 1.0))
    bed = rng.normal(size=dim)
    for i in range(23):
        repeat = i % 3 != 0
        stream.add(
            "the bed is idle" if repeat else "other", bed if repeat else rng.normal(size=dim), importance=3, created=0.0
        )
    hits = stream.retrieve(rng.normal(size=dim), k=23, now=0.0)
    repeats = [h for h in hits if h.memory.text == "the bed is idle"]
    assert len({h.score for h in repeats}) == 1
    ids = [h.memory.id for h in repeats]
    assert ids == sorted(ids, reverse=True)
    start = hits.index(repeats[0])
    assert hits[start : start + len(repeats)] == repeats  # no other memory in between


def test_ties_at_the_cut_keep_the_newest():
    stream = MemoryStream(dim=2, weights=(0.0, 1.0, 0.0))
    for i, imp in enumerate([9, 5, 5, 5, 5, 1, 5]):
        stream.add(str(i), [1, 0], importance=imp, created=0.0)
    assert [h.memory.id for h in stream.retrieve([1, 0], k=3, now=0.0)] == [0, 6, 4]


def test_retrieval_refreshes_recency():
    stream = MemoryStream(dim=2)
    a = stream.add("a", [1, 0], importance=5, created=0.0)
    b = stream.add("b", [0, 1], importance=5, created=0.0)
    held = stream[a]
    (first,) = stream.retrieve([1, 0], k=1, now=3600.0)
    assert first.memory.id == a
    assert held.last_accessed == 3600.0 and stream[b].last_accessed == 0.0
    # equally relevant, equally important: without the refresh b (newer) would win
    hits = stream.retrieve([1, 1], k=2, now=7200.0)
    assert [h.memory.id for h in hits] == [a, b]
    assert hits[0].recency == 1.0 and hits[1].recency == 0.0
    assert stream[b].last_accessed == 7200.0


def test_weights_select_one_term():
    stream, _, rng = random_pair(5, 40)
    q = rng.normal(size=16)
    cosine = MemoryStream(dim=16, weights=(0, 0, 1))
    rated = MemoryStream(dim=16, weights=(0, 1, 0))
    for m in stream:
        for s in (cosine, rated):
            s.add(m.text, m.embedding, importance=m.importance, created=m.created)
    cos = stream.embeddings().astype(np.float64) @ (q / np.linalg.norm(q))
    by_cos = sorted(range(40), key=lambda i: (-cos[i], -i))
    assert [h.memory.id for h in cosine.retrieve(q, k=40, now=1e6)] == by_cos
    imp = stream.importances()
    by_imp = sorted(range(40), key=lambda i: (-imp[i], -i))
    assert [h.memory.id for h in rated.retrieve(q, k=40, now=1e6)] == by_imp


def test_empty_stream_and_zero_k():
    stream = MemoryStream(dim=4)
    assert stream.retrieve([1, 0, 0, 0], k=5, now=0.0) == []
    assert stream.retrieve_many([[1, 0, 0, 0]] * 2, k=5, now=0.0) == [[], []]
    stream.add("x", [1, 0, 0, 0], importance=1, created=0.0)
    assert stream.retrieve([1, 0, 0, 0], k=0, now=9.0) == []
    assert stream[0].last_accessed == 0.0


# -- retrieve_many ----------------------------------------------------------------------


def test_retrieve_many_equals_retrieve_on_the_same_stream(tmp_path):
    stream, _, rng = random_pair(11, 150, dim=32)
    stream.retrieve(rng.normal(size=32), k=20, now=3 * 86400.0)  # vary last_accessed
    stream.save(tmp_path / "s")
    queries = rng.normal(size=(7, 32)).astype(np.float32)
    now = 3 * 86400.0 + 5000.0
    many = stream.retrieve_many(queries, k=9, now=now)
    singles = [MemoryStream.load(tmp_path / "s").retrieve(q, k=9, now=now) for q in queries]
    for got, want in zip(many, singles):
        assert [(h.memory.id, h.score, h.recency, h.importance, h.relevance) for h in got] == [
            (h.memory.id, h.score, h.recency, h.importance, h.relevance) for h in want
        ]
    touched = {h.memory.id for hits in many for h in hits}
    assert {m.id for m in stream if m.last_accessed == now} == touched


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_a_branch_is_the_stream_at_its_mark_and_shares_nothing(tmp_path, index):
    """`branch(mark)` is the stream as it was at `mark` (what run-ahead's copies start from),
    whatever was added or retrieved since; adding to or retrieving from either leaves the
    other as it was."""
    stream, _, rng = random_pair(5, 120, dim=16)
    if index == "hnsw":
        twin = MemoryStream(dim=16, index="hnsw")
        for m in stream:
            twin.add(m.text, m.embedding, importance=m.importance, created=m.created)
        stream = twin
    stream.retrieve(rng.normal(size=16), k=10, now=86400.0)
    mark = stream.mark()
    stream.save(tmp_path / "then")  # the stream at the mark, another way
    stream.add("later", rng.normal(size=16), importance=9, created=90000.0)
    stream.retrieve(rng.normal(size=16), k=10, now=90000.0)
    branch = stream.branch(mark)
    then = MemoryStream.load(tmp_path / "then")
    assert len(branch) == len(then) == 120 and branch.index_kind == index
    assert branch.texts() == then.texts() and branch.kinds() == then.kinds()
    assert np.array_equal(branch.last_accessed(), then.last_accessed())
    assert np.array_equal(branch.embeddings(), then.embeddings())
    query = rng.normal(size=16)
    got, want = branch.retrieve(query, k=8, now=95000.0), then.retrieve(query, k=8, now=95000.0)
    assert [(h.memory.id, h.score) for h in got] == [(h.memory.id, h.score) for h in want]
    before = (len(stream), stream.last_accessed().copy())
    branch.add("only in the branch", rng.normal(size=16), importance=3, created=96000.0)
    branch.retrieve(rng.normal(size=16), k=50, now=97000.0)
    assert (len(stream), stream.texts()[-1]) == (121, "later")
    assert np.array_equal(stream.last_accessed(), before[1])
    stream.add("only in the stream", rng.normal(size=16), importance=3, created=98000.0)
    assert branch.texts()[-1] == "only in the branch" and len(branch) == 121


# -- text queries -----------------------------------------------------------------------


def test_text_queries_through_an_embedder():
    embedder = CachedEmbedder(LexicalEmbedder())
    stream = MemoryStream(embedder=embedder)
    assert stream.dim == 512 and stream.embedder_name == "lexical-512"
    for text in [
        "Isabella is throwing a party at the cafe",
        "the bed is idle",
        "Klaus is writing a paper",
        "the bed is idle",
    ]:
        stream.add(text, importance=5, created=0.0)
    hits = stream.retrieve("who is throwing a party?", k=1, now=0.0)
    assert hits[0].memory.text == "Isabella is throwing a party at the cafe"
    vec = LexicalEmbedder().embed(["the bed"])[0]
    twin = MemoryStream(dim=512)
    for m in stream:
        twin.add(m.text, m.embedding, importance=m.importance, created=m.created)
    assert [h.memory.id for h in stream.retrieve("the bed", k=4, now=10.0)] == [
        h.memory.id for h in twin.retrieve(vec, k=4, now=10.0)
    ]
    assert (embedder.misses, embedder.hits) == (5, 1)  # 3 distinct memories, 2 queries


class Elsewhere(LexicalEmbedder):
    """Lexical rows computed "elsewhere": `submit` returns before they are in, and they
    come only when waited for; `waited` counts the calls waited for."""

    def __init__(self) -> None:
        super().__init__()
        self.waited = 0

    def submit(self, texts, soon=False):
        def get():
            self.waited += 1
            return self.embed(texts)

        return Later(get, lambda: False)


def test_memories_whose_embeddings_are_still_coming_are_the_stream_it_would_have_been(tmp_path):
    # A run's memories are embedded in another process: the stream takes a memory at once
    # and its row when first read. Everything read must be as if each row had come at once:
    # ids, the table's order (memories repeat a text; one is given its embedding), hits.
    texts = ["Isabella is throwing a party", "the bed is idle", "Klaus is writing a paper", "the bed is idle"]
    given = LexicalEmbedder().embed(["a cafe opens"])[0]
    embedder = CachedEmbedder(Elsewhere())
    late, now = MemoryStream(embedder=embedder), MemoryStream(embedder=CachedEmbedder(LexicalEmbedder()))
    for stream in (late, now):
        ids = [stream.add(t, importance=i + 1, created=float(i)) for i, t in enumerate(texts)]
        assert ids == [0, 1, 2, 3] and stream[2].text == texts[2] and len(stream) == 4
    assert embedder.inner.waited == 0  # nothing read a row yet
    for stream in (late, now):
        stream.add("a cafe opens", given, importance=3, created=5.0)  # after the others, in the table too
        stream.add("the party is at five", importance=9, created=6.0)
    assert np.array_equal(late.distinct_rows(), now.distinct_rows())
    assert embedder.inner.waited == 4  # each distinct text's call, once
    query = ["who is throwing a party?", "the bed"]
    assert [[(h.memory.id, h.score) for h in hits] for hits in late.retrieve_many(query, k=4, now=9.0)] == [
        [(h.memory.id, h.score) for h in hits] for hits in now.retrieve_many(query, k=4, now=9.0)
    ]
    late.save(str(tmp_path / "late"))
    assert np.array_equal(MemoryStream.load(str(tmp_path / "late")).embeddings(), now.embeddings())


def test_text_without_embedder_is_refused():
    stream = MemoryStream(dim=4)
    with pytest.raises(ValueError, match="no embedder"):
        stream.add("no vector", importance=3, created=0.0)
    stream.add("v", [1, 0, 0, 0], importance=3, created=0.0)
    with pytest.raises(ValueError, match="no embedder"):
        stream.retrieve("a text", k=1, now=0.0)
    with pytest.raises(ValueError, match="dim or an embedder"):
        MemoryStream()


# -- records, reading and validation ----------------------------------------------------


def test_memory_records():
    stream = MemoryStream(dim=2)
    a = stream.add("saw Klaus", [3, 4], importance=2, created=10.0)
    b = stream.add("Klaus likes papers", [0, 1], importance=8, created=20.0, kind="reflection", links=[a])
    m = stream[b]
    assert isinstance(m, Memory) and m == stream[b] and m != stream[a]
    assert (m.id, m.text, m.kind, m.created, m.last_accessed, m.importance, m.links) == (
        1,
        "Klaus likes papers",
        "reflection",
        20.0,
        20.0,
        8,
        (0,),
    )
    np.testing.assert_allclose(stream[a].embedding, [0.6, 0.8], atol=1e-7)
    assert [x.id for x in stream] == [0, 1] and len(stream) == 2
    assert stream.texts() == ["saw Klaus", "Klaus likes papers"]
    assert stream.kinds() == ["observation", "reflection"]
    assert stream[a].to_dict()["links"] == []
    with pytest.raises(IndexError):
        stream[2]
    assert stream.index.ntotal == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"importance": 0}, "importance"),
        ({"importance": 11}, "importance"),
        ({"importance": 5.0}, "importance"),
        ({"importance": True}, "importance"),
        ({"importance": "5"}, "importance"),
        ({"created": float("nan")}, "created"),
        ({"links": [1]}, "links"),
        ({"links": [-1]}, "links"),
        ({"embedding": [1, 0]}, "shape"),
        ({"embedding": [0, 0, 0]}, "non-zero"),
        ({"embedding": [1, float("inf"), 0]}, "finite"),
        ({"kind": ""}, "kind"),
    ],
)
def test_add_validates(kwargs, message):
    stream = MemoryStream(dim=3)
    stream.add("first", [1, 0, 0], importance=1, created=0.0)
    args = {"embedding": [0, 1, 0], "importance": 5, "created": 1.0, **kwargs}
    with pytest.raises(ValueError, match=message):
        stream.add("second", **args)
    assert len(stream) == 1 and stream.index.ntotal == 1


def test_settings_are_validated():
    with pytest.raises(ValueError, match="weights"):
        MemoryStream(dim=2, weights=(1, 1))
    with pytest.raises(ValueError, match="decay"):
        MemoryStream(dim=2, decay=1.5)
    with pytest.raises(ValueError, match="dim"):
        MemoryStream(dim=0)
    with pytest.raises(ValueError, match="k must"):
        MemoryStream(dim=2).retrieve([1, 0], k=-1, now=0.0)


# -- persistence ------------------------------------------------------------------------


def test_save_load_round_trip(tmp_path):
    stream, _, rng = random_pair(7, 80, dim=24)
    stream.add("insight", rng.normal(size=24), importance=9, created=3e5, kind="reflection", links=[3, 4])
    stream.retrieve(rng.normal(size=24), k=10, now=3e5)
    stream.save(tmp_path / "mem")
    assert sorted(os.listdir(tmp_path / "mem")) == ["accessed.npy", "embeddings.f32", "manifest.json", "memories.jsonl"]
    loaded = MemoryStream.load(tmp_path / "mem")
    assert (loaded.dim, loaded.weights, loaded.decay) == (24, stream.weights, stream.decay)
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in stream]
    assert np.array_equal(loaded.embeddings(), stream.embeddings())
    assert loaded.index.ntotal == 81
    q = rng.normal(size=24)
    got, want = loaded.retrieve(q, k=15, now=4e5), stream.retrieve(q, k=15, now=4e5)
    assert [(h.memory.id, h.score) for h in got] == [(h.memory.id, h.score) for h in want]


def test_interrupted_save_leaves_a_consistent_stream(tmp_path):
    stream, _, rng = random_pair(8, 5, dim=8)
    stream.save(tmp_path / "mem")
    shutil.copy(tmp_path / "mem" / "manifest.json", tmp_path / "old.json")
    stream.add("later", rng.normal(size=8), importance=2, created=9e5)
    stream.save(tmp_path / "mem")
    # a crash before the manifest was replaced: appended rows and records, old manifest
    shutil.copy(tmp_path / "old.json", tmp_path / "mem" / "manifest.json")
    with open(tmp_path / "mem" / "memories.jsonl", "ab") as f:
        f.write(b'{"id": 6, "text": "torn')  # and a torn last line
    loaded = MemoryStream.load(tmp_path / "mem")
    assert len(loaded) == 5
    assert np.array_equal(loaded.embeddings(), stream.embeddings()[:5])
    # saving the loaded stream again cuts the crashed tail off before appending
    loaded.add("again", rng.normal(size=8), importance=3, created=9e5)
    loaded.save(tmp_path / "mem")
    again = MemoryStream.load(tmp_path / "mem")
    assert [m.to_dict() for m in again] == [m.to_dict() for m in loaded]
    assert np.array_equal(again.embeddings(), loaded.embeddings())


def test_saving_again_appends(tmp_path):
    stream, _, rng = random_pair(9, 40, dim=16)
    stream.add("dup", stream[3].embedding, importance=4, created=1e6)  # shares row 3
    path = tmp_path / "mem"
    stream.save(path)
    rows, records = (path / "embeddings.f32").read_bytes(), (path / "memories.jsonl").read_bytes()
    assert len(rows) == 40 * 16 * 4
    for i in range(30):
        stream.add(f"new {i}", rng.normal(size=16), importance=5, created=2e6 + i)
    stream.retrieve(rng.normal(size=16), k=5, now=3e6)
    stream.save(path)
    grown = (path / "embeddings.f32").read_bytes()
    assert len(grown) == 70 * 16 * 4 and grown[: len(rows)] == rows
    assert (path / "memories.jsonl").read_bytes().startswith(records)
    loaded = MemoryStream.load(path)
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in stream]
    assert np.array_equal(loaded.embeddings(), stream.embeddings())
    q = rng.normal(size=16)
    assert [(h.memory.id, h.score) for h in loaded.retrieve(q, k=8, now=4e6)] == [
        (h.memory.id, h.score) for h in stream.retrieve(q, k=8, now=4e6)
    ]


def test_schema_1_still_loads(tmp_path):
    stream, _, rng = random_pair(10, 12, dim=8)
    stream.retrieve(rng.normal(size=8), k=3, now=4e5)
    path = tmp_path / "v1"
    path.mkdir()
    np.save(path / "embeddings.npy", stream.embeddings())
    state = {
        "schema": 1,
        "dim": 8,
        "weights": list(stream.weights),
        "decay": stream.decay,
        "embedder": None,
        "count": 12,
        "memories": [m.to_dict() for m in stream],
    }
    (path / "memories.json").write_text(json.dumps(state))
    loaded = MemoryStream.load(path)
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in stream]
    assert np.array_equal(loaded.embeddings(), stream.embeddings())
    loaded.save(path)  # written again as schema 2
    assert json.loads((path / "manifest.json").read_text())["schema"] == 2
    assert len(MemoryStream.load(path)) == 12


def test_load_refuses_bad_files(tmp_path):
    with pytest.raises(RunError, match="cannot read"):
        MemoryStream.load(tmp_path / "missing")
    stream = MemoryStream(embedder=LexicalEmbedder(dim=8))
    stream.add("x", importance=1, created=0.0)
    stream.save(tmp_path / "s")
    with pytest.raises(RunError, match="lexical-8"):
        MemoryStream.load(tmp_path / "s", embedder=LexicalEmbedder(dim=16))
    path = tmp_path / "s" / "manifest.json"
    path.write_text(path.read_text().replace('"schema": 2', '"schema": 99'))
    with pytest.raises(RunError, match="schema 99"):
        MemoryStream.load(tmp_path / "s")


# -- a large stream ----------------------------------------------------------------------


def test_ten_thousand_memories_rank_as_the_formula_says():
    """10,000 memories are scored in several blocks; the top 10 are the formula's, worked out
    here in float64 numpy. (How fast adds and retrievals are is benchmarks/retrieval.py's.)"""
    rng = np.random.default_rng(0)
    n, now = 10_000, 1e4
    vectors = rng.normal(size=(n, 512)).astype(np.float32)
    stream = MemoryStream(dim=512)
    for i, v in enumerate(vectors):
        stream.add("m", v, importance=1 + i % 10, created=float(i))
    hits = stream.retrieve(vectors[0], k=10, now=now)
    unit = vectors.astype(np.float64) / np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    terms = [
        Reference.norm(list(values))
        for values in (stream.decay ** ((now - np.arange(n)) / 3600), 1.0 + np.arange(n) % 10, unit @ unit[0])
    ]
    scores = sum(w * np.array(t) for w, t in zip(stream.weights, terms))
    best = sorted(range(n), key=lambda i: (-scores[i], -i))[:10]
    assert [h.memory.id for h in hits] == best
    assert [h.score for h in hits] == pytest.approx([scores[i] for i in best], abs=1e-6)


@pytest.mark.parametrize("index", ["exact", "hnsw"])
def test_a_large_streams_helper_threads_change_nothing_and_end_when_it_is_closed(monkeypatch, index):
    """A search over a large stream splits it between helper threads that the stream owns:
    the hits are those found on one thread, and `close` ends the threads."""
    from smallville.memory import scoring
    from smallville.memory.approx import hnsw

    from conftest import smallville_threads

    rng = np.random.default_rng(5)
    stream = MemoryStream(dim=16, index=index)
    for i in range(40):
        stream.add(f"m{i}", rng.normal(size=16), importance=1 + i % 10, created=60.0 * i)
    query = rng.normal(size=16)
    alone = [(h.memory.id, h.score) for h in stream.branch().retrieve(query, k=10, now=4000.0)]
    before = smallville_threads()
    monkeypatch.setattr(scoring, "PARALLEL_ROWS", 8)  # "large" from 8 rows on
    monkeypatch.setattr(scoring, "threads", lambda: 2)
    monkeypatch.setattr(hnsw, "threads", lambda: 2)
    helped = [(h.memory.id, h.score) for h in stream.retrieve(query, k=10, now=4000.0)]
    assert smallville_threads() - before  # the search had helpers
    if index == "exact":
        assert helped == alone  # the very same scores
    stream.close()
    assert smallville_threads() - before == set()
