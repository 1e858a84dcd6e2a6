"""One stored table as a DuckDB relation with its header labels as column names (in table order)."""

from __future__ import annotations

import duckdb

from chandra_ocr.errors import NotFoundError


def resolve_document(con: duckdb.DuckDBPyConnection, ref: str) -> str:
    """The doc_id that ``ref`` names: a doc_id, a unique doc_id prefix (≥ 6 characters) or a file name.

    Raises NotFoundError when nothing or more than one document matches.
    """
    rows = con.execute(
        "SELECT DISTINCT doc_id FROM documents WHERE doc_id = $r OR file_name = $r "
        "OR (length($r) >= 6 AND starts_with(doc_id, $r)) ORDER BY doc_id",
        {"r": ref},
    ).fetchall()
    if len(rows) != 1:
        what = "no document" if not rows else f"{len(rows)} documents"
        raise NotFoundError(f"{what} match {ref!r}; give a doc_id, a longer prefix or a file name")
    return rows[0][0]


def table_relation(con: duckdb.DuckDBPyConnection, doc_id: str, page_no: int, table_no: int):
    """The body rows of one table as a relation: ``row`` then one VARCHAR column per table column.

    Columns are named like ``kb_table_cells`` names them (header label, ``colN`` when empty,
    `` (N)`` appended to repeated labels) and keep the table's order. Raises NotFoundError when the
    table does not exist.
    """
    args = [doc_id, int(page_no), int(table_no)]
    columns = con.execute(
        "SELECT DISTINCT col, column_name FROM kb_table_cells(?, ?, ?) ORDER BY col", args
    ).fetchall()
    if not columns:
        raise NotFoundError(f"no table {table_no} on page {page_no} of document {doc_id}")
    # Column names come from the document (header labels): they are set on the Arrow result, never
    # spliced into SQL text; the query itself names its columns c0, c1, ...
    picks = ", ".join(
        f"max(text) FILTER (WHERE col = {int(col)}) AS c{i}" for i, (col, _) in enumerate(columns)
    )
    sql = (
        f'SELECT "row", {picks} FROM kb_table_cells($doc, $page, $tab) '
        'WHERE NOT is_header GROUP BY "row" ORDER BY "row"'
    )
    rows = con.sql(sql, params={"doc": doc_id, "page": int(page_no), "tab": int(table_no)}).to_arrow_table()
    return con.from_arrow(rows.rename_columns(["row", *(str(name) for _, name in columns)]))
