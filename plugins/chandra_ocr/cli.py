"""`chandra-ingest`: run the pipeline, show status, query the knowledge base, feed and search its vectors."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from chandra_ocr.config import ENGINE_KINDS, IngestOptions, PdfOptions
from chandra_ocr.errors import ChandraOcrError
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chandra-ingest", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="ingest new PDFs from SOURCE (folder or glob) into the knowledge base")
    run.add_argument("source")
    run.add_argument("--kb", required=True, help="knowledge-base folder (Parquet shards + kb.duckdb)")
    run.add_argument("--engine", default="auto", choices=ENGINE_KINDS, help="engine for OCR-route pages")
    run.add_argument("--preset", default="chandra2", help="model preset for the vllm/openai engines")
    run.add_argument("--batch-pages", type=int, default=200)
    run.add_argument(
        "--settle-seconds",
        type=float,
        default=30.0,
        help="skip files modified this recently (still being written)",
    )
    run.add_argument("--no-compress", action="store_true", help="skip Ghostscript/PyMuPDF pre-compression")
    run.add_argument("--workers", type=int, default=2, help="PDF worker processes")
    run.add_argument(
        "--passwords-file",
        help="JSON {doc_id | path ending | file name: password} for encrypted PDFs (never logged)",
    )
    run.add_argument("--limit", type=int, help="at most this many new documents")
    run.add_argument(
        "--reprocess", action="store_true", help="redo documents ingested under an older pipeline version"
    )
    run.add_argument(
        "--engine-option",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="engine option, e.g. max_attempts=3 (repeatable)",
    )

    status = sub.add_parser("status", help="documents and pages by status")
    status.add_argument("--kb", required=True)

    report = sub.add_parser("report", help="write the run report: one self-contained HTML page and a PNG")
    report.add_argument("--kb", required=True)
    report.add_argument("--out", help="folder for report.html and report.png (default: KB/report)")

    query = sub.add_parser("query", help="run one SQL statement against kb.duckdb (read-only)")
    query.add_argument("--kb", required=True)
    query.add_argument("sql")
    _vector_parsers(sub)
    return parser


def _vector_parsers(sub) -> None:
    """The table, forget, feed and search subcommands."""
    table = sub.add_parser("table", help="print one table with its header as column names")
    table.add_argument("--kb", required=True)
    table.add_argument("doc", help="doc_id, a unique doc_id prefix, or the file name")
    table.add_argument("page", type=int)
    table.add_argument("table_no", type=int, help="1-based table number on the page")
    table.add_argument("--csv", action="store_true", help="CSV on stdout instead of a grid")

    forget = sub.add_parser(
        "forget", help="remove documents (rows, shards, exports; vectors on the next feed)"
    )
    forget.add_argument("--kb", required=True)
    forget.add_argument("docs", nargs="+", help="doc_ids, unique doc_id prefixes, or file names")

    feed = sub.add_parser(
        "feed", help="export changed chunks to the outbox and apply them to the vector index"
    )
    feed.add_argument("--kb", required=True)
    feed.add_argument("--index", help="vector index folder (default: KB/vector)")

    search = sub.add_parser("search", help="top-k chunks for a question from the vector index")
    search.add_argument("--kb", required=True)
    search.add_argument("question")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--index", help="vector index folder (default: KB/vector)")


def _engine_options(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def _cmd_run(args: argparse.Namespace) -> int:
    from chandra_ocr.pipeline import run

    options = IngestOptions(
        engine=args.engine,
        preset=args.preset,
        batch_pages=args.batch_pages,
        reprocess=args.reprocess,
        pdf=PdfOptions(
            settle_seconds=args.settle_seconds,
            compress=not args.no_compress,
            workers=args.workers,
            passwords_file=args.passwords_file,
        ),
        engine_options=_engine_options(args.engine_option),
    )
    summary = run(args.source, args.kb, options, limit=args.limit)
    d = summary.discovery
    print(
        f"run {summary.run_id}: {len(d.new)} new, {len(d.known)} already ingested, "
        f"{len(d.duplicates)} duplicates, {len(d.recent)} still being written, {len(d.refused)} refused"
    )
    for path, other in ((f.path, first) for f, first in d.duplicates):
        print(f"  duplicate: {path} (same bytes as {other})")
    for path, reason in d.refused:
        print(f"  refused: {path}: {reason}")
    rate = summary.pages / summary.seconds if summary.seconds else 0.0
    print(
        f"documents by status: {summary.statuses}; {summary.pages} pages in {summary.seconds:.1f} s "
        f"({rate:.2f} pages/s)"
    )
    print(f"knowledge base: {KbLayout(Path(args.kb)).duckdb_path}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    return _print_query(
        args.kb,
        """
        SELECT d.status, count(DISTINCT d.doc_id) AS documents, count(p.page_no) AS pages,
               count(p.page_no) FILTER (WHERE p.route = 'ocr') AS ocr_pages,
               count(p.page_no) FILTER (WHERE p.status = 'fallback') AS fallback_pages,
               count(p.page_no) FILTER (WHERE p.status = 'failed') AS failed_pages
        FROM documents d LEFT JOIN pages p USING (doc_id) GROUP BY d.status ORDER BY d.status""",
    )


def _cmd_report(args: argparse.Namespace) -> int:
    from chandra_ocr.report import write_report

    files = write_report(args.kb, args.out)
    print(f"report: {files.html}\noverview: {files.png}")
    return 0


def _print_query(kb: str, sql: str) -> int:
    layout = KbLayout(Path(kb))
    if not layout.duckdb_path.exists():
        print(f"no knowledge base at {layout.duckdb_path}", file=sys.stderr)
        return 1
    con = connect(layout, read_only=True)
    try:
        con.sql(sql).show(max_width=200, max_rows=100)
    finally:
        con.close()
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    from chandra_ocr.store.table_view import resolve_document, table_relation

    con = connect(KbLayout(Path(args.kb)), read_only=True)
    try:
        relation = table_relation(con, resolve_document(con, args.doc), args.page, args.table_no)
        if args.csv:
            _write_csv(relation)
        else:
            relation.show(max_width=200, max_rows=1000)
    finally:
        con.close()
    return 0


def _write_csv(relation) -> None:
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(relation.columns)
    writer.writerows(relation.fetchall())


def _cmd_forget(args: argparse.Namespace) -> int:
    from chandra_ocr.store.duckdb_store import forget_documents
    from chandra_ocr.store.table_view import resolve_document

    layout = KbLayout(Path(args.kb))
    con = connect(layout, read_only=True)
    try:
        doc_ids = [resolve_document(con, ref) for ref in args.docs]
    finally:
        con.close()
    counts = forget_documents(layout, doc_ids)
    print(
        f"forgot {len(doc_ids)} document(s): {counts['chunks']} chunks tombstoned; run `feed` to drop vectors"
    )
    return 0


def _cmd_feed(args: argparse.Namespace) -> int:
    from chandra_ocr.feed import export_changes
    from chandra_ocr.vector.consumer import apply_outbox

    layout = KbLayout(Path(args.kb))
    export = export_changes(layout)
    counts = apply_outbox(layout, Path(args.index) if args.index else None)
    print(f"export {export.export_no}: {export.upserts} upserts, {export.deletes} deletes; index: {counts}")
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    from chandra_ocr.vector.consumer import default_index_dir, search_index
    from chandra_ocr.vector.embedder import Embedder

    layout = KbLayout(Path(args.kb))
    index_dir = Path(args.index) if args.index else default_index_dir(layout)
    for rank, hit in enumerate(search_index(index_dir, args.question, Embedder(), k=args.k), start=1):
        pages = f"p. {hit.page_start}" + (f"-{hit.page_end}" if hit.page_end != hit.page_start else "")
        where = " > ".join(hit.header_path)
        print(f"{rank}. {hit.score:.3f}  {hit.file_name}  {pages}  [{hit.kind}] {where}")
        print("   " + " ".join(hit.text.split())[:300])
    return 0


_VECTOR_COMMANDS = {"table": _cmd_table, "forget": _cmd_forget, "feed": _cmd_feed, "search": _cmd_search}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``chandra-ingest`` console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "status":
            return _cmd_status(args)
        if args.command == "report":
            return _cmd_report(args)
        if args.command in _VECTOR_COMMANDS:
            return _VECTOR_COMMANDS[args.command](args)
        return _print_query(args.kb, args.sql)
    except ChandraOcrError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
