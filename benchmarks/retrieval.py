"""Time memory retrieval at 10k, 100k and 1M memories (384 dims, k=10).

    python benchmarks/retrieval.py [--sizes 10000,100000,1000000] [--queries 50] [--quick]

Data: unit vectors around 1,000 random topic centres (sentence embeddings cluster by
topic), 10% of them repeats of earlier rows; importances uniform in 1..10; one memory
created per simulated minute, so recency increases with id. Queries are topic centres
plus noise. `--quick` skips the 1M size (whose HNSW graph takes minutes to build). For
each size it prints p50/p99 of:

- exact: `MemoryStream.retrieve` (ids checked identical to the brute force, per query);
- hnsw: `MemoryStream(index="hnsw")` (recall@10 against the brute force on its own state);
- matvec: the bare `emb @ q` over the same (n, 384) float32 matrix;
- numpy: the formula by brute force in numpy (matvec, power, min-max, full sort);
- python: the formula one memory at a time in Python (above 10k: timed on the first 10k
  memories and scaled linearly to n);

then ratios against the baselines, add throughput, and save/load times.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

# The matvec baseline runs on OpenBLAS, whose worker threads spin for about 0.1 s after
# each call; timed right after it, the next path found one of the 2 cores taken (exact at
# 100k: 1.6-1.8x matvec instead of 1.1-1.2x). Idle threads stop spinning at once with
# this; matvec alone is as fast. Set before numpy loads OpenBLAS.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from smallville.memory import MemoryStream  # noqa: E402

DIM, K, DECAY, WEIGHTS = 384, 10, 0.995, (1.0, 1.0, 1.0)
PY_SAMPLE = 10_000


def make_data(n: int, rng: np.random.Generator):
    centres = rng.standard_normal((1000, DIM), dtype=np.float32)
    x = np.empty((n, DIM), dtype=np.float32)
    for lo in range(0, n, 65536):
        hi = min(n, lo + 65536)
        x[lo:hi] = centres[rng.integers(1000, size=hi - lo)]
        x[lo:hi] += 0.8 * rng.standard_normal((hi - lo, DIM), dtype=np.float32)
    repeats = np.flatnonzero(rng.random(n) < 0.1)
    repeats = repeats[repeats > 0]
    x[repeats] = x[(rng.random(len(repeats)) * repeats).astype(np.int64)]
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    importance = rng.integers(1, 11, size=n)
    created = np.arange(n, dtype=np.float64) * 60.0
    queries = centres[rng.integers(1000, size=4 * 512)] + rng.standard_normal((4 * 512, DIM), dtype=np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    return x, importance, created, queries


def fill(stream: MemoryStream, x, importance, created) -> float:
    """Add every memory; seconds per add."""
    began = time.perf_counter()
    for i in range(len(x)):
        stream.add("m", x[i], importance=int(importance[i]), created=float(created[i]))
    return (time.perf_counter() - began) / len(x)


def brute_force(x, importance, accessed, q, now) -> np.ndarray:
    def norm(v):
        lo, hi = v.min(), v.max()
        return np.full(len(v), 0.5) if hi == lo else (v - lo) / (hi - lo)

    score = (
        WEIGHTS[0] * norm(DECAY ** ((now - accessed) / 3600.0))
        + WEIGHTS[1] * norm(importance.astype(np.float64))
        + WEIGHTS[2] * norm((x @ q).astype(np.float64))
    )
    return np.lexsort((-np.arange(len(x)), -score))[:K]


def python_loop(x, importance, accessed, q, now) -> float:
    """Seconds of the per-memory Python formula over the first PY_SAMPLE memories."""
    m = min(len(x), PY_SAMPLE)
    rows, qs = x[:m].tolist(), q.tolist()
    began = time.perf_counter()
    rec = [DECAY ** ((now - a) / 3600.0) for a in accessed[:m].tolist()]
    rel = [sum(a * b for a, b in zip(qs, r)) for r in rows]
    imp = [float(i) for i in importance[:m].tolist()]
    terms = []
    for vals in (rec, imp, rel):
        lo, hi = min(vals), max(vals)
        terms.append([0.5 if hi == lo else (v - lo) / (hi - lo) for v in vals])
    score = [a + b + c for a, b, c in zip(*terms)]
    sorted(range(m), key=lambda i: (-score[i], -i))[:K]
    return time.perf_counter() - began


def timed(fn) -> tuple[float, object]:
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def pct(times, p) -> float:
    return float(np.percentile(np.asarray(times) * 1e3, p))


def run_size(n: int, nq: int, rng: np.random.Generator, hnsw_args: dict) -> dict:
    x, importance, created, queries = make_data(n, rng)
    out: dict = {"n": n, "times": {}}
    exact = MemoryStream(DIM, WEIGHTS, DECAY)
    out["add_us"] = fill(exact, x, importance, created) * 1e6
    now = float(created.max()) + 3600.0
    t = out["times"]
    t["matvec"], t["exact"], t["numpy"], t["python"], same = [], [], [], [], 0
    for j, q in enumerate(queries[:nq]):
        t["matvec"].append(timed(lambda: x @ q)[0])  # interleaved: same load as exact
        accessed = exact.columns.accessed[:n].copy()
        sec, hits = timed(lambda: exact.retrieve(q, k=K, now=now))
        t["exact"].append(sec)
        sec, want = timed(lambda: brute_force(x, importance, accessed, q, now))
        t["numpy"].append(sec)
        same += [h.memory.id for h in hits] == want.tolist()
        if j < 3:
            t["python"].append(python_loop(x, importance, accessed, q, now) * n / min(n, PY_SAMPLE))
        now += 60.0
    out["exact_same"] = f"{same}/{nq}"
    out["dedup_rows"] = len(exact.columns.table)
    if n >= 1_000_000:
        out.update(save_load(exact, rng))
    del exact
    approx = MemoryStream(DIM, WEIGHTS, DECAY, index="hnsw", **hnsw_args)
    out["hnsw_add_us"] = fill(approx, x, importance, created) * 1e6
    out["hnsw_build_s"], _ = timed(lambda: approx.retrieve(queries[-1], k=K, now=now))
    t["hnsw"], recall = [], []
    for q in queries[nq : 2 * nq]:
        accessed = approx.columns.accessed[:n].copy()
        sec, hits = timed(lambda: approx.retrieve(q, k=K, now=now))
        t["hnsw"].append(sec)
        want = set(brute_force(x, importance, accessed, q, now).tolist())
        recall.append(len(want & {h.memory.id for h in hits}) / K)
        now += 60.0
    out["recall"] = float(np.mean(recall))
    return out


def save_load(stream: MemoryStream, rng) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mem"
        first, _ = timed(lambda: stream.save(path))
        for i in range(1000):
            v = rng.standard_normal(DIM)
            stream.add("late", v, importance=5, created=1e9 + i)
        again, _ = timed(lambda: stream.save(path))
        load, loaded = timed(lambda: MemoryStream.load(path))
        assert len(loaded) == len(stream)
    return {"save_s": first, "save_again_s": again, "load_s": load}


def report(results: list[dict]) -> None:
    print("\n| memories | path | p50 ms | p99 ms | p50 vs matvec | notes |")
    print("|---:|---|---:|---:|---:|---|")
    for r in results:
        t, mv = r["times"], pct(r["times"]["matvec"], 50)
        for name in ("matvec", "exact", "hnsw", "numpy", "python"):
            if not t.get(name):
                continue
            note = {
                "exact": f"ids = brute force: {r['exact_same']}; {r['dedup_rows']:,} distinct rows scanned",
                "hnsw": f"recall@10 {r['recall']:.3f}; first search builds the graph: {r['hnsw_build_s']:.1f} s",
                "python": "timed on 10k, scaled to n" if r["n"] > PY_SAMPLE else "",
            }.get(name, "")
            print(
                f"| {r['n']:,} | {name} | {pct(t[name], 50):.2f} | {pct(t[name], 99):.2f} "
                f"| {pct(t[name], 50) / mv:.2f}x | {note} |"
            )
    print()
    for r in results:
        t = r["times"]
        ex = pct(t["exact"], 50)
        line = (
            f"{r['n']:,}: exact is {ex / pct(t['matvec'], 50):.2f}x matvec, "
            f"{pct(t['numpy'], 50) / ex:.1f}x faster than numpy brute force"
        )
        if t.get("python"):
            line += f", {pct(t['python'], 50) / ex:.0f}x faster than the Python loop"
        line += f"; add {r['add_us']:.1f} us (exact), {r['hnsw_add_us']:.1f} us (hnsw, graph built later)"
        print(line)
        if "save_s" in r:
            print(
                f"{r['n']:,}: save {r['save_s']:.2f} s, save again after 1,000 more "
                f"{r['save_again_s']:.3f} s, load {r['load_s']:.2f} s"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="skip sizes of 1M and more")
    ap.add_argument("--hnsw-m", type=int, default=32)
    ap.add_argument("--ef-construction", type=int, default=64)
    ap.add_argument("--ef-search", type=int, default=64)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    hnsw_args = {"hnsw_m": args.hnsw_m, "ef_construction": args.ef_construction, "ef_search": args.ef_search}
    results = []
    for n in (int(s) for s in args.sizes.split(",")):
        if args.quick and n >= 1_000_000:
            continue
        results.append(run_size(n, min(args.queries, 512), rng, hnsw_args))
        print(f"done {n:,}", file=sys.stderr, flush=True)
    report(results)


if __name__ == "__main__":
    main()
