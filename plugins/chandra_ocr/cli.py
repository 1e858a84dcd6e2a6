"""`chandra-ingest`: run the pipeline, show status, query the knowledge base, feed and search its vectors."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from chandra_ocr import preflight
from chandra_ocr.cli_flags import add_run_flags, options_from_args
from chandra_ocr.console import EXIT_CODES_HELP, INCOMPLETE, OK, emit, guarded, print_json, refused_sql
from chandra_ocr.errors import ConfigError
from chandra_ocr.extras import missing_extra
from chandra_ocr.report.data import run_incomplete
from chandra_ocr.run_settings import flag_message, positive
from chandra_ocr.sources.discover import recent_note
from chandra_ocr.sources.source import open_source
from chandra_ocr.store.duckdb_store import connect

RECENT_SHOWN = 5  # files skipped as still being written that a run names


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="debug logging"
    )
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
    )
    parser = argparse.ArgumentParser(
        prog="chandra-ingest", description=__doc__, epilog=EXIT_CODES_HELP, parents=[common]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES_HELP, parents=[common])

    add_run_flags(add("run", "ingest new PDFs from SOURCE (folder or glob) into the knowledge base"))

    status = add("status", "documents and pages by status")
    status.add_argument("--kb", required=True)
    status.add_argument("--json", action="store_true", help="a JSON array of rows instead of a grid")

    report = add("report", "write the run report: one self-contained HTML page and a PNG")
    report.add_argument("--kb", required=True)
    report.add_argument("--out", help="folder for report.html and report.png (default: KB/report)")

    query = add("query", "run one SQL statement against kb.duckdb (read-only)")
    query.add_argument("--kb", required=True)
    query.add_argument("sql", help='e.g. "SELECT file_name, status FROM documents"; "SHOW TABLES" lists them')
    query.add_argument("--json", action="store_true", help="a JSON array of rows instead of a grid")
    _vector_parsers(add)
    return parser


def _vector_parsers(add) -> None:
    """The table, forget, compact, feed and search subcommands."""
    table = add("table", "print one table with its header as column names")
    table.add_argument("--kb", required=True)
    table.add_argument("doc", help="doc_id, a unique doc_id prefix, or the file name")
    table.add_argument("page", type=int)
    table.add_argument("table_no", type=int, help="1-based table number on the page")
    table.add_argument("--csv", action="store_true", help="CSV on stdout instead of a grid")

    forget = add("forget", "remove documents (rows, exports; vectors on the next feed)")
    forget.add_argument("--kb", required=True)
    forget.add_argument("docs", nargs="+", help="doc_ids, unique doc_id prefixes, or file names")

    compact = add("compact", "merge the Parquet files under KB/parquet/ and drop replaced or forgotten rows")
    compact.add_argument("--kb", required=True)

    feed = add("feed", "export changed chunks to the outbox and apply them to the vector index")
    feed.add_argument("--kb", required=True)
    feed.add_argument("--index", help="vector index folder (default: KB/vector)")
    feed.add_argument(
        "--target",
        help="a LangChain vector store to sync instead of the index: JSON or a JSON file "
        "(default: $CHANDRA_OCR_VECTOR_TARGET; README, 'Vector stores')",
    )
    feed.add_argument("--json", action="store_true", help="the export's and the index's counts as JSON")

    search = add("search", "the k best pages' chunks for a question (words and meaning, fused)")
    search.add_argument("--kb", required=True)
    search.add_argument("question")
    search.add_argument("-k", type=int, default=5)
    search.add_argument("--doc", help="search one document (its file name or doc_id)")
    search.add_argument("--index", help="vector index folder (default: KB/vector)")
    search.add_argument("--target", help="search a LangChain vector store instead (as for `feed`)")

    serve = add(
        "serve",
        "browse the knowledge base in a web browser: documents, pages with their boxes, review, search",
    )
    serve.add_argument("--kb", required=True)
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default %(default)s: this machine only)"
    )
    serve.add_argument("--port", type=int, default=8765, help="default %(default)s; 0 picks a free port")


def _cmd_run(args: argparse.Namespace) -> int:
    from chandra_ocr.pipeline import run

    options = options_from_args(args)
    positive(args.max_documents, "max_documents")
    source = open_source(args.source)
    layout = preflight.check_run(source, args.kb, options, engine_here=True)
    engine = preflight.ready_engine(options)
    try:
        summary = run(source, args.kb, options, engine, limit=args.max_documents)
    finally:
        engine.close()
    _print_discovery(summary.discovery, args.settle_seconds)
    rate = summary.pages / summary.seconds if summary.seconds else 0.0
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(summary.statuses.items())) or "none new"
    print(f"documents: {statuses}; {summary.pages} pages in {summary.seconds:.1f} s ({rate:.2f} pages/s)")
    for run_id, n in sorted(summary.elsewhere.items()):
        print(f"  {n} left to run {run_id}, which claimed or loaded them first")
    incomplete = run_incomplete(layout, summary.run_id) if summary.batches else []
    for name, status, error, _run in incomplete:
        print(f"  {status}: {name}: {error}")
    print(f"knowledge base: {layout.duckdb_path}")
    if summary.discovery.new:
        print(f'next: chandra-ingest query --kb {args.kb} "SELECT file_name, status, n_pages FROM documents"')
    return INCOMPLETE if incomplete else OK


def _print_discovery(d, settle_seconds: float) -> None:
    """What discovery found, naming the files it skipped or refused."""
    print(
        f"found {len(d.new)} new, {len(d.known)} already ingested, {len(d.duplicates)} duplicates, "
        f"{len(d.recent)} still being written, {len(d.refused)} refused"
    )
    print(f"  {d.unchanged} unchanged since the last run (not read), {d.hashed} read and hashed "
          f"({d.bytes_read} bytes)")  # fmt: skip
    for path, other in ((f.path, first) for f, first in d.duplicates):
        print(f"  duplicate: {path} (same bytes as {other})")
    for path, reason in d.refused:
        print(f"  refused: {path}: {reason}")
    if d.gone:
        more = f" and {len(d.gone) - 5} more" if len(d.gone) > 5 else ""
        print(f"  gone from the source since the last run (kept in the KB; `forget` removes them): "
              f"{', '.join(d.gone[:5])}{more}")  # fmt: skip
    note = recent_note(d.recent, settle_seconds, "--settle-seconds 0", RECENT_SHOWN)
    if note:
        print(f"  {note}")


_STATUS_SQL = """
SELECT d.status, count(DISTINCT d.doc_id) AS documents, count(p.page_no) AS pages,
       count(p.page_no) FILTER (WHERE p.route = 'ocr') AS ocr_pages,
       count(p.page_no) FILTER (WHERE p.status = 'fallback') AS fallback_pages,
       count(p.page_no) FILTER (WHERE p.status = 'failed') AS failed_pages
FROM documents d LEFT JOIN pages p USING (doc_id) GROUP BY d.status ORDER BY d.status"""


def _cmd_status(args: argparse.Namespace) -> int:
    return _print_query(args.kb, _STATUS_SQL, as_json=args.json)


def _cmd_query(args: argparse.Namespace) -> int:
    return _print_query(args.kb, args.sql, as_json=args.json)


def _cmd_report(args: argparse.Namespace) -> int:
    from chandra_ocr.report import write_report

    preflight.check_kb_exists(args.kb)
    files = write_report(args.kb, args.out)
    print(f"report: {files.html}\noverview: {files.png}")
    return OK


def _print_query(kb: str, sql: str, *, as_json: bool) -> int:
    con = connect(preflight.check_kb_exists(kb), read_only=True)
    try:
        with refused_sql():
            emit(con.sql(sql), as_json=as_json, max_rows=100)
    finally:
        con.close()
    return OK


def _cmd_table(args: argparse.Namespace) -> int:
    from chandra_ocr.store.table_view import resolve_document, table_relation

    con = connect(preflight.check_kb_exists(args.kb), read_only=True)
    try:
        with refused_sql():
            relation = table_relation(con, resolve_document(con, args.doc), args.page, args.table_no)
            if args.csv:
                _write_csv(relation)
            else:
                relation.show(max_width=200, max_rows=1000)
    finally:
        con.close()
    return OK


def _write_csv(relation) -> None:
    import csv

    writer = csv.writer(sys.stdout)
    writer.writerow(relation.columns)
    writer.writerows(relation.fetchall())


def _cmd_forget(args: argparse.Namespace) -> int:
    from chandra_ocr.store.duckdb_store import forget_documents
    from chandra_ocr.store.table_view import resolve_document

    layout = preflight.check_kb_exists(args.kb)
    con = connect(layout, read_only=True)
    try:
        doc_ids = [resolve_document(con, ref) for ref in args.docs]
    finally:
        con.close()
    counts = forget_documents(layout, doc_ids)
    print(
        f"forgot {len(doc_ids)} document(s): {counts['chunks']} chunks tombstoned; run `feed` to drop vectors"
    )
    return OK


def _cmd_compact(args: argparse.Namespace) -> int:
    from chandra_ocr.store.compact import compact_kb

    counts = compact_kb(preflight.check_kb_exists(args.kb))
    for table, (before, after) in counts.items():
        print(f"{table}: {before} → {after} Parquet file(s)")
    return OK


def _cmd_feed(args: argparse.Namespace) -> int:
    from chandra_ocr.vector.feed import VectorFeed
    from chandra_ocr.vector.outbox import export_changes
    from chandra_ocr.vector.target import VectorTarget

    layout = preflight.check_kb_exists(args.kb)
    target = VectorTarget.parse(args.target) if args.target else VectorTarget.from_env()
    feed = VectorFeed(target, Path(args.index) if args.index else None)
    export = export_changes(layout)
    counts = feed(layout)
    if args.json:
        where = feed.where(layout)
        key = "store_counts" if target is not None else "index_counts"
        vectors = dataclasses.asdict(counts.vectors) if counts.vectors is not None else None
        print_json(
            {"export_no": export.export_no, "outbox_file": str(export.path) if export.path else None,
             "upserts": export.upserts, "deletes": export.deletes, **where, key: vectors,
             "lexical_counts": dataclasses.asdict(counts.lexical)}
        )  # fmt: skip
        return OK
    print(export.summary())
    print(counts.summary())
    return OK


def _cmd_search(args: argparse.Namespace) -> int:
    from chandra_ocr.vector.search import search_kb
    from chandra_ocr.vector.target import VectorTarget

    layout = preflight.check_kb_exists(args.kb)
    target = VectorTarget.parse(args.target) if args.target else VectorTarget.from_env()
    result = search_kb(
        layout,
        args.question,
        k=args.k,
        doc=args.doc,
        index_dir=Path(args.index) if args.index else None,
        store=target.build() if target is not None else None,
    )
    if result.note:
        print(f"note: {result.note}", file=sys.stderr)
    for rank, hit in enumerate(result.hits, start=1):
        pages = f"p. {hit.page_start}" + (f"-{hit.page_end}" if hit.page_end != hit.page_start else "")
        where = " > ".join(hit.header_path)
        print(f"{rank}. {hit.score:.4f}  {hit.file_name}  {pages}  [{hit.kind}] {where}")
        print("   " + " ".join(hit.text.split())[:300])
    return OK


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from chandra_ocr.browser.app import create_app, fixed_target
    except ImportError as e:
        raise ConfigError(
            missing_extra("browser", f"the browser (fastapi, uvicorn, jinja2: {e.name})")
        ) from None
    import pymupdf  # noqa: F401  (imported now, not by the first page view)

    layout = preflight.check_kb_exists(args.kb)
    app = create_app(fixed_target(layout.root))
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    sock = config.bind_socket()
    sock.listen(config.backlog)  # connections queue from now on, so the line below may name the port
    host, port = sock.getsockname()[:2]
    where = "this machine only" if host in ("127.0.0.1", "::1") else "every machine that can reach this one"
    kb = layout.root.resolve()
    print(f"knowledge base {kb}: http://{host}:{port}/ (listening for {where}; Ctrl-C stops)", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
    return OK


COMMANDS = {
    "run": _cmd_run,
    "status": _cmd_status,
    "query": _cmd_query,
    "report": _cmd_report,
    "table": _cmd_table,
    "forget": _cmd_forget,
    "compact": _cmd_compact,
    "feed": _cmd_feed,
    "search": _cmd_search,
    "serve": _cmd_serve,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``chandra-ingest`` console script; returns the exit code (see ``console``)."""
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return guarded(lambda: _flagged(COMMANDS[args.command], args), debug=getattr(args, "debug", False))


def _flagged(command, args: argparse.Namespace) -> int:
    """``command``, its configuration errors naming the CLI's flags where the library names settings."""
    try:
        return command(args)
    except ConfigError as e:
        raise ConfigError(flag_message(str(e))) from e


if __name__ == "__main__":
    sys.exit(main())
