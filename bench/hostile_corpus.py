"""Hostile-input sweep: the whole pipeline over every PDF of the corpus, and what became of each file.

    .venv/bin/python -m bench.hostile_corpus [--engine cpu] [--corpus DIR] [--out FILE.json] [--kb DIR]
    .venv/bin/python -m bench.hostile_corpus --soak 5 [--out bench/results/hostile_soak.json]

One ``pipeline.run`` (discover → compress → triage → render → OCR → assemble → DuckDB) over the
whole corpus folder (~400 PDFs: qpdf's bad*.pdf, format-corpus defects and Cabinet of Horrors,
pdf.js bombs and fuzzed files, giant pages, encrypted files, 0-byte and non-PDF files), with the
known passwords of ``PASSWORDS.md`` given through a passwords file. Checked: the run finishes,
every PDF ends ``ingested``, ``partial`` or ``quarantined``, and every file not ingested has a
reason. Reported: outcomes by status and reason class, the slowest files (triage timed again,
file by file, in the same kind of time- and memory-limited worker; OCR time from the pages
table), peak memory of the process tree (sampled) and the run's wall time.

``--soak N`` is the no-hang check: N sweeps back to back, each in a child process with a wall-clock
limit, with ``--tight`` worker limits (``TIGHT``: seconds-long page, document and Tesseract limits)
so that workers are killed and replaced all the time while Tesseract runs. Checked for every run:
it finished within its limit, and every file has an outcome (and a reason when not ingested).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pymupdf

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pdf.triage import triage_document
from chandra_ocr.pdf.workers import PdfWorkers
from chandra_ocr.pipeline import run

REPO = Path(__file__).resolve().parents[1]

# The user passwords of PASSWORDS.md, keyed by path ending under the corpus root. Files whose
# password is unknown there (Cabinet of Horrors' encryption_openpassword.pdf, qpdf's 20-pages.pdf)
# or that MuPDF cannot open with the documented one (bad-encryption-length.pdf) stay quarantined.
CORPUS_PASSWORDS = {
    "docling/tests/data/pdf_password/sources/2206.01062_pg3.pdf": "1234",
    "camelot/tests/files/health_protected.pdf": "userpass",
    "pdfplumber/tests/pdfs/password-example.pdf": "test",
    "pdfjs/test/pdfs/issue6010_1.pdf": "abc",
    "pdfjs/test/pdfs/issue6010_2.pdf": "æøå",
    "pdfjs/test/pdfs/issue21579.pdf": "pässwört",
    "pdfjs/test/pdfs/saslprep-r6.pdf": "S\u00aaSL\u00adprep",  # as typed; opened after SASLprep
    "qpdf/qpdf/qtest/qpdf/enc-R2,V1,U=view,O=master.pdf": "view",
    "qpdf/qpdf/qtest/qpdf/enc-R3,V2,U=view,O=master.pdf": "view",
    "qpdf/qpdf/qtest/qpdf/enc-XI-R6,V5,U=view,O=master.pdf": "view",
    "qpdf/qpdf/qtest/qpdf/enc-XI-long-password.pdf": ("qwertyuiopasdfghjklzxcvbnm" * 5)[:127],
    "qpdf/qpdf/qtest/qpdf/encrypted-40-bit-R3.pdf": "623",
    **{
        f"pypdf/resources/encryption/{n}-user-password.pdf": "asdfzxcv"
        for n in ("r2", "r3", "r4", "r5", "r6")
    },
    "pypdf/resources/encryption/r4-aes-user-password.pdf": "asdfzxcv",
    "pypdf/resources/encryption/r6-both-passwords.pdf": "foo",
    "pypdf/resources/crazyones-encrypted-256.pdf": "password",
    "sample-files/005-libreoffice-writer-password/libreoffice-writer-password.pdf": "openpassword",
    "unstructured/example-docs/pdf/password.pdf": "password",
    **{
        f"pdfminer/samples/encryption/{n}.pdf": "baz"
        for n in ("rc4-40", "rc4-128", "aes-128", "aes-128-m", "aes-256", "aes-256-m")
    },
    "pdfminer/samples/encryption/aes-256-r6.pdf": "usersecret",
    "tabula-java/src/test/resources/technology/tabula/encrypted.pdf": "userpassword",
    "pdfa-safedocs/Unicode passwords/corrigendum4/unicode-test-U2F874-correct.pdf": "Password\u5f33!",
    "pdfa-safedocs/Unicode passwords/corrigendum4/unicode-test-U2F874-wrong.pdf": "Password\U0002f874!",
}

# Reason classes: the first pattern found in a document's error names its class.
REASON_CLASSES = [
    ("encrypted, no password", r"password is required"),
    ("encrypted, wrong password", r"password given is wrong"),
    ("empty file", r"empty file"),
    ("not a PDF", r"not a PDF"),
    ("unparsable", r"cannot open"),
    ("no pages", r"no pages"),
    ("broken page tree", r"page tree"),
    ("time limit", r"exceeded its .* limit"),
    ("memory limit", r"out of memory"),
    ("worker crashed", r"crashed its worker"),
    ("pages unreadable", r"pages could not be read"),
]


def reason_class(status: str, error: str | None) -> str:
    if status == "ingested":
        return "ingested"
    for name, pattern in REASON_CLASSES:
        if error and re.search(pattern, error):
            return f"{status}: {name}"
    return f"{status}: other" if error else f"{status}: NO REASON"


class MemorySampler(threading.Thread):
    """Samples RSS every 0.2 s: the sum over this process and its descendants, this process alone,
    and the largest descendant (PDF workers, Tesseract, Ghostscript)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_tree = self.peak_main = self.peak_descendant = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.2):
            main, *rest = [_rss(pid) for pid in _tree(os.getpid())]
            self.peak_tree = max(self.peak_tree, main + sum(rest))
            self.peak_main = max(self.peak_main, main)
            self.peak_descendant = max(self.peak_descendant, max(rest, default=0))

    def stop(self) -> None:
        self._halt.set()
        self.join()


def _tree(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    out, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, parent in parents.items() if parent in frontier]
        out += frontier
    return out


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def timed_triage(path: str, options: PdfOptions, password: str | None) -> float:
    """Worker side: seconds to open and triage one file (its errors are the pipeline's business)."""
    started = time.perf_counter()
    with contextlib.suppress(Exception):  # quarantined files: the time to find out is what counts here
        triage_document(path, options, password=password)
    return time.perf_counter() - started


def triage_times(files: list[Path], corpus: Path, options: PdfOptions) -> dict[str, float | str]:
    """Per-file triage seconds (or the limit that stopped it), in limited workers like the pipeline's."""
    out: dict[str, float | str] = {}
    with PdfWorkers(options.workers, options.memory_limit_mb) as workers:
        futures = {
            str(f.relative_to(corpus)): workers.submit(
                timed_triage, str(f), options, _password(f, corpus), timeout=options.doc_timeout_s
            )
            for f in files
        }
        for name, future in futures.items():
            try:
                out[name] = round(future.result(), 3)
            except Exception as e:  # killed at the time limit, out of memory, crashed
                out[name] = f"{type(e).__name__}: {e}"
    return out


def _password(path: Path, corpus: Path) -> str | None:
    return CORPUS_PASSWORDS.get(path.relative_to(corpus).as_posix())


def documents(kb: Path, corpus: Path) -> list[dict]:
    """One row per document of the KB: file, status, reason, page counts, OCR seconds."""
    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        rows = con.execute(
            """
            SELECT d.source_uri, d.bytes, d.status, d.error, d.n_pages,
                   count(p.page_no) FILTER (WHERE p.route = 'ocr'),
                   count(p.page_no) FILTER (WHERE p.status = 'fallback'),
                   count(p.page_no) FILTER (WHERE p.status = 'failed'),
                   coalesce(sum(p.latency_ms) FILTER (WHERE p.route = 'ocr'), 0) / 1000.0,
                   count(p.page_no) FILTER (WHERE concat(p.error, p.fallback_reason) LIKE '%worker killed%'),
                   count(p.page_no) FILTER (WHERE concat(p.error, p.fallback_reason) LIKE '%tesseract timed%')
            FROM documents d LEFT JOIN pages p USING (doc_id)
            GROUP BY ALL ORDER BY d.source_uri"""
        ).fetchall()
    finally:
        con.close()
    keys = (
        "file",
        "bytes",
        "status",
        "reason",
        "pages",
        "ocr_pages",
        "fallback_pages",
        "failed_pages",
        "ocr_s",
        "pages_worker_killed",
        "pages_tesseract_killed",
    )
    out = [dict(zip(keys, r, strict=True)) for r in rows]
    for d in out:
        d["file"] = Path(d["file"]).relative_to(corpus).as_posix()
        d["ocr_s"] = round(d["ocr_s"], 2)
        d["class"] = reason_class(d["status"], d["reason"])
    return out


# Soak limits: workers killed and replaced often (time limits of seconds), Tesseract pages cut at 5 s,
# and a stall fails the run after 10 minutes instead of letting it wait.
TIGHT = {
    "pdf": {"page_timeout_s": 1.0, "doc_timeout_s": 4.0, "compress_timeout_s": 5.0},
    "engine_options": {"timeout_s": 5.0},
    "stall_timeout_s": 600.0,
}
SOAK_RUN_LIMIT_S = 1800  # wall-clock limit of one soak run (a default sweep takes ~4 min)


def sweep(corpus: Path, kb: Path, engine: str, passwords_file: Path, tight: bool = False) -> dict:
    """Run the pipeline over ``corpus`` into ``kb``; the report (without per-file triage times)."""
    files = sorted(p for p in corpus.rglob("*") if p.suffix.lower() == ".pdf" and p.is_file())
    pdf = {"settle_seconds": 0, "passwords_file": str(passwords_file)} | (TIGHT["pdf"] if tight else {})
    extra = {k: v for k, v in TIGHT.items() if k != "pdf"} if tight else {}
    options = IngestOptions.from_dict({"engine": engine, "pdf": pdf, **extra})
    sampler = MemorySampler()
    sampler.start()
    started = time.perf_counter()
    summary = run(corpus, kb, options)
    seconds = time.perf_counter() - started
    sampler.stop()
    docs = documents(kb, corpus)
    by_file = {d["file"] for d in docs}
    duplicates = {str(Path(f.path).relative_to(corpus)): other for f, other in summary.discovery.duplicates}
    missing = [str(f.relative_to(corpus)) for f in files if str(f.relative_to(corpus)) not in by_file]
    return {
        "pdf_files": len(files),
        "documents": docs,
        "pages": summary.pages,
        "seconds": round(seconds, 1),
        "pages_per_s": round(summary.pages / seconds, 2),
        "outcomes": dict(Counter(d["status"] for d in docs)),
        "reason_classes": dict(Counter(d["class"] for d in docs).most_common()),
        "no_reason": [d["file"] for d in docs if d["status"] != "ingested" and not d["reason"]],
        "without_outcome": [f for f in missing if f not in duplicates],
        "duplicates": duplicates,
        "refused": summary.discovery.refused,
        "memory_mb": {
            "peak_tree_rss": round(sampler.peak_tree / 2**20),
            "peak_main_process_rss": round(sampler.peak_main / 2**20),
            "peak_descendant_rss": round(sampler.peak_descendant / 2**20),
            "worker_address_space_cap": options.pdf.memory_limit_mb,
        },
        "options": asdict(options) | {"pdf": asdict(options.pdf) | {"passwords_file": "(corpus passwords)"}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--corpus",
        type=Path,
        default=Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus")),
    )
    parser.add_argument("--engine", default="cpu", help="engine for OCR-route pages (default: cpu)")
    parser.add_argument("--kb", type=Path, help="knowledge-base folder to keep (default: a temporary one)")
    parser.add_argument("--out", type=Path, help="results file (default: bench/results/hostile_corpus.json)")
    parser.add_argument("--tight", action="store_true", help="the soak's tight worker limits (TIGHT)")
    parser.add_argument("--soak", type=int, default=0, help="N tight sweeps back to back (the no-hang check)")
    args = parser.parse_args()
    corpus = args.corpus.resolve()
    if args.soak:
        soak(args.soak, corpus, args.engine, args.out or REPO / "bench" / "results" / "hostile_soak.json")
        return
    args.out = args.out or REPO / "bench" / "results" / "hostile_corpus.json"
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        passwords_file = Path(tmp) / "passwords.json"
        passwords_file.write_text(json.dumps(CORPUS_PASSWORDS, ensure_ascii=False), encoding="utf-8")
        kb = args.kb or Path(tmp) / "kb"
        report = sweep(corpus, kb, args.engine, passwords_file, tight=args.tight)
        files = sorted(p for p in corpus.rglob("*") if p.suffix.lower() == ".pdf" and p.is_file())
        t0 = time.perf_counter()
        triage = {} if args.tight else triage_times(files, corpus, IngestOptions().pdf)
        triage_pass_s = time.perf_counter() - t0
    for d in report["documents"]:
        d["triage_s"] = triage.get(d["file"])
    timed = [d for d in report["documents"] if isinstance(d["triage_s"], float)]
    report = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "corpus": str(corpus),
        "engine": args.engine,
        "triage_pass_seconds": round(triage_pass_s, 1),
        "slowest_triage": [
            {"file": d["file"], "seconds": d["triage_s"]}
            for d in sorted(timed, key=lambda d: -d["triage_s"])[:10]
        ]
        + [{"file": d["file"], "stopped": d["triage_s"]} for d in report["documents"] if d not in timed],
        "slowest_ocr": [
            {"file": d["file"], "ocr_s": d["ocr_s"], "ocr_pages": d["ocr_pages"]}
            for d in sorted(report["documents"], key=lambda d: -d["ocr_s"])[:10]
        ],
    } | report
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print_summary(report)
    ok = not report["no_reason"] and not report["without_outcome"]
    sys.exit(0 if ok else 1)


def machine() -> dict:
    """What the numbers were measured on."""
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "pymupdf": pymupdf.__version__}


def soak(runs: int, corpus: Path, engine: str, out: Path) -> None:
    """``runs`` tight sweeps, each a child process with a wall-clock limit; the verdicts to ``out``."""
    results = []
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        for n in range(1, runs + 1):
            run_out = Path(tmp) / f"run{n}.json"
            cmd = [sys.executable, "-m", __spec__.name, "--tight", "--engine", engine]
            cmd += ["--corpus", str(corpus)]
            started = time.perf_counter()
            try:
                code = subprocess.run([*cmd, "--out", str(run_out)], timeout=SOAK_RUN_LIMIT_S).returncode
            except subprocess.TimeoutExpired:
                code = None  # a hang: the child is killed at the limit
            seconds = round(time.perf_counter() - started, 1)
            report = json.loads(run_out.read_text(encoding="utf-8")) if run_out.exists() else None
            results.append(_soak_verdict(n, code, seconds, report))
            print(f"soak run {n}/{runs}: {results[-1]}", flush=True)
    summary = {
        "generated": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "corpus": str(corpus),
        "engine": engine,
        "tight_options": TIGHT,
        "run_limit_s": SOAK_RUN_LIMIT_S,
        "runs": results,
        "all_finished_and_recorded": all(r["finished"] and r["every_file_recorded"] for r in results),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    sys.exit(0 if summary["all_finished_and_recorded"] else 1)


def _soak_verdict(n: int, code: int | None, seconds: float, report: dict | None) -> dict:
    """One soak run: finished or not, and whether every file ended with an outcome and a reason."""
    if report is None:
        verdict = {"finished": False, "exit_code": code, "seconds": seconds, "every_file_recorded": False}
        return {"run": n} | verdict
    limited = sum(
        count for name, count in report["reason_classes"].items() if "time limit" in name or "crashed" in name
    )
    return {
        "run": n,
        "finished": code is not None,
        "exit_code": code,
        "seconds": seconds,
        "pdf_files": report["pdf_files"],
        "documents": len(report["documents"]),
        "pages": report["pages"],
        "outcomes": report["outcomes"],
        "documents_stopped_by_a_limit": limited,
        "pages_whose_worker_was_killed": sum(d["pages_worker_killed"] for d in report["documents"]),
        "pages_whose_tesseract_was_killed": sum(d["pages_tesseract_killed"] for d in report["documents"]),
        "pages_failed": sum(d["failed_pages"] for d in report["documents"]),
        "without_outcome": report["without_outcome"],
        "no_reason": report["no_reason"],
        "every_file_recorded": not report["without_outcome"] and not report["no_reason"],
    }


def print_summary(report: dict) -> None:
    print(
        f"{report['pdf_files']} PDF files, {len(report['documents'])} documents, {report['pages']} pages "
        f"in {report['seconds']} s ({report['pages_per_s']} pages/s), engine {report['engine']}"
    )
    print(f"outcomes: {report['outcomes']}")
    width = max(len(k) for k in report["reason_classes"])
    for name, n in report["reason_classes"].items():
        print(f"  {name:<{width}}  {n:>4}")
    print(f"memory (MB): {report['memory_mb']}")
    print(
        "slowest triage:",
        ", ".join(f"{d['file']} {d.get('seconds', d.get('stopped'))}" for d in report["slowest_triage"][:5]),
    )
    print("slowest OCR:", ", ".join(f"{d['file']} {d['ocr_s']} s" for d in report["slowest_ocr"][:5]))
    for key in ("no_reason", "without_outcome"):
        if report[key]:
            print(f"{key}: {report[key]}")


if __name__ == "__main__":
    main()
