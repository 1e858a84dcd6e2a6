"""The browser's FastAPI app: HTML pages rendered by Jinja2 with autoescaping, one read-only KB
connection per request, page images from ``images.PageImages``.

Nothing from a document reaches a page unescaped: templates autoescape every value, block data for
the page script travels as JSON inside a ``<script type="application/json">`` element (``tojson``
escapes ``<``, ``>``, ``&`` and quotes) and the script puts text in the page with ``textContent``
only. A Content-Security-Policy allows scripts from this app alone, so an injected inline script
would not run even if it got through. Requests name documents by doc_id and pages by number, both
checked; no path from a request is ever opened.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, FileSystemLoader

from chandra_ocr.browser import queries
from chandra_ocr.browser.images import PageImages, SourceUnavailable
from chandra_ocr.errors import ConfigError, NotFoundError
from chandra_ocr.extras import embedding_installed
from chandra_ocr.store.duckdb_store import connect
from chandra_ocr.store.layout import KbLayout

HERE = Path(__file__).parent
STATIC = {"browser.css": "text/css", "browser.js": "text/javascript"}
CSP = (
    "default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'self'"
)
LABEL_COLOURS = {
    "title": "#6a1b9a", "section_header": "#8e24aa", "text": "#1e88e5", "list": "#00897b",
    "table": "#e53935", "figure": "#fb8c00", "caption": "#6d4c41", "footnote": "#757575",
    "formula": "#3949ab", "code": "#546e7a", "page_header": "#9e9e9e", "page_footer": "#9e9e9e",
    "form": "#c0ca33", "other": "#ad1457",
}  # fmt: skip


@dataclass
class KbTarget:
    """The knowledge base a request reads and how its page images are drawn."""

    layout: KbLayout
    images: PageImages = field(default_factory=PageImages)


class _Search:
    """The search of ``chandra-ingest search`` (``search_kb``), with one embedder loaded on first use."""

    def __init__(self) -> None:
        self._embedder: Any = None
        self._lock = threading.Lock()

    def hits(self, layout: KbLayout, question: str, k: int) -> tuple[list[Any], str | None]:
        """(hits, None), or (hits, a note: why there are none, or why they match words only)."""
        from chandra_ocr.vector.search import search_kb

        try:
            with self._lock:
                if self._embedder is None and embedding_installed():
                    from chandra_ocr.vector.embedder import Embedder

                    self._embedder = Embedder()
                result = search_kb(layout, question, k, embedder=self._embedder)
                return result.hits, result.note
        except ConfigError as e:
            return [], str(e)


def create_app(
    target: Callable[[], KbTarget], *, dependencies: Sequence[Any] = (), title: str = "Knowledge base"
) -> FastAPI:
    """The browser over the KB ``target()`` names (called per request, so a changed setting applies).

    ``dependencies`` guard every route (under Airflow: its authenticated-user dependency).
    """
    app = FastAPI(
        title=title, dependencies=list(dependencies), docs_url=None, redoc_url=None, openapi_url=None
    )
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True)
    search = _Search()

    def render(request: Request, name: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        html = env.get_template(name).render(root=root, title=title, colours=LABEL_COLOURS, **values)
        return HTMLResponse(html, status_code=status_code, headers={"Content-Security-Policy": CSP})

    @app.exception_handler(ConfigError)
    def settings_error(request: Request, error: ConfigError) -> HTMLResponse:
        """A setting the browser cannot use (under Airflow: e.g. a malformed Variable): its message."""
        return render(request, "error.html", 500, message=str(error))

    def read(request: Request, name: str, fill: Callable[[duckdb.DuckDBPyConnection, KbTarget], dict]):
        kb = target()
        if not kb.layout.duckdb_path.is_file():
            why = f"no knowledge base at {kb.layout.root} yet: the first run (CLI or DAG) creates it"
            return render(request, "error.html", 404, message=why, kb=str(kb.layout.root))
        con = connect(kb.layout, read_only=True)
        try:
            values = fill(con, kb)
        except NotFoundError as e:
            return render(request, "error.html", 404, message=str(e), kb=str(kb.layout.root))
        finally:
            con.close()
        return render(request, name, kb=str(kb.layout.root), **values)

    @app.get("/", response_class=HTMLResponse)
    def documents(
        request: Request,
        status: str | None = Query(None),
        flagged: bool = Query(False),
        after: str | None = Query(None),
    ):
        status = status if status in queries.DOC_STATUSES else None
        try:
            cursor = queries.Cursor.parse(after) if after else None
        except (ValueError, NotFoundError):
            cursor = None

        def fill(con, kb):
            rows, nxt = queries.documents(con, status=status, flagged=flagged, after=cursor)
            return {
                "docs": rows, "next": nxt.token() if nxt else None, "status": status, "flagged": flagged,
                "statuses": queries.DOC_STATUSES, "counts": queries.status_counts(con),
                "runs": queries.recent_runs(con), "paged": cursor is not None,
            }  # fmt: skip

        return read(request, "documents.html", fill)

    @app.get("/doc/{doc_id}", response_class=HTMLResponse)
    def document(request: Request, doc_id: str):
        return read(request, "document.html", lambda con, kb: {"doc": queries.document(con, doc_id)})

    @app.get("/doc/{doc_id}/page/{page_no}", response_class=HTMLResponse)
    def page_view(request: Request, doc_id: str, page_no: int, block: int | None = Query(None)):
        def fill(con, kb):
            page = queries.page(con, doc_id, page_no)
            try:
                kb.images.png(doc_id, page_no, page["source_uri"], page["source_bytes"])
                image_error = None
            except SourceUnavailable as e:
                image_error = str(e)
            blocks = [{k: b[k] for k in ("block_no", "label", "text")} for b in page["blocks"]]
            return {"page": page, "image_error": image_error, "picked": block, "blocks_json": blocks}

        return read(request, "page.html", fill)

    @app.get("/doc/{doc_id}/page/{page_no}/image.png")
    def page_image(doc_id: str, page_no: int):
        kb = target()
        con = connect(kb.layout, read_only=True)
        try:
            rows = con.execute(
                "SELECT source_uri, bytes FROM documents WHERE doc_id = ?", [queries.check_doc_id(doc_id)]
            ).fetchall()
        except NotFoundError:
            rows = []
        finally:
            con.close()
        if not rows:
            return Response("no such document", status_code=404, media_type="text/plain")
        try:
            data = kb.images.png(doc_id, page_no, rows[0][0], rows[0][1])
        except SourceUnavailable as e:
            return Response(str(e), status_code=404, media_type="text/plain")
        return Response(data, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})

    @app.get("/review", response_class=HTMLResponse)
    def review(request: Request):
        return read(request, "review.html", lambda con, kb: {"review": queries.review(con)})

    @app.get("/search", response_class=HTMLResponse)
    def search_page(request: Request, q: str = Query("", max_length=500), k: int = Query(10, ge=1, le=50)):
        def fill(con, kb):
            if not q.strip():
                return {"q": q, "hits": [], "tables": [], "hits_note": None}
            hits, note = search.hits(kb.layout, q, k)
            where = queries.chunk_blocks(con, [h.chunk_id for h in hits]) if hits else {}
            found = [{"hit": h, "page_no": where.get(h.chunk_id, (h.page_start, None))[0],
                      "block_no": where.get(h.chunk_id, (h.page_start, None))[1]} for h in hits]  # fmt: skip
            return {"q": q, "hits": found, "hits_note": note, "tables": queries.table_search(con, q)}

        return read(request, "search.html", fill)

    @app.get("/static/{name}")
    def static(name: str):
        if name not in STATIC:  # a fixed list: no request path reaches the file system
            return Response("not found", status_code=404, media_type="text/plain")
        return Response((HERE / "static" / name).read_bytes(), media_type=STATIC[name])

    return app


def fixed_target(kb: str | Path) -> Callable[[], KbTarget]:
    """``target`` of the standalone app: one KB folder, sources read with the process's credentials."""
    one = KbTarget(KbLayout(Path(kb).resolve()))
    return lambda: one
