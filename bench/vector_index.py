"""Vector index choice: DuckDB FLOAT[] + array_cosine_similarity (exact) vs LanceDB (flat and IVF-PQ).

    .venv/bin/python bench/vector_index.py [--corpus DIR] [--scale 50000] [--out FILE.json]

Real chunks: the docling born-digital PDFs of the corpus are ingested (engine "text"), their
chunks embedded with the bundled all-MiniLM-L6-v2; queries are the first sentence of 50 chunks.
Measured on those real vectors and on ``--scale`` vectors (the real ones plus jittered copies,
renormalised): recall@10 against exact numpy search, median and p95 query latency, build time.
LanceDB needs the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout
from chandra_ocr.vector.embedder import Embedder

REPO = Path(__file__).resolve().parents[1]
K = 10


def real_vectors(corpus: Path, work: Path, embedder: Embedder) -> tuple[np.ndarray, np.ndarray]:
    """(chunk vectors, query vectors) from the docling PDFs of the corpus."""
    sources = corpus / "docling/tests/data/pdf/sources"
    layout = KbLayout(work / "kb")
    run(sources, layout.root, IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, compress=False)))
    con = connect(layout, read_only=True)
    texts = [r[0] for r in con.execute("SELECT text FROM chunks ORDER BY chunk_id").fetchall()]
    con.close()
    queries = [t.split(". ")[0][:300] for t in texts[:: max(1, len(texts) // 50)]][:50]
    return embedder.embed(texts), embedder.embed(queries)


def scaled(base: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    """``n`` unit vectors: ``base`` and jittered copies of it."""
    rng = np.random.default_rng(seed)
    reps = base[rng.integers(0, len(base), n - len(base))]
    noisy = reps + rng.normal(0, 0.08, reps.shape).astype(np.float32)
    out = np.vstack([base, noisy]).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def exact(vectors: np.ndarray, queries: np.ndarray) -> list[np.ndarray]:
    """Exact similarities of every vector to each query (numpy, float32)."""
    return [vectors @ q for q in queries]


def timed_queries(search, queries: np.ndarray, truth: list[np.ndarray]) -> dict:
    """Latency and recall@10; a result counts when its exact similarity reaches the 10th best
    (ties at the cut-off, common among the jittered copies, are all correct answers)."""
    latencies, recalls = [], []
    search(queries[0])  # warm-up
    for q, scores in zip(queries, truth, strict=True):
        t0 = time.perf_counter()
        got = search(q)
        latencies.append((time.perf_counter() - t0) * 1000)
        cutoff = np.sort(scores)[-K] - 1e-5
        recalls.append(sum(1 for i in got[:K] if scores[i] >= cutoff) / K)
    return {
        "recall_at_10": round(statistics.mean(recalls), 4),
        "p50_ms": round(statistics.median(latencies), 2),
        "p95_ms": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2),
    }


def bench_duckdb(vectors: np.ndarray, queries: np.ndarray, truth, work: Path) -> dict:
    dim = vectors.shape[1]
    con = duckdb.connect(str(work / "vectors.duckdb"))
    t0 = time.perf_counter()
    con.execute(f"CREATE OR REPLACE TABLE v (id INTEGER, embedding FLOAT[{dim}])")
    import pyarrow as pa

    table = pa.table(
        {
            "id": pa.array(range(len(vectors)), pa.int32()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dim),
        }
    )
    con.register("incoming", table)
    con.execute(f"INSERT INTO v SELECT id, embedding::FLOAT[{dim}] FROM incoming")
    build = time.perf_counter() - t0
    sql = f"SELECT id FROM v ORDER BY array_cosine_similarity(embedding, ?::FLOAT[{dim}]) DESC LIMIT {K}"

    def search(q):
        return [r[0] for r in con.execute(sql, [q.tolist()]).fetchall()]

    result = timed_queries(search, queries, truth) | {"build_s": round(build, 2)}
    con.close()
    return result


def bench_lancedb(vectors: np.ndarray, queries: np.ndarray, truth, work: Path, ivf: bool) -> dict:
    import lancedb
    import pyarrow as pa

    dim = vectors.shape[1]
    db = lancedb.connect(str(work / ("lance-ivf" if ivf else "lance-flat")))
    t0 = time.perf_counter()
    data = pa.table(
        {
            "id": pa.array(range(len(vectors)), pa.int32()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel(), pa.float32()), dim),
        }
    )
    table = db.create_table("v", data, mode="overwrite")
    if ivf:
        table.create_index(
            metric="cosine", num_partitions=max(4, int(len(vectors) ** 0.5) // 4), num_sub_vectors=48
        )
    build = time.perf_counter() - t0

    def search(q):
        query = table.search(q.tolist()).metric("cosine").limit(K).select(["id"])
        return query.to_arrow().column("id").to_pylist()

    return timed_queries(search, queries, truth) | {"build_s": round(build, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default=str(REPO.parent / "shared" / "corpus"))
    parser.add_argument("--scale", type=int, default=50_000)
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "vector_index.json"))
    args = parser.parse_args()
    embedder = Embedder().start()
    results: dict = {"date": datetime.now(UTC).isoformat(), "machine": platform.platform(), "k": K}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base, queries = real_vectors(Path(args.corpus), work, embedder)
        for label, vectors in (("real", base), ("scaled", scaled(base, args.scale))):
            truth = exact(vectors, queries)
            (work / label).mkdir()
            results[label] = {
                "n_vectors": len(vectors),
                "n_queries": len(queries),
                "duckdb_exact": bench_duckdb(vectors, queries, truth, work / label),
                "lancedb_flat": bench_lancedb(vectors, queries, truth, work / label, ivf=False),
            }
            if len(vectors) >= 5000:
                results[label]["lancedb_ivf_pq"] = bench_lancedb(
                    vectors, queries, truth, work / label, ivf=True
                )
            print(label, json.dumps(results[label], indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
