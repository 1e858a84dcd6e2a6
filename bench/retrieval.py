"""Retrieval quality: does a question find the page that answers it? The knowledge base against peers.

    .venv/bin/python -m bench.retrieval [--corpus DIR] [--extra F] [--kb DIR] [--work DIR] [--out F]

Questions: ``rag-dev/questions.jsonl`` of the corpus (FinanceBench questions on 16 SEC filings, with
the 1-based pages that hold the answer) and the extra questions of ``bench/retrieval_questions.jsonl``
(written for this benchmark on the same filings and other corpus documents). Each system's chunks of
every document named by a question are searched **all at once** and **within the question's own
document**; a question is a hit at k when one of the k best results comes from its document and its
page span includes an answering page (hit@5, hit@10, MRR@10), as ``rag-dev/README.md`` defines it.

Systems, each ranked by BM25 (``chandra_ocr.vector.lexical``), by the bundled embedding model
(cosine) and by both fused (reciprocal rank fusion, a page listed once: ``chandra_ocr.vector.hybrid``):

- ``project``: the knowledge base's chunks as stored, indexed with their context (what the feed indexes);
- ``project_text``: the same chunks' own text without the context;
- ``naive``, ``page``, ``md4llm``: the peers (``bench.retrieval_peers``).

``search`` is the project's search as users call it: the PDFs ingested by ``chandra-ingest run``,
indexed by ``chandra-ingest feed`` (both timed), then ``chandra_ocr.vector.search.search_kb`` for
each question (what ``chandra-ingest search`` prints). Embeddings of the benchmark's own chunks are
cached by text under the work folder (``--work``, default ``bench/.work/retrieval``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from bench.retrieval_peers import Unit, md4llm, naive, per_page
from chandra_ocr.vector import hybrid, lexical
from chandra_ocr.vector.embedder import Embedder
from chandra_ocr.vector.lexical_index import create_index, replace_chunks

REPO = Path(__file__).resolve().parents[1]
EXTRA = REPO / "bench" / "retrieval_questions.jsonl"
PEERS = ("naive", "page", "md4llm")
DEPTH = 50  # candidates each ranking contributes before fusion


@dataclass(frozen=True)
class Question:
    id: str
    doc: str
    question: str
    pages: tuple[int, ...]
    pdf: Path
    set: str


def load_questions(corpus: Path, extra: Path | None, under: str = "") -> list[Question]:
    """rag-dev's questions and the ``extra`` ones whose document's corpus path starts with ``under``."""
    out = []
    for line in (corpus / "rag-dev" / "questions.jsonl").read_text().splitlines():
        q = json.loads(line)
        pdf = corpus / "rag-dev" / "pdfs" / f"{q['doc']}.pdf"
        out.append(Question(q["id"], q["doc"], q["question"], tuple(q["evidence_pages"]), pdf, "rag-dev"))
    if extra is not None and extra.exists():
        for line in extra.read_text().splitlines():
            if line.strip():
                q = json.loads(line)
                if not q["corpus_path"].startswith(under):
                    continue
                pdf = corpus / q["corpus_path"]
                out.append(
                    Question(q["id"], q["doc"], q["question"], tuple(q["evidence_pages"]), pdf, "extra")
                )
    return out


# -- scoring --------------------------------------------------------------------------------------


def first_hit(q: Question, ranked: Sequence[Unit], k: int = 10) -> int | None:
    """1-based rank of the first of ``ranked[:k]`` from q's document spanning an answering page."""
    for rank, u in enumerate(ranked[:k], start=1):
        if u.doc == q.doc and any(u.page_start <= p <= u.page_end for p in q.pages):
            return rank
    return None


def metrics(ranks: list[int | None]) -> dict[str, float]:
    n = max(len(ranks), 1)
    return {
        "hit@5": round(sum(1 for r in ranks if r and r <= 5) / n, 3),
        "hit@10": round(sum(1 for r in ranks if r and r <= 10) / n, 3),
        "mrr@10": round(sum(1 / r for r in ranks if r) / n, 3),
    }


class Ranker:
    """BM25, dense and fused rankings over one system's units."""

    def __init__(self, units: list[Unit], vectors: np.ndarray) -> None:
        self.units = units
        self.by_id = {u.chunk_id: u for u in units}
        self.vectors = vectors
        self.docs = np.array([u.doc for u in units])
        self.con = duckdb.connect()
        create_index(self.con)
        rows = pa.table(
            {
                "chunk_id": [u.chunk_id for u in units],
                "doc_id": [u.doc for u in units],
                "text": [u.text for u in units],
                "context": [""] * len(units),
            }
        )
        replace_chunks(self.con, rows, rows.select(["chunk_id"]).slice(0, 0))

    def bm25(self, question: str, doc: str | None) -> list[str]:
        return [cid for cid, _ in lexical.bm25(self.con, question, DEPTH, doc)]

    def dense(self, qvec: np.ndarray, doc: str | None) -> list[str]:
        scores = self.vectors @ qvec
        if doc is not None:
            scores = np.where(self.docs == doc, scores, -np.inf)
        order = np.argsort(-scores, kind="stable")[:DEPTH]
        return [self.units[i].chunk_id for i in order if np.isfinite(scores[i])]

    def fused(self, question: str, qvec: np.ndarray, doc: str | None) -> list[str]:
        ranked = hybrid.fuse([self.bm25(question, doc), self.dense(qvec, doc)])
        return [
            cid for cid, _ in hybrid.by_page([c for c, _ in ranked], lambda cid: _page_key(self.by_id[cid]))
        ]

    def units_of(self, ids: list[str]) -> list[Unit]:
        return [self.by_id[i] for i in ids]


def _page_key(u: Unit) -> tuple[str, int]:
    return (u.doc, u.page_start)


def evaluate(ranker: Ranker, questions: list[Question], qvecs: np.ndarray, scorers: list[str]) -> dict:
    out: dict = {"chunks": len(ranker.units)}
    for name in scorers:
        ranks: dict[str, list[int | None]] = {"all": [], "within": []}
        for q, qv in zip(questions, qvecs, strict=True):
            for scope, doc in (("all", None), ("within", q.doc)):
                if name == "bm25":
                    ids = ranker.bm25(q.question, doc)
                elif name == "dense":
                    ids = ranker.dense(qv, doc)
                else:
                    ids = ranker.fused(q.question, qv, doc)
                ranks[scope].append(first_hit(q, ranker.units_of(ids)))
        out[name] = by_set(questions, ranks)
    return out


def by_set(questions: list[Question], ranks: dict[str, list[int | None]]) -> dict:
    out: dict = {}
    for set_name in ("rag-dev", "extra", "all"):
        keep = [i for i, q in enumerate(questions) if set_name in ("all", q.set)]
        if not keep:
            continue
        out[set_name] = {
            "questions": len(keep),
            "all_docs": metrics([ranks["all"][i] for i in keep]),
            "within_doc": metrics([ranks["within"][i] for i in keep]),
        }
    out["ranks_all_docs"] = ranks["all"]
    return out


# -- embeddings, cached by text -------------------------------------------------------------------


class Vectors:
    """Embeddings of texts, cached in a DuckDB file keyed by the model and the text's hash."""

    def __init__(self, embedder: Embedder, cache: Path) -> None:
        self.embedder = embedder
        cache.parent.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(str(cache))
        self.con.execute("CREATE TABLE IF NOT EXISTS emb (key VARCHAR PRIMARY KEY, v FLOAT[])")
        self.seconds = 0.0
        self.embedded = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        model = repr(self.embedder.options)  # the model and how it runs (vectors of two setups never mix)
        keys = [hashlib.sha1(f"{model}\0{t}".encode()).hexdigest() for t in texts]
        have = dict(self.con.execute("SELECT key, v FROM emb WHERE list_contains(?, key)", [keys]).fetchall())
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in have}.items())
        for start in range(0, len(missing), 512):
            batch = missing[start : start + 512]
            t0 = time.perf_counter()
            vecs = self.embedder.embed([t for _, t in batch])
            self.seconds += time.perf_counter() - t0
            self.embedded += len(batch)
            rows = [(k, v.tolist()) for (k, _), v in zip(batch, vecs, strict=True)]
            self.con.executemany("INSERT OR REPLACE INTO emb VALUES (?, ?)", rows)
            have.update(rows)
            print(f"  embedded {min(start + 512, len(missing))}/{len(missing)}", file=sys.stderr)
        return np.array([have[k] for k in keys], dtype=np.float32)


# -- the project's knowledge base -----------------------------------------------------------------


def ingest(pdfs: list[Path], kb: Path, work: Path) -> dict:
    """The PDFs through ``chandra-ingest run`` and ``chandra-ingest feed``, as a user runs them (timed)."""
    source = work / "pdfs"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for pdf in pdfs:
        shutil.copyfile(pdf, source / pdf.name)
    cli = [sys.executable, "-m", "chandra_ocr.cli"]
    times = {}
    for step, args in (
        ("run", ["run", str(source), "--kb", str(kb), "--settle-seconds", "0", "--engine", "text"]),
        ("feed", ["feed", "--kb", str(kb)]),
    ):
        t0 = time.perf_counter()
        done = subprocess.run([*cli, *args], capture_output=True, text=True)
        times[f"{step}_s"] = round(time.perf_counter() - t0, 1)
        if done.returncode not in (0, 1):
            raise SystemExit(f"chandra-ingest {step} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return times


def kb_units(kb: Path, with_context: bool) -> list[Unit]:
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        has_context = "context" in {r[0] for r in con.execute("DESCRIBE chunks").fetchall()}
        context = "c.context" if has_context and with_context else "''"
        rows = con.execute(
            f"""SELECT c.chunk_id, regexp_replace(d.file_name, '\\.pdf$', ''), c.page_start, c.page_end,
                       {context}, c.text
                FROM chunks c JOIN documents d USING (doc_id) ORDER BY d.file_name, c.chunk_no"""
        ).fetchall()
    finally:
        con.close()
    return [
        Unit(cid, doc, first, last, f"{ctx}\n{text}" if ctx else text)
        for cid, doc, first, last, ctx, text in rows
    ]


def feed_vectors(kb: Path, embedder: Embedder, units: list[Unit]) -> np.ndarray:
    """The vectors ``chandra-ingest feed`` stored for the KB's chunks (the same model and text)."""
    from chandra_ocr.vector.index import open_index

    con = open_index(kb / "vector", embedder.name, embedder.dim, read_only=True)
    try:
        have = dict(con.execute("SELECT chunk_id, embedding FROM vectors").fetchall())
    finally:
        con.close()
    missing = [u.chunk_id for u in units if u.chunk_id not in have]
    if missing:
        raise SystemExit(f"{len(missing)} chunks of {kb} have no vector: run `chandra-ingest feed --kb {kb}`")
    return np.array([have[u.chunk_id] for u in units], dtype=np.float32)


def project_search(kb: Path, questions: list[Question]) -> dict:
    """The project's own search (what ``chandra-ingest search`` calls) for every question."""
    from chandra_ocr.store.layout import KbLayout
    from chandra_ocr.vector.search import search_kb

    layout = KbLayout(kb)
    units = {u.chunk_id: u for u in kb_units(kb, with_context=False)}
    ranks: dict[str, list[int | None]] = {"all": [], "within": []}
    seconds = []
    for q in questions:
        for scope, doc in (("all", None), ("within", f"{q.doc}.pdf")):
            t0 = time.perf_counter()
            hits = search_kb(layout, q.question, k=10, doc=doc).hits
            seconds.append(time.perf_counter() - t0)
            ranks[scope].append(first_hit(q, [units[h.chunk_id] for h in hits]))
    out = by_set(questions, ranks)
    out["median_query_s"] = round(float(np.median(seconds)), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus")),
    )
    parser.add_argument("--extra", type=Path, default=EXTRA, help="extra questions (JSON lines)")
    parser.add_argument(
        "--kb", type=Path, help="an ingested and fed knowledge base to reuse (default: ingest anew)"
    )
    parser.add_argument(
        "--under", default="", help="only extra questions on documents under this corpus path (e.g. rag-dev/)"
    )
    parser.add_argument(
        "--baseline-kb",
        type=Path,
        help="a knowledge base made by an earlier commit: its chunks by BM25 (system 'baseline')",
    )
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work" / "retrieval")
    parser.add_argument(
        "--systems",
        default="project,project_text:bm25,naive,page,md4llm",
        help="systems to rank, each with its scorers after a colon (a+b; default: --scorers)",
    )
    parser.add_argument("--scorers", default="bm25,dense,hybrid", help="rankings of each system's chunks")
    parser.add_argument("--skip-search", action="store_true", help="leave out the project's own search")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "retrieval.json")
    args = parser.parse_args(argv)
    if not (args.corpus / "rag-dev").is_dir():
        raise SystemExit(f"no rag-dev folder under {args.corpus}: give --corpus or $CHANDRA_OCR_CORPUS")
    questions = load_questions(args.corpus, args.extra, args.under)
    pdfs = sorted({q.pdf for q in questions} | set((args.corpus / "rag-dev" / "pdfs").glob("*.pdf")))
    result: dict = {
        "command": "python -m bench.retrieval " + " ".join(argv if argv is not None else sys.argv[1:]),
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "documents": len(pdfs),
        "questions": {s: sum(q.set == s for q in questions) for s in ("rag-dev", "extra")},
    }
    kb = args.kb
    if kb is None:
        kb = args.work / "kb"
        shutil.rmtree(kb, ignore_errors=True)
        result["ingest"] = ingest(pdfs, kb, args.work)
        (kb / "bench-ingest.json").write_text(json.dumps(result["ingest"]))
        print(f"ingested and fed {len(pdfs)} PDFs: {result['ingest']}", file=sys.stderr)
    elif (kb / "bench-ingest.json").is_file():  # the times of the run that made this KB
        result["ingest"] = json.loads((kb / "bench-ingest.json").read_text())
    plan = {
        name: (how.split("+") if how else args.scorers.split(","))
        for name, _, how in (item.partition(":") for item in args.systems.split(","))
    }
    scorers = sorted({how for hows in plan.values() for how in hows})
    dense = any(s in scorers for s in ("dense", "hybrid"))
    embedder = Embedder().start() if dense else None
    vectors = Vectors(embedder, args.work / "embeddings.duckdb") if embedder else None
    qvecs = vectors([q.question for q in questions]) if vectors else np.zeros((len(questions), 1), np.float32)
    makers: dict[str, Callable[[], list[Unit]]] = {
        "project": lambda: kb_units(kb, with_context=True),
        "project_text": lambda: kb_units(kb, with_context=False),
        "naive": lambda: [u for p in pdfs for u in naive(p)],
        "page": lambda: [u for p in pdfs for u in per_page(p)],
        "md4llm": lambda: [u for p in pdfs for u in md4llm(p, args.work / "md4llm")],
    }
    if not args.skip_search:
        result["search"] = project_search(kb, questions)
        _print("search", result["search"])
    systems = {}
    for name, hows in plan.items():
        units = makers[name]()
        if not vectors or hows == ["bm25"]:
            unit_vectors = np.zeros((len(units), 1), np.float32)
        elif name == "project" and embedder is not None:
            unit_vectors = feed_vectors(kb, embedder, units)  # what the project's search ranks by
        else:
            unit_vectors = vectors([u.text for u in units])
        systems[name] = evaluate(Ranker(units, unit_vectors), questions, qvecs, hows)
        for how in hows:
            _print(f"{name}/{how}", systems[name][how])
    if args.baseline_kb is not None:
        units = kb_units(args.baseline_kb, with_context=True)
        systems["baseline"] = evaluate(
            Ranker(units, np.zeros((len(units), 1), np.float32)), questions, qvecs, ["bm25"]
        )
        _print("baseline/bm25", systems["baseline"]["bm25"])
    result["systems"] = systems
    result["targets"] = targets(result)
    if embedder is not None and vectors is not None:
        result["embedding"] = {
            "model": embedder.name,
            "runtime": embedder.runtime,
            "texts_embedded": vectors.embedded,
            "seconds": round(vectors.seconds, 1),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"→ {args.out}", file=sys.stderr)
    return 0


def targets(result: dict) -> dict:
    """The issue's targets on rag-dev's questions, over all filings at once."""

    def hit5(scores: dict) -> float:
        return scores["rag-dev"]["all_docs"]["hit@5"]

    systems = result["systems"]
    peers = {
        f"{n}/{how}": hit5(s)
        for n in PEERS
        if n in systems
        for how, s in systems[n].items()
        if how != "chunks"
    }
    out: dict = {}
    if peers:
        best = max(peers, key=lambda k: peers[k])
        out["best_peer"] = {"system": best, "hit@5": peers[best]}
    if "search" in result and peers:
        got = hit5(result["search"])
        out["search_hit@5"] = got
        out["search_vs_best_peer"] = {
            "need": round(max(peers.values()) + 0.15, 3),
            "met": got >= max(peers.values()) + 0.15,
        }
        out["search_at_least_0.5"] = got >= 0.5
    if "baseline" in systems and "project" in systems and "bm25" in systems["project"]:
        before, after = hit5(systems["baseline"]["bm25"]), hit5(systems["project"]["bm25"])
        out["bm25_project_vs_baseline"] = {"baseline": before, "project": after, "met": after >= 2 * before}
    return out


def _print(name: str, scores: dict) -> None:
    for set_name in ("rag-dev", "extra", "all"):
        if set_name in scores:
            s = scores[set_name]
            a, w = s["all_docs"], s["within_doc"]
            print(
                f"{name:22s} {set_name:8s} n={s['questions']:3d}  all: hit@5 {a['hit@5']:.3f} hit@10 "
                f"{a['hit@10']:.3f} mrr {a['mrr@10']:.3f} | within: hit@5 {w['hit@5']:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    raise SystemExit(main())
