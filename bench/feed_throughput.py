"""Feed throughput: a baseline commit's embedding setup against this tree's, on the same table-dense chunks.

    .venv/bin/python -m bench.feed_throughput [--corpus DIR] [--kb DIR] [--baseline COMMIT] [--sample 480]
                                              [--slice 40] [--known-items 400]
                                              [--parts speed,feed,quality] [--out FILE]

The chunks are those of the 16 SEC filings of ``rag-dev/pdfs`` (the corpus), ingested once by the
project's own pipeline (``chandra-ingest run --engine text``) into ``bench/.work/feed_throughput/kb``
(reused by later runs), or those of ``--kb``. In one run, so that every number shares the load of
this shared machine:

1. ``speed``, taking turns: one child process imports the baseline commit's ``chandra_ocr`` (default
   ``9061cd8``: the fp32 ONNX model as main had it), two import this tree's (``precision`` int8, the
   default, and fp32); slice by slice, in rotating order, each embeds the same chunks — an even
   sample of all chunks, then a sample of the short ones (one model window, as row-split table
   chunks are) — and reports wall and CPU seconds: chunks/s and the ratios to the baseline;
2. ``feed``, as users run it: ``chandra-ingest feed`` on a copy of the knowledge base (all chunks,
   int8): wall time, chunks/s, minutes per 10,000 chunks, its progress lines;
3. ``quality``: every chunk's fp32 vector (a full pass of the fp32 child) against its int8 one
   (from the feed): cosine (min, 1st percentile, mean); dense retrieval over all filings with each
   — rag-dev's 20 questions (hit@5, hit@10, MRR@10 as the corpus README defines them: a hit is a
   chunk of the question's filing whose pages include an evidence page; within the question's own
   filing too) and ``--known-items`` queries made from the chunks themselves (12 words from the
   middle of a chunk; a hit spans its first page) — with the overlap of the two top-10 lists.
   The full passes' vectors are kept under ``bench/.work/feed_throughput/vectors`` (by chunk ids,
   texts and graph version), so ``--parts quality`` alone reruns in minutes.

``--parts`` runs some parts; the others stay as an earlier run wrote them in ``--out``
(``bench/results/feed_throughput.json``), each part with its own date and load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / ".work" / "feed_throughput"
BASELINE = "9061cd8"  # main before the int8 model: fp32 ONNX, a session without thread settings
SETUPS = {"baseline": {}, "fp32": {"precision": "fp32"}, "int8": {"precision": "int8"}}

_CHILD = r"""
import json, sys, time
import numpy as np
from chandra_ocr.vector.embedder import Embedder, EmbedOptions
options = json.loads(sys.argv[1])
embedder = Embedder(EmbedOptions(**options) if options else None).start()
embedder.embed(["warm up"])
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    order = json.loads(line)
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = embedder.embed(order["texts"])
    result = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    if order.get("save"):
        np.save(order["save"], vectors)
    print(json.dumps(result), flush=True)
"""


class Child:
    """One process embedding with one tree's ``chandra_ocr`` and options, on order."""

    def __init__(self, plugins: Path, options: dict) -> None:
        env = {**os.environ, "PYTHONPATH": str(plugins)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, json.dumps(options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self._read()

    def embed(self, texts: list[str], save: Path | None = None) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"texts": texts, "save": str(save) if save else None}) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"embedding child exited {self.proc.wait(timeout=60)}")
        return json.loads(line)


def export_tree(rev: str, dest: Path) -> Path:
    """The ``plugins/`` folder of commit ``rev``, unpacked under ``dest``."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "plugins"], check=True, capture_output=True
    )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest / "plugins"


def ensure_kb(kb: Path, pdfs: Path) -> Path:
    """The knowledge base of ``pdfs`` (ingested now, with the text route, unless it exists)."""
    if not (kb / "kb.duckdb").exists():
        cli = [sys.executable, "-m", "chandra_ocr.cli", "run", str(pdfs), "--kb", str(kb), "--engine", "text"]
        subprocess.run([*cli, "--settle-seconds", "0"], check=True, timeout=3600)
    return kb


def read_chunks(kb: Path) -> list[dict]:
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        sql = """SELECT c.chunk_id, c.kind, c.text, c.page_start, c.page_end, d.file_name
                 FROM chunks c JOIN documents d USING (doc_id) ORDER BY c.chunk_id"""
        cols = ["chunk_id", "kind", "text", "page_start", "page_end", "file_name"]
        return [dict(zip(cols, row, strict=True)) for row in con.execute(sql).fetchall()]
    finally:
        con.close()


def word_pieces(texts: list[str]) -> list[int]:
    from chandra_ocr.vector.embedder import BUNDLED, _model_path, _tokenizer

    tokenizer = _tokenizer(Path(_model_path(BUNDLED)))
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


def take_turns(children: dict[str, Child], texts: list[str], slice_size: int) -> dict:
    """Each child embeds every slice of ``texts``, in rotating order; totals, rates and ratios."""
    seen = {name: {"wall_s": 0.0, "cpu_s": 0.0} for name in children}
    names = list(children)
    for i, start in enumerate(range(0, len(texts), slice_size)):
        part = texts[start : start + slice_size]
        for name in names[i % len(names) :] + names[: i % len(names)]:
            for key, value in children[name].embed(part).items():
                seen[name][key] += value
    out: dict = {"chunks": len(texts)}
    for name, t in seen.items():
        out[name] = {
            "wall_s": round(t["wall_s"], 2),
            "cpu_s": round(t["cpu_s"], 2),
            "chunks_per_s": round(len(texts) / t["wall_s"], 2),
            "chunks_per_cpu_s": round(len(texts) / t["cpu_s"], 2),
        }
    for name in names[1:]:
        out[f"{name}_vs_baseline"] = {
            "wall": round(seen["baseline"]["wall_s"] / seen[name]["wall_s"], 2),
            "cpu": round(seen["baseline"]["cpu_s"] / seen[name]["cpu_s"], 2),
        }
    return out


def run_feed(kb: Path, work: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """``chandra-ingest feed`` on a copy of ``kb`` (no outbox, no index): its numbers and vectors."""
    copy = work / "feed_kb"
    shutil.copytree(kb, copy, ignore=shutil.ignore_patterns("outbox", "vector", "report"))
    t0 = time.perf_counter()
    cli = [sys.executable, "-m", "chandra_ocr.cli", "feed", "--kb", str(copy), "--json"]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise RuntimeError(f"feed failed: {done.stderr[-3000:]}")
    counts = json.loads(done.stdout)["index_counts"]
    progress = [line.split(": ", 1)[1] for line in done.stderr.splitlines() if ": vector feed " in line]
    con = duckdb.connect(str(copy / "vector" / "vectors.duckdb"), read_only=True)
    try:
        rows = con.execute("SELECT chunk_id, embedding FROM vectors").fetchall()
    finally:
        con.close()
    result = {
        "chunks_embedded": counts["embedded"],
        "vectors": counts["vectors"],
        "wall_s": round(wall, 1),
        "chunks_per_s": round(counts["vectors"] / wall, 2),
        "minutes_per_10000_chunks": round(10_000 / (counts["vectors"] / wall) / 60, 1),
        "progress_lines": progress,
    }
    return result, {cid: np.asarray(v, dtype=np.float32) for cid, v in rows}


def retrieval(chunks: list[dict], vectors: np.ndarray, questions: list[dict], qvectors: np.ndarray) -> dict:
    """hit@5, hit@10, MRR@10 over all filings and within each question's filing; top-10 ids per question."""
    docs = np.array([Path(c["file_name"]).stem for c in chunks])
    scores = qvectors @ vectors.T
    result: dict = {
        "all": {"hit@5": 0.0, "hit@10": 0.0, "mrr@10": 0.0},
        "own_filing": {"hit@5": 0.0},
        "top10": [],
    }
    for q, row in zip(questions, scores, strict=True):
        top = np.argsort(-row)[:10]
        result["top10"].append([chunks[i]["chunk_id"] for i in top])
        ranks = [r for r, i in enumerate(top, 1) if _answers(chunks[i], q)]
        result["all"]["hit@5"] += bool(ranks and ranks[0] <= 5)
        result["all"]["hit@10"] += bool(ranks)
        result["all"]["mrr@10"] += 1 / ranks[0] if ranks else 0.0
        own = np.flatnonzero(docs == q["doc"])
        own_top = own[np.argsort(-row[own])[:5]]
        result["own_filing"]["hit@5"] += any(_answers(chunks[i], q) for i in own_top)
    for scope in ("all", "own_filing"):
        result[scope] = {k: round(v / len(questions), 3) for k, v in result[scope].items()}
    return result


def _answers(chunk: dict, question: dict) -> bool:
    """A chunk of the question's filing whose page span includes an evidence page (1-based)."""
    if Path(chunk["file_name"]).stem != question["doc"]:
        return False
    return any(chunk["page_start"] <= p <= chunk["page_end"] for p in question["evidence_pages"])


def known_items(chunks: list[dict], n: int) -> list[dict]:
    """``n`` queries made from chunks (an even sample): 12 consecutive words from the middle of each,
    markup dropped; the answer is the source chunk's first page in its filing. A large, mechanical
    check that int8 and fp32 retrieve alike, beside the 20 questions written by people."""
    step = max(1, len(chunks) // n)
    out = []
    for chunk in chunks[::step]:
        words = re.findall(r"[A-Za-z0-9$][\w.,$%'’-]*", chunk["text"] or "")
        if len(words) >= 12:
            mid = len(words) // 2
            stem = Path(chunk["file_name"]).stem
            out.append(
                {
                    "doc": stem,
                    "evidence_pages": [chunk["page_start"]],
                    "question": " ".join(words[mid - 6 : mid + 6]),
                }
            )
    return out[:n]


def compare(
    chunks: list[dict], vectors: dict[str, np.ndarray], questions: list[dict], qvectors: dict
) -> dict:
    """Retrieval with each model's vectors over all chunks, and how alike their top-10 lists are."""
    by_model = {m: retrieval(chunks, vectors[m], questions, qvectors[m]) for m in ("fp32", "int8")}
    tops = [by_model[m].pop("top10") for m in ("fp32", "int8")]
    overlap = [len(set(a) & set(b)) / 10 for a, b in zip(*tops, strict=True)]
    return {
        "questions": len(questions),
        **by_model,
        "hit@5_int8_minus_fp32": round(
            by_model["int8"]["all"]["hit@5"] - by_model["fp32"]["all"]["hit@5"], 3
        ),
        "top10_overlap_mean": round(float(np.mean(overlap)), 3),
        "top1_same": sum(a[0] == b[0] for a, b in zip(*tops, strict=True)),
    }


def quality(
    chunks: list[dict], vectors: dict[str, np.ndarray], children: dict, rag: Path, known: int
) -> dict:
    """Cosine of each chunk's int8 and fp32 vectors; retrieval of rag-dev's questions and of known items."""
    cosines = (vectors["fp32"] * vectors["int8"]).sum(axis=1)
    sets = {
        "rag_dev_questions": [json.loads(x) for x in (rag / "questions.jsonl").read_text().splitlines() if x],
        "known_items": known_items(chunks, known),
    }
    out: dict = {
        "cosine_int8_vs_fp32": {
            "min": round(float(cosines.min()), 4),
            "p1": round(float(np.percentile(cosines, 1)), 4),
            "mean": round(float(cosines.mean()), 4),
        }
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, questions in sets.items():
            qvectors = {}
            for model in ("fp32", "int8"):
                children[model].embed([q["question"] for q in questions], save=Path(tmp) / "q.npy")
                qvectors[model] = np.load(Path(tmp) / "q.npy")
            out[name] = compare(chunks, vectors, questions, qvectors)
    return out


def cached_vectors(chunks: list[dict]) -> Path:
    """Where the full passes' vectors of these chunks are kept (by chunk ids, texts and graph version)."""
    from chandra_ocr.vector.onnx_encoder import GRAPH

    digest = hashlib.sha256(GRAPH.encode())
    for c in chunks:
        digest.update(f"{c['chunk_id']}\0{c['text']}\0".encode())
    return WORK / "vectors" / f"{digest.hexdigest()[:16]}.npz"


def full_vectors(chunks: list[dict], children: dict, feed_vectors: dict | None) -> tuple[dict, dict]:
    """Every chunk's fp32 and int8 vectors — from the cache, else int8 from the feed (or a child) and
    fp32 from the fp32 child — and the full passes timed now."""
    path = cached_vectors(chunks)
    cached = dict(np.load(path)) if path.exists() else {}
    passes = {}
    texts = [c["text"] or "" for c in chunks]
    with tempfile.TemporaryDirectory() as tmp:
        if feed_vectors is not None:
            cached["int8"] = np.stack([feed_vectors[c["chunk_id"]] for c in chunks])
        for model in ("int8", "fp32"):
            if model not in cached:
                run = children[model].embed(texts, save=Path(tmp) / "v.npy")
                cached[model] = np.load(Path(tmp) / "v.npy")
                passes[model] = {
                    "chunks": len(texts),
                    "wall_s": round(run["wall_s"], 1),
                    "cpu_s": round(run["cpu_s"], 1),
                    "chunks_per_s": round(len(texts) / run["wall_s"], 2),
                }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **cached)
    return cached, passes


PARTS = ("speed", "feed", "quality")


def _stamp() -> dict:
    return {"date": datetime.now(UTC).isoformat(), "load_avg_at_start": os.getloadavg()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default_corpus = Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus"))
    ap.add_argument("--corpus", type=Path, default=default_corpus)
    ap.add_argument("--kb", type=Path, help="a knowledge base of the rag-dev filings (default: made once)")
    ap.add_argument("--baseline", default=BASELINE, help="the commit whose embedding setup is the baseline")
    ap.add_argument("--sample", type=int, default=480, help="chunks of each sample the three setups embed")
    ap.add_argument("--slice", type=int, default=40, help="chunks per turn")
    ap.add_argument("--known-items", type=int, default=400, help="queries made from chunks (quality)")
    ap.add_argument("--parts", default=",".join(PARTS), help="which parts to run (the others stay in --out)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "feed_throughput.json")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        ap.error(f"--parts takes {', '.join(PARTS)}")
    rag = args.corpus / "rag-dev"
    kb = ensure_kb(args.kb or WORK / "kb", rag / "pdfs")
    chunks = read_chunks(kb)
    lengths = word_pieces([c["text"] or "" for c in chunks])
    result: dict = json.loads(args.out.read_text()) if args.out.exists() else {}
    result = {k: v for k, v in result.items() if k in PARTS and k not in parts}  # earlier runs' parts
    result |= {
        "machine": f"{platform.platform()}, {os.cpu_count()} cores",
        "command": " ".join(["python -m bench.feed_throughput", *sys.argv[1:]]),
        "note": "the machine is shared: compare setups measured in this run; wall times depend on its load",
        "baseline": args.baseline,
        "chunks": {
            "kb": str(kb),
            "count": len(chunks),
            "kinds": {k: sum(c["kind"] == k for c in chunks) for k in sorted({c["kind"] for c in chunks})},
            "word_pieces_mean": round(float(np.mean(lengths)), 1),
            "word_pieces_p90": int(np.percentile(lengths, 90)),
            "one_window_share": round(float(np.mean(np.asarray(lengths) <= 254)), 3),
        },
    }
    WORK.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=WORK))
    children: dict[str, Child] = {}
    try:
        trees = {"baseline": export_tree(args.baseline, work / "baseline")}
        for name, options in SETUPS.items():
            if name != "baseline" or "speed" in parts:
                children[name] = Child(trees.get(name, REPO / "plugins"), options)
        if "speed" in parts:
            texts = [c["text"] or "" for c in chunks]
            step = max(1, len(texts) // args.sample)
            short = [t for t, n in zip(texts, lengths, strict=True) if n <= 254]
            short_step = max(1, len(short) // args.sample)
            result["speed"] = {
                **_stamp(),
                "all_chunks_sample": take_turns(children, texts[::step][: args.sample], args.slice),
                "short_chunks_sample": take_turns(children, short[::short_step][: args.sample], args.slice),
            }
            print(json.dumps(result["speed"], indent=1), flush=True)
        feed_vectors = None
        if "feed" in parts:
            stamp = _stamp()
            result["feed"], feed_vectors = run_feed(kb, work)
            result["feed"] = stamp | result["feed"]
            print(json.dumps(result["feed"], indent=1), flush=True)
        if "quality" in parts:
            stamp = _stamp()
            vectors, passes = full_vectors(chunks, children, feed_vectors)
            measured = quality(chunks, vectors, children, rag, args.known_items)
            result["quality"] = stamp | {"full_passes": passes} | measured
    finally:
        for child in children.values():
            child.close()
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "speed"}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
