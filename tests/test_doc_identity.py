"""What a document says it is, read from its first pages' blocks and its running lines."""

from __future__ import annotations

from chandra_ocr.doc_identity import identify
from chandra_ocr.document import Block, Document, Page


def _doc(*pages: list[tuple[str, str]]) -> Document:
    out = []
    for n, blocks in enumerate(pages, start=1):
        made = [Block(i, label, (0, 10 * i, 100, 10 * i + 8), text) for i, (label, text) in enumerate(blocks)]
        out.append(Page(n, 612, 792, "text", "text", blocks=made))
    return Document("d" * 64, "/x/d.pdf", "d.pdf", 1, n_pages=len(out), pages=out)


def test_a_filing_cover_names_registrant_form_and_fiscal_year():
    doc = _doc(
        [
            ("section_header", "UNITED STATES SECURITIES AND EXCHANGE COMMISSION"),
            ("section_header", "FORM 10-K (Mark One)"),
            (
                "text",
                "x ANNUAL REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934",
            ),
            ("text", "For the fiscal year ended February 2, 2019"),
            (
                "text",
                "Commission file number 1-9595 ___ BEST BUY CO., INC. (Exact name of registrant as …)",
            ),
        ]
    )
    identity = identify(doc)
    assert (identity.issuer, identity.title) == ("BEST BUY CO., INC.", "Form 10-K annual report")
    assert identity.period == "for the fiscal year ended February 2, 2019 (FY2019)"
    assert identity.line.startswith("BEST BUY CO., INC. · Form 10-K annual report · for the fiscal year")


def test_the_registrant_on_the_line_before_or_after_the_file_number():
    before = _doc(
        [("section_header", "NIKE, Inc."), ("text", "(Exact name of Registrant as specified in its charter)")]
    )
    assert identify(before).issuer == "NIKE, Inc."
    after = _doc(
        [
            ("text", "FORM 10-Q"),
            ("text", "| Commission File Number 001-37845 |"),
            ("text", "MICROSOFT CORPORATION"),
        ],
        [("text", "For the Quarterly Period Ended December 31, 2022")],
    )
    identity = identify(after)
    assert (identity.issuer, identity.title) == ("MICROSOFT CORPORATION", "Form 10-Q")
    assert identity.period == "for the quarterly period ended December 31, 2022"


def test_a_report_without_a_cover_is_named_by_its_title_and_running_line():
    pages = [[("section_header", "Water Quality Report"), ("text", "Body.")]]
    pages += [[("text", f"Body {n}."), ("page_footer", "Regional Water Authority")] for n in range(2, 6)]
    pages += [[("page_header", "PART II")] for _ in range(4)]
    identity = identify(_doc(*pages))
    assert (identity.issuer, identity.title, identity.period) == (
        "Regional Water Authority",
        "Water Quality Report",
        None,
    )


def test_a_document_that_states_nothing_has_no_identity():
    assert identify(_doc([("text", "Just a paragraph of prose.")])).line == ""
