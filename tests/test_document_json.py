"""The JSON export of the document model: every field of every page, block, table and cell."""

from __future__ import annotations

import dataclasses
import json

from chandra_ocr.document import Block, Document, Page
from chandra_ocr.store.exports import document_json
from chandra_ocr.tables.markup import table_from_rows


def test_json_export_is_the_whole_model():
    """``document_json`` builds its dicts by hand (``asdict`` deep-copies, slowly); it must still say
    exactly what ``asdict`` says, down to the table cells."""
    table = table_from_rows(
        [[("a", 1, 2)], [("1", 1, 1), ("2", 1, 1)]], table_no=1, bbox=(1.0, 2.0, 3.0, 4.0)
    )
    page = Page(1, 612.0, 792.0, route="text", engine="text", route_reason="text layer")
    page.blocks = [Block(0, "section_header", (1.0, 2.0, 3.0, 4.0), "Title", level=1)]
    page.tables = [table]
    doc = Document("d" * 64, "/in/a.pdf", "a.pdf", 123, n_pages=1, pipeline_version="2", engine="text")
    doc.pages = [page]
    expected = json.loads(json.dumps(dataclasses.asdict(doc)))
    assert json.loads(document_json(doc)) == expected
    assert expected["pages"][0]["tables"][0]["cells"][0] == {
        "row": 0,
        "col": 0,
        "text": "a",
        "rowspan": 1,
        "colspan": 2,
        "is_header": True,
        "header_level": 1,
    }
