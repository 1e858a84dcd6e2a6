"""Where the embedded index stops: exact DuckDB search vs LanceDB (flat and IVF-PQ) at 10k-1M vectors.

    .venv/bin/python -m bench.vector_index [--sizes 10000 100000 1000000] [--queries 30] [--out FILE.json]

Synthetic 384-dimensional unit vectors (the bundled model's size), clustered like sentence
embeddings (cluster centres plus noise); queries are perturbed data points. For each size:
median and p95 query latency of top-10 cosine search and recall@10 against exact numpy search,
plus build time (for IVF-PQ: writing the table, training and building the index), for DuckDB
``array_cosine_similarity`` over ``FLOAT[384]`` (what the embedded index does), LanceDB without
an index (flat) and LanceDB IVF-PQ (nprobes 20, refine 10).
DuckDB's ``vss`` (HNSW) extension is fetched from DuckDB's extension server at ``INSTALL``, which
this machine cannot reach, so it is not compared. Needs the ``bench`` extra (lancedb).
Results merge into the output file by size, so sizes can be run one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
K = 10
DIM = 384


def synthetic(n: int, n_queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` clustered unit vectors and ``n_queries`` queries near random ones of them."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(16, n // 500), DIM), dtype=np.float32)
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):  # in slices: 1M x 384 floats is 1.5 GB already
        stop = min(n, start + 100_000)
        block = centres[rng.integers(0, len(centres), stop - start)]
        block += 0.9 * rng.standard_normal(block.shape, dtype=np.float32)
        out[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
    queries = out[rng.integers(0, n, n_queries)] + 0.3 * rng.standard_normal(
        (n_queries, DIM), dtype=np.float32
    )
    return out, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def timed_queries(search, queries: np.ndarray, truth: list[np.ndarray]) -> dict:
    """Latency and recall@10 (a hit counts when its exact similarity reaches the true 10th best)."""
    latencies, recalls = [], []
    search(queries[0])  # warm-up
    for q, scores in zip(queries, truth, strict=True):
        t0 = time.perf_counter()
        got = search(q)
        latencies.append((time.perf_counter() - t0) * 1000)
        cutoff = np.partition(scores, -K)[-K] - 1e-5
        recalls.append(sum(1 for i in got[:K] if scores[i] >= cutoff) / K)
    return {
        "recall_at_10": round(statistics.mean(recalls), 4),
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2),
    }


def _arrow(vectors: np.ndarray, name: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(np.arange(len(vectors), dtype=np.int32)),
            name: pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), DIM),
        }
    )


def bench_duckdb(vectors: np.ndarray, queries: np.ndarray, truth, work: Path) -> dict:
    con = duckdb.connect(str(work / "vectors.duckdb"))
    t0 = time.perf_counter()
    con.execute(f"CREATE TABLE v (id INTEGER, embedding FLOAT[{DIM}])")
    for start in range(0, len(vectors), 200_000):
        con.register("incoming", _arrow(vectors[start : start + 200_000], "embedding"))
        con.execute(f"INSERT INTO v SELECT id + {start}, embedding::FLOAT[{DIM}] FROM incoming")
        con.unregister("incoming")
    con.execute("CHECKPOINT")
    build = time.perf_counter() - t0
    sql = f"SELECT id FROM v ORDER BY array_cosine_similarity(embedding, ?::FLOAT[{DIM}]) DESC LIMIT {K}"

    def search(q):
        return [r[0] for r in con.execute(sql, [q.tolist()]).fetchall()]

    result = timed_queries(search, queries, truth) | {"build_s": round(build, 2)}
    con.close()
    return result


def bench_lancedb(
    vectors: np.ndarray, queries: np.ndarray, truth, work: Path, ivf: bool, max_partitions: int = 1024
) -> dict:
    import lancedb

    db = lancedb.connect(str(work / ("lance-ivf" if ivf else "lance-flat")))
    t0 = time.perf_counter()
    table = db.create_table("v", _arrow(vectors[:200_000], "vector"), mode="overwrite")
    for start in range(200_000, len(vectors), 200_000):
        chunk = _arrow(vectors[start : start + 200_000], "vector")
        table.add(chunk.set_column(0, "id", pa.array(np.arange(start, start + len(chunk), dtype=np.int32))))
    params = {}
    if ivf:
        partitions = min(max_partitions, max(16, int(len(vectors) ** 0.5)))
        params = {"num_partitions": partitions, "num_sub_vectors": DIM // 8}
        table.create_index(metric="cosine", index_type="IVF_PQ", **params)
    build = time.perf_counter() - t0

    def search(q):
        query = table.search(q.tolist()).metric("cosine").limit(K).select(["id", "_distance"])
        if ivf:
            query = query.nprobes(20).refine_factor(10)
        return query.to_arrow().column("id").to_pylist()

    return timed_queries(search, queries, truth) | {"build_s": round(build, 2), **params}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument(
        "--max-partitions",
        type=int,
        default=1024,
        help="IVF partitions at most (default sqrt(n)); k-means "
        "training grows with their square: 316 took 530 s at 100k on a busy 2-core machine",
    )
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "vector_index.json"))
    args = parser.parse_args()
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    results = {k: v for k, v in results.items() if k in ("sizes",)} | {
        "date": datetime.now(UTC).isoformat(),
        "machine": f"{platform.platform()}, {os.cpu_count()} cores",
        "k": K,
        "dim": DIM,
        "note": "the machine is shared with other developers: latencies are noisy; compare rows of one run",
    }
    sizes = results.setdefault("sizes", {})
    for n in args.sizes:
        vectors, queries = synthetic(n, args.queries)
        truth = [vectors @ q for q in queries]
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            row = sizes[str(n)] = {"n_vectors": n, "n_queries": len(queries)}
            methods = [
                ("duckdb_exact", bench_duckdb, {}),
                ("lancedb_flat", bench_lancedb, {"ivf": False}),
                ("lancedb_ivf_pq", bench_lancedb, {"ivf": True, "max_partitions": args.max_partitions}),
            ]
            for name, measure, options in methods:
                row[name] = measure(vectors, queries, truth, work, **options)
                print(n, name, row[name], flush=True)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(
                    json.dumps(results, indent=1) + "\n"
                )  # after each: a long build may be cut off
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
