"""The approximate path (index="hnsw"): a threshold search over an HNSW index and ordered
recency/importance structures, checked against the exact path."""

from __future__ import annotations

import numpy as np
import pytest

from smallville.memory import MemoryStream
from smallville.memory.approx import ordered


def twins(seed, n, dim=16, dup=0.0, centres=None, shuffled=True, **hnsw):
    """The same random stream as an exact and an hnsw MemoryStream."""
    rng = np.random.default_rng(seed)
    weights = tuple(float(w) for w in rng.uniform(0.3, 1.5, 3))
    exact = MemoryStream(dim, weights, 0.995)
    approx = MemoryStream(dim, weights, 0.995, index="hnsw", **hnsw)
    topics = rng.normal(size=(centres or 1, dim))
    times = rng.uniform(0, 30 * 86400, n)
    if not shuffled:
        times.sort()
    for i in range(n):
        if i and rng.random() < dup:
            v = exact[int(rng.integers(i))].embedding
        elif centres:
            v = topics[rng.integers(centres)] + 0.6 * rng.normal(size=dim)
        else:
            v = rng.normal(size=dim)
        imp = int(rng.integers(1, 11))
        for s in (exact, approx):
            s.add(f"m{i}", v, importance=imp, created=float(times[i]))
    return exact, approx, rng, topics


@pytest.fixture
def one_faiss_thread():
    """FAISS on one thread, so that two graphs built from the same rows are the same."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


def ids(hits):
    return [h.memory.id for h in hits]


def test_recall_against_exact():
    exact, approx, rng, topics = twins(1, 4000, dim=32, centres=40, dup=0.1)
    now, recall, top1 = 31 * 86400.0, [], 0
    for _ in range(40):
        q = topics[rng.integers(40)] + 0.5 * rng.normal(size=32)
        want, got = exact.retrieve(q, k=10, now=now), approx.retrieve(q, k=10, now=now)
        recall.append(len(set(ids(want)) & set(ids(got))) / 10)
        top1 += ids(want)[0] == ids(got)[0]
        now += 900.0
    assert np.mean(recall) >= 0.95
    assert top1 >= 36


@pytest.mark.parametrize("shuffled", [True, False])
def test_small_stream_matches_exact_through_many_refreshes(monkeypatch, shuffled):
    """With a search as wide as the stream, HNSW misses nothing: hits, their terms and
    every refresh equal the exact path's, through compactions and out-of-order times.
    (Relevance comes from FAISS's inner products, which differ from numpy's in the last
    bits of float32: terms agree to 1e-6.)"""
    monkeypatch.setattr(ordered, "SLACK", 4)
    exact, approx, rng, _ = twins(2, 300, dup=0.2, shuffled=shuffled, ef_search=512)
    now = 31 * 86400.0
    for step in range(60):
        q = rng.normal(size=16)
        k = int(rng.integers(1, 25))
        if step == 30:
            now -= 7200.0  # a retrieval in the past: one level re-sorts
        want, got = exact.retrieve(q, k=k, now=now), approx.retrieve(q, k=k, now=now)
        assert ids(got) == ids(want)
        for g, w in zip(got, want):
            assert (g.recency, g.importance) == pytest.approx((w.recency, w.importance), abs=1e-9)
            assert (g.score, g.relevance) == pytest.approx((w.score, w.relevance), abs=1e-6)
        assert [m.last_accessed for m in approx] == [m.last_accessed for m in exact]
        now += float(rng.uniform(0, 3600))


def test_refresh_moves_memories_to_the_front():
    stream = MemoryStream(dim=2, weights=(1.0, 0.0, 0.0), index="hnsw")
    for i in range(50):
        stream.add(str(i), [1.0, i / 50], importance=5, created=float(i))
    (first,) = stream.retrieve([1, 0], k=1, now=100.0)
    assert first.memory.id == 49  # most recent
    stream.retrieve_many([[1, 0]], k=1, now=100.0)
    assert stream[49].last_accessed == 100.0
    hits = stream.retrieve([0, 1], k=3, now=200.0)
    assert ids(hits)[0] == 49 and hits[0].recency == 1.0


def test_retrieve_many_and_duplicates():
    exact, approx, rng, _ = twins(3, 500, dup=0.5, ef_search=1024)
    qs = rng.normal(size=(4, 16))
    want = exact.retrieve_many(qs, k=6, now=4e6)
    got = approx.retrieve_many(qs, k=6, now=4e6)
    assert [ids(h) for h in got] == [ids(h) for h in want]
    assert approx.index.ntotal < 500


def test_save_load_keeps_the_index_kind(tmp_path):
    _, approx, rng, _ = twins(4, 200, ef_search=512)
    approx.retrieve(rng.normal(size=16), k=5, now=3e6)
    approx.save(tmp_path / "h")
    loaded = MemoryStream.load(tmp_path / "h")
    assert loaded.index_kind == "hnsw" and len(loaded) == 200
    q = rng.normal(size=16)
    assert ids(loaded.retrieve(q, k=8, now=4e6)) == ids(approx.retrieve(q, k=8, now=4e6))


def test_settings_are_checked():
    with pytest.raises(ValueError, match="non-negative"):
        MemoryStream(dim=4, weights=(1, -1, 1), index="hnsw")
    with pytest.raises(ValueError, match="index must be"):
        MemoryStream(dim=4, index="ivf")
    stream = MemoryStream(dim=4, index="hnsw")
    assert stream.retrieve([1, 0, 0, 0], k=3, now=0.0) == []
    stream.add("one", [1, 0, 0, 0], importance=2, created=0.0)
    (hit,) = stream.retrieve([0, 1, 0, 0], k=3, now=10.0)
    assert (hit.memory.id, hit.recency, hit.importance, hit.relevance) == (0, 0.5, 0.5, 0.5)


def test_each_index_is_its_own_retriever():
    """The stream hands its embeddings to the retriever its index names: the exact one keeps
    them in a flat FAISS index, the HNSW one (smallville.memory.approx) in a graph."""
    import faiss

    from smallville.memory.approx import HNSWRetriever
    from smallville.memory.retriever import ExactRetriever

    exact, approx = MemoryStream(dim=4), MemoryStream(dim=4, index="hnsw")
    assert isinstance(exact._retriever, ExactRetriever) and isinstance(approx._retriever, HNSWRetriever)
    assert isinstance(exact.index, faiss.IndexFlatIP) and isinstance(approx.index, faiss.IndexHNSWFlat)
    assert (exact.index_kind, approx.index_kind) == ("exact", "hnsw")


def test_cosines_reused_across_rounds_are_fresh_cosines():
    """A search that reads the lists several times (small ef, large k) reuses the cosines
    of earlier rounds: every hit's relevance is still the same affine map of its cosine,
    and its recency and importance terms equal the exact path's."""
    exact, approx, rng, topics = twins(5, 3000, dim=16, centres=20, dup=0.1, ef_search=8)
    now = 31 * 86400.0
    for _ in range(10):
        q = topics[rng.integers(20)] + 0.5 * rng.normal(size=16)
        want = {h.memory.id: h for h in exact.retrieve(q, k=60, now=now)}
        got = approx.retrieve(q, k=60, now=now)
        assert len(got) == 60
        unit = q / np.linalg.norm(q)
        cos = np.array([float(np.dot(h.memory.embedding, unit)) for h in got])
        rel = np.array([h.relevance for h in got])
        a, b = np.polyfit(cos, rel, 1)
        assert np.abs(a * cos + b - rel).max() < 1e-6
        for g in got:
            w = want.get(g.memory.id)
            if w is not None:
                assert (g.recency, g.importance) == pytest.approx((w.recency, w.importance), abs=1e-9)
        now += 900.0


def test_recall_at_least_99_in_100_on_a_20k_clustered_stream(one_faiss_thread):
    """384-dim sentence-like embeddings around 300 topics, 10% repeats, recency by order of
    arrival, importances 1-10: the default HNSW settings find >= 99% of the exact top 10."""
    rng = np.random.default_rng(20)
    n, dim = 20_000, 384
    topics = rng.standard_normal((300, dim), dtype=np.float32)
    x = topics[rng.integers(300, size=n)] + 0.8 * rng.standard_normal((n, dim), dtype=np.float32)
    repeats = np.flatnonzero(rng.random(n) < 0.1)[1:]
    x[repeats] = x[(rng.random(len(repeats)) * repeats).astype(np.int64)]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    exact, approx = MemoryStream(dim), MemoryStream(dim, index="hnsw")
    for i in range(n):
        for s in (exact, approx):
            s.add(
                "m",
                x[i],
                importance=int(rng.integers(1, 11)) if s is exact else exact[i].importance,
                created=float(i) * 60,
            )
    now, found = n * 60.0 + 3600, []
    queries = topics[rng.integers(300, size=100)] + rng.standard_normal((100, dim), dtype=np.float32)
    for q in queries / np.linalg.norm(queries, axis=1, keepdims=True):
        exact.columns.accessed[:n] = approx.columns.accessed[:n]  # the same state: compare this query only
        want = set(ids(exact.retrieve(q, k=10, now=now)))
        found.append(len(want & set(ids(approx.retrieve(q, k=10, now=now)))) / 10)
        now += 60
    assert np.mean(found) >= 0.99, np.mean(found)


def test_least_cosine_does_not_depend_on_the_graph(monkeypatch):
    """The least cosine normalises every relevance, so a miss of it shifts every score.
    It comes from k-means lists of the rows, not from the graph: through a sparse graph
    (M=6) whose negated-query search found it for 19 of 30 queries, the hits' relevance
    terms equal the exact ones for nearly every query and are close for all."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "SCAN_ROWS", 0)  # the lists, not the scan of small streams
    exact, approx, rng, topics = twins(5, 3000, dim=32, centres=20, hnsw_m=6, ef_construction=8)
    now, equal = 31 * 86400.0, 0
    for _ in range(30):
        q = topics[rng.integers(20)] + 0.5 * rng.normal(size=32)
        want = {h.memory.id: h.relevance for h in exact.retrieve(q, k=10, now=now)}
        got = {h.memory.id: h.relevance for h in approx.retrieve(q, k=10, now=now)}
        errors = [abs(got[m] - want[m]) for m in got.keys() & want.keys()]
        assert errors and max(errors) < 0.03
        equal += max(errors) < 1e-6  # equal, but for float32 rounding
        now += 900.0
    assert equal >= 26, equal


def test_least_cosine_found_among_rows_added_after_a_search(monkeypatch):
    """Rows added after the lists were trained go into them (and past 4x growth the lists
    are trained again), so a least cosine that only new rows hold is still found: the
    relevance terms of the hits equal the exact ones."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "SCAN_ROWS", 0)
    rng = np.random.default_rng(8)
    exact, approx = MemoryStream(16), MemoryStream(16, index="hnsw")
    q = rng.normal(size=16)
    q /= np.linalg.norm(q)

    def add(vectors, t0):
        for i, v in enumerate(vectors):
            for s in (exact, approx):
                s.add("m", v, importance=int(1 + i % 10), created=t0 + 60.0 * i)

    def check(now):
        want = {h.memory.id: h.relevance for h in exact.retrieve(q, k=10, now=now)}
        got = {h.memory.id: h.relevance for h in approx.retrieve(q, k=10, now=now)}
        assert got.keys() & want.keys()
        for m in got.keys() & want.keys():
            assert got[m] == pytest.approx(want[m], abs=1e-6)  # float32 rounding

    add(rng.normal(size=(400, 16)) + 2 * q, 0.0)  # every row leans towards q
    check(1e5)
    trained = approx._retriever.far.trained_at
    add(-q + 0.05 * rng.normal(size=(50, 16)), 1e5)  # the least cosines, added later
    check(2e5)
    assert approx._retriever.far.trained_at == trained  # taken in, not trained again
    add(rng.normal(size=(1500, 16)) + 2 * q, 2e5)
    add(-q + 0.01 * rng.normal(size=(5, 16)), 4e5)
    check(5e5)
    assert approx._retriever.far.trained_at == len(approx.columns.table)  # 4x grown: trained again


def test_same_result_with_and_without_the_helper_thread(monkeypatch, one_faiss_thread):
    """The negated query's search runs on a helper thread where there are two or more
    CPUs; without one it runs first. The hits are the same either way."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "SCAN_ROWS", 0)

    def run(helper):
        monkeypatch.setattr(hnsw, "_helper", lambda: helper)
        exact, approx, rng, topics = twins(6, 3000, dim=32, centres=30, dup=0.1, hnsw_m=8, ef_construction=16)
        now, out = 31 * 86400.0, []
        for _ in range(20):
            q = topics[rng.integers(30)] + 0.5 * rng.normal(size=32)
            out.append([(h.memory.id, h.score) for h in approx.retrieve(q, k=10, now=now)])
            now += 900.0
        return out

    assert run(True) == run(False)


def test_a_search_begins_where_the_last_one_ended(monkeypatch):
    """A search that had to read the graph deeper makes the next one begin at that depth;
    after PROBE_EVERY searches in a row that ended in their first round, the next begins
    one step shallower. Recall against the exact path holds throughout."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "FIRST_DEPTH", 16)
    monkeypatch.setattr(hnsw, "EXTRA_LIMIT", 64)
    exact, approx, rng, topics = twins(7, 3000, dim=16, centres=20, dup=0.1)
    searches, nearest = [], approx.columns.table.nearest

    def counted(q, count, ef):  # the depths each search reads
        searches[-1].append(count)
        return nearest(q, count, ef)

    monkeypatch.setattr(approx.columns.table, "nearest", counted)
    now, found = 31 * 86400.0, []
    for _ in range(40):
        q = topics[rng.integers(20)] + 0.5 * rng.normal(size=16)
        searches.append([])
        want = set(ids(exact.retrieve(q, k=10, now=now)))
        found.append(len(want & set(ids(approx.retrieve(q, k=10, now=now)))) / 10)
        now += 900.0
    easy, probes = 0, 0
    for before, after in zip(searches, searches[1:]):
        easy = easy + 1 if len(before) == 1 else 0
        if easy == hnsw.PROBE_EVERY and before[-1] > hnsw.FIRST_DEPTH:
            assert after[0] == max(hnsw.FIRST_DEPTH, before[-1] // hnsw.DEEPER)
            easy, probes = 0, probes + 1
        else:
            assert after[0] == before[-1]
    assert any(len(s) > 1 for s in searches[1:]) and probes >= 1
    assert np.mean(found) >= 0.95


def test_cosines_computed_ahead_change_no_result(monkeypatch, one_faiss_thread):
    """The helper thread computes, during the graph search, the cosines of the recent
    memories the last search's bound selects. A good guess, a poor one and none give
    the same hits and scores."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "SCAN_ROWS", 0)
    monkeypatch.setattr(hnsw, "_helper", lambda: True)
    likely = hnsw.HNSWRetriever._likely

    def run(shift):
        if shift is None:
            monkeypatch.setattr(hnsw.HNSWRetriever, "_likely", lambda *a: None)
        else:
            monkeypatch.setattr(
                hnsw.HNSWRetriever,
                "_likely",
                lambda self, s, need, *a: likely(self, s, None if need is None else need + shift, *a),
            )
        exact, approx, rng, topics = twins(8, 3000, dim=32, centres=30, dup=0.1, hnsw_m=8, ef_construction=16)
        now, out = 31 * 86400.0, []
        for _ in range(20):
            q = topics[rng.integers(30)] + 0.5 * rng.normal(size=32)
            out.append([(h.memory.id, h.score, h.relevance) for h in approx.retrieve(q, k=10, now=now)])
            now += 900.0
        return out

    assert run(None) == run(0.0) == run(-0.5) == run(0.5)


def test_graph_laid_out_by_list_gives_the_same_hits(monkeypatch, one_faiss_thread):
    """When the lists are trained, the graph's entries are laid out list by list (near
    rows near each other in memory, which makes its searches faster), and again when the
    graph has doubled. Searches still answer in rows, and the hits are those of a graph
    left in its first order, for rows added after a layout too."""
    from smallville.memory.approx import hnsw

    monkeypatch.setattr(hnsw, "SCAN_ROWS", 0)
    exact, laid, rng, topics = twins(9, 500, dim=16, centres=20)
    _, plain, _, _ = twins(9, 500, dim=16, centres=20)
    plain.columns.table.reorder = lambda rows: None
    now = 31 * 86400.0

    def same_hits(queries):
        nonlocal now
        for _ in range(queries):
            q = topics[rng.integers(20)] + 0.5 * rng.normal(size=16)
            got = [(h.memory.id, h.score) for h in laid.retrieve(q, k=10, now=now)]
            assert got == [(h.memory.id, h.score) for h in plain.retrieve(q, k=10, now=now)]
            q /= np.linalg.norm(q)
            dist, rows = laid.columns.table.nearest(q, 64, 64)
            assert dist == pytest.approx(laid.columns.table.matrix()[rows] @ q, abs=1e-5)
            now += 900.0

    def grow(count, importance):
        for i in range(count):
            v = topics[rng.integers(20)] + 0.6 * rng.normal(size=16)
            for s in (laid, plain):
                s.add("later", v, importance=importance, created=now + i)

    same_hits(10)
    table = laid.columns.table
    assert sorted(table._entry_rows) == list(range(500))
    assert not np.array_equal(table._entry_rows, np.arange(500))  # laid out anew
    grow(300, 5)  # rows after the layout: numbered as they came
    same_hits(10)
    assert table.laid_out == 500 and table.index.ntotal == 800
    grow(200, 4)  # doubled: laid out again, by the same lists
    same_hits(10)
    assert sorted(table._entry_rows) == list(range(1000))
    assert laid._retriever.far.trained_at == 500
    grow(1100, 3)  # 4x grown: the lists are trained again, the graph laid out again
    same_hits(10)
    assert sorted(table._entry_rows) == list(range(2100))
    assert laid._retriever.far.trained_at == 2100
