"""Header rows set apart by weight only (``tables/bold_header.py``): tables of names and places, no
numbers in the body, on pages made here, and the corpus tables whose bold first rows are headers."""

from __future__ import annotations

import pymupdf
import pytest

from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
from chandra_ocr.tables.page import page_tables

NAMES = [("Ada Lovelace", "London", "Mathematics"), ("Alan Turing", "Wilmslow", "Logic"),
         ("Grace Hopper", "Arlington", "Compilers"), ("Edsger Dijkstra", "Nuenen", "Algorithms"),
         ("Barbara Liskov", "Boston", "Abstraction"), ("John Backus", "Ashland", "Languages")]  # fmt: skip


def _tables(page: pymupdf.Page):
    textpage = page.get_textpage(flags=TEXT_FLAGS)
    read = read_page(page, textpage)
    return page_tables(page, read.blocks, textpage, read.stats.row_splits)[1]


def _page(head_font: str, body_font: str = "helv") -> pymupdf.Page:
    page = pymupdf.open().new_page(width=612, height=792)
    for n, row in enumerate([("Name", "Town", "Field"), *NAMES]):
        font = head_font if n == 0 else body_font
        for x, text in zip((72, 250, 400), row, strict=True):
            page.insert_text((x, 100 + 14 * n), text, fontsize=10, fontname=font)
    return page


def test_a_bold_first_row_over_a_body_without_numbers_is_the_header():
    (table,) = _tables(_page("hebo"))
    assert table.header == ("Name", "Town", "Field")
    assert {c.text for c in table.cells if c.is_header} == {"Name", "Town", "Field"}
    assert table.html and table.html.startswith("<table><thead><tr><td>Name</td>")


@pytest.mark.parametrize(("head", "body"), [("helv", "helv"), ("hebo", "hebo")])
def test_weight_that_sets_nothing_apart_makes_no_header(head, body):
    (table,) = _tables(_page(head, body))
    assert table.header == () and not any(c.is_header for c in table.cells)


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("path", "header"),
    [
        ("tabula-java/src/test/resources/technology/tabula/argentina_diputados_voting_record.pdf",
         ("Apellido y Nombre", "Bloque político", "Provincia")),
        ("camelot/tests/files/twotables_2.pdf",
         ("State", "n", "Literacy Status / Illiterate", "Literacy Status / Read & Write")),
    ],
)  # fmt: skip
def test_corpus_tables_with_bold_header_rows(corpus, path, header):
    with pymupdf.open(corpus / path) as doc:
        tables = _tables(doc[0])
    assert tables and all(t.header[: len(header)] == header for t in tables)
