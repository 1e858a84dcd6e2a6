"""Regenerate the bundled sample PDFs (our own text, Apache-2.0 like the project).

    python samples/make_samples.py

Writes: report.pdf (born-digital, headings + a table), scanned_memo.pdf (image-only page),
mixed.pdf (one text page, one scanned page) and broken.pdf (not a PDF).
"""

from __future__ import annotations

from pathlib import Path

import pymupdf

HERE = Path(__file__).parent
A4 = pymupdf.paper_rect("a4")

TABLE = [
    ["Station", "Nitrate mg/L", "Turbidity NTU", "Conductivity uS/cm"],
    ["Millbrook", "4.2", "3.1", "612"],
    ["Ashford Weir", "3.8", "2.4", "455"],
    ["Cole Bridge", "2.9", "1.8", "398"],
    ["Hatton Spring", "1.1", "0.6", "301"],
    ["Kings Lake", "2.2", "1.2", "350"],
]

REPORT_PAGES = [
    """
<h1>Regional Water Quality Report 2025</h1>
<p>This report summarises the water quality measurements taken at the five monitoring stations of the
northern district during the 2025 season. All samples were analysed by the district laboratory using
the standard methods described in the appendix.</p>
<h2>Summary of findings</h2>
<p>Nitrate levels stayed below the regulatory limit at every station. Turbidity rose after the spring
floods and returned to normal by June. The river station at Millbrook recorded the highest
conductivity, which the laboratory attributes to road salt in the catchment.</p>
<h2>Measurements by station</h2>
""",
    """
<h2>Methods</h2>
<p>Samples were collected monthly in sterile bottles, cooled to four degrees and analysed within
twenty-four hours. Nitrate was measured by ion chromatography, turbidity with a calibrated
nephelometer and conductivity with a temperature-compensated probe.</p>
<h2>Recommendations</h2>
<p>The district should continue monthly sampling at all five stations, add a sixth station below the
Millbrook road crossing, and publish the raw measurements as open data each quarter.</p>
""",
]

MEMO = """MEMORANDUM

To: Archive Team
From: Records Office
Subject: Digitisation of the 1998 ledgers

The paper ledgers from 1998 have been scanned and
are ready for indexing. Please check that every page
is legible and report any missing sheets before the
end of the month. The originals will be returned to
the basement store after the review is complete."""


def _header_footer(page: pymupdf.Page, number: int) -> None:
    page.insert_text((72, 40), "Northern District Water Authority", fontsize=8)
    page.insert_text((A4.width / 2 - 20, A4.height - 30), f"Page {number}", fontsize=8)


def _draw_table(page: pymupdf.Page, top: float, rows: list[list[str]]) -> None:
    """A ruled table drawn with lines and base-14 text (clean glyph boxes for table detection)."""
    left, width, height = 72.0, (A4.width - 144) / len(rows[0]), 20.0
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            cell = pymupdf.Rect(
                left + c * width, top + r * height, left + (c + 1) * width, top + (r + 1) * height
            )
            page.draw_rect(cell, color=(0, 0, 0), width=0.7)
            font = "hebo" if r == 0 else "helv"
            page.insert_text((cell.x0 + 4, cell.y1 - 6), text, fontsize=9.5, fontname=font)


def report(path: Path) -> None:
    doc = pymupdf.open()
    for i, html in enumerate(REPORT_PAGES, start=1):
        page = doc.new_page(width=A4.width, height=A4.height)
        box = pymupdf.Rect(72, 60, A4.width - 72, A4.height - 60)
        spare, _scale = page.insert_htmlbox(box, html)
        if i == 1:
            _draw_table(page, box.y1 - spare + 8, TABLE)
        _header_footer(page, i)
    doc.set_metadata({"title": "Regional Water Quality Report 2025", "author": "chandra_ocr samples"})
    doc.save(path, garbage=4, deflate=True)


def _scan_of(text: str, dpi: int = 200) -> pymupdf.Pixmap:
    """An image-only rendering of a typed page, as a scanner would produce it (greyscale)."""
    src = pymupdf.open()
    page = src.new_page(width=A4.width, height=A4.height)
    page.insert_textbox(
        pymupdf.Rect(72, 90, A4.width - 72, A4.height - 72), text, fontsize=13, fontname="cour"
    )
    return page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)


def scanned(path: Path, text: str) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=A4.width, height=A4.height)
    page.insert_image(page.rect, pixmap=_scan_of(text))
    doc.save(path, garbage=4, deflate=True)


def mixed(path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=A4.width, height=A4.height)
    page.insert_htmlbox(
        pymupdf.Rect(72, 72, A4.width - 72, A4.height - 72),
        "<h1>Cover note</h1><p>The following page is a scan of the signed delivery receipt "
        "for the new sampling equipment, kept for the audit file.</p>",
    )
    page = doc.new_page(width=A4.width, height=A4.height)
    receipt = (
        "DELIVERY RECEIPT\n\nItem: Nephelometer, model T-200\nQuantity: 2\n"
        "Delivered to: District Laboratory\nReceived in good condition."
    )
    page.insert_image(page.rect, pixmap=_scan_of(receipt))
    doc.save(path, garbage=4, deflate=True)


def main() -> None:
    report(HERE / "report.pdf")
    scanned(HERE / "scanned_memo.pdf", MEMO)
    mixed(HERE / "mixed.pdf")
    (HERE / "broken.pdf").write_bytes(b"This is a plain text file that only pretends to be a PDF.\n")


if __name__ == "__main__":
    main()
