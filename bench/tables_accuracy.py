"""Table accuracy on the corpus' tables with expected cells: chandra_ocr vs PyMuPDF and other extractors.

    .venv/bin/python -m bench.tables_accuracy [--corpus DIR] [--out F] [--only NAME ...]

Ground truth (``shared/corpus``, see its README.md): camelot's expected tables (lattice, stream,
network and hybrid tests; not the rotated, right-to-left or text-stripped ones), tabula-java's
CSVs of same-named PDFs (all tables of the page stacked; the page is the one holding most of the
expected cells), docling's ground-truth JSON tables, and the tables checked by hand in
``bench/tables_hand.json`` (the tables issue 21 names; a hand case may replace a corpus case it
corrects, and its pages without tables count for false tables). Each expected table is scored against the
extractor's best-matching table on its page (tabula: all its tables stacked), cells compared
after whitespace normalisation over monotonically aligned rows and columns
(``chandra_ocr.testing.cell_match``):

- cell recall: matched cells / non-empty expected cells; precision: / non-empty extracted cells;
- row match: share of expected rows whose aligned extracted row holds exactly the same cells;
- structure: a TEDS-style score, 1 − edit distance / the longer length over the two tables'
  row-and-cell token sequences (a ``<tr>`` token per row, one token per cell, cost 1 for a
  changed cell): a sequence edit distance, not the tree edit distance of TEDS itself.

The ICDAR 2013 dev set (``icdar2013-dev``: 20 US statistical reports, 48 table regions) is scored as
the issue defines it, not by alignment: per expected region, the page's found table with the highest
cell recall; cell recall = share of the expected non-empty cells (NFKC, whitespace collapsed, a
multiset) present in it, row match = share of expected rows found as a row with the same non-empty
cells in order, precision = share of its non-empty cells that are expected; per-document figures go
to the results file's "documents". ``--sets dev`` runs only this set.

Each extractor's figures are given by subset (below) and by set ("sets": where the expectation
comes from — camelot, tabula, docling, hand, icdar2013-dev).

Subsets: "ruled" (camelot lattice expectations; elsewhere ruled grids of ``tables/ruled_grid.py``
under the table with ``RULED_ROWS`` of its rows at least), "partly ruled" (grids with fewer rows:
a rule every few rows; or horizontal rules under it), "unruled". False tables: tables
found on docling's born-digital pages whose ground truth has none, and on pypdf's and pdfminer's
prose samples. Extractors: chandra_ocr (the triage route: ``tables/page.py``),
PyMuPDF ``find_tables()`` (default), pdfplumber ``extract_tables()`` (lines, and the "text"
strategy) and camelot (stream, hybrid, lattice) where importable — install both into the
venv, or into a folder put on ``PYTHONPATH`` (``uv pip install --target DIR pdfplumber "camelot-py>=2,<3"``).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import platform
import statistics
import sys
import time
import unicodedata
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stderr
from datetime import UTC, datetime
from pathlib import Path

import pymupdf

from chandra_ocr.pdf.text_layer import TEXT_FLAGS, read_page
from chandra_ocr.tables.page import page_tables
from chandra_ocr.tables.ruled_grid import find_grids
from chandra_ocr.tables.rules import drawn_rules, page_words
from chandra_ocr.testing.cell_match import align_grids, anchor_grid, filled_grid

REPO = Path(__file__).resolve().parents[1]

CAMELOT = "camelot/tests/files/"
TABULA = "tabula-java/src/test/resources/technology/tabula/"
DOCLING = "docling/tests/data/pdf/"
ICDAR_DEV = "icdar2013-dev"
DEV = "icdar2013-dev"  # the subset's name
# (pdf, page, expected variable, span layout, flavour of the camelot test)
CAMELOT_CASES = [
    ("tabula/icdar2013-dataset/competition-dataset-us/us-030.pdf", 2, "data_lattice", "anchor", "lattice"),
    ("twotables_2.pdf", 1, "data_lattice_two_tables_1", "anchor", "lattice"),
    ("twotables_2.pdf", 1, "data_lattice_two_tables_2", "anchor", "lattice"),
    ("table_region.pdf", 1, "data_lattice_table_regions", "anchor", "lattice"),
    ("background_lines_1.pdf", 1, "data_lattice_process_background", "anchor", "lattice"),
    ("row_span_1.pdf", 1, "data_lattice_copy_text", "filled", "lattice"),
    ("column_span_2.pdf", 1, "data_lattice_shift_text_left_top", "anchor", "lattice"),
    ("split_text_lattice.pdf", 1, "data_lattice_split_text", "anchor", "lattice"),
    ("health.pdf", 1, "data_stream", "anchor", "stream"),
    ("tabula/12s0324.pdf", 1, "data_stream_two_tables_1", "anchor", "stream"),
    ("tabula/12s0324.pdf", 1, "data_stream_two_tables_2", "anchor", "stream"),
    ("tabula/us-007.pdf", 1, "data_stream_table_areas", "anchor", "stream"),
    ("mexican_towns.pdf", 1, "data_stream_columns", "anchor", "stream"),
    ("tabula/m27.pdf", 1, "data_stream_split_text", "anchor", "stream"),
    ("edge_tol.pdf", 1, "data_stream_edge_tol", "anchor", "stream"),
    ("stream_inner_outer_columns.pdf", 1, "data_stream_inner_outer_columns", "anchor", "stream"),
    ("detect_vertical_false.pdf", 1, "data_stream_layout_kwargs", "anchor", "stream"),
    ("multiple_tables.pdf", 1, "data_network_two_tables_b_1", "anchor", "stream"),
    ("multiple_tables.pdf", 1, "data_network_two_tables_b_2", "anchor", "stream"),
    ("vertical_header.pdf", 1, "data_network_vertical_headers", "anchor", "stream"),
]
TABULA_CASES = [
    "AnimalSounds",
    "MultiColumn",
    "Publication_of_award_of_Bids_for_Transport_Sector__August_2016",
    "argentina_diputados_voting_record",
    "frx_2012_disclosure",
    "indictb1h_14",
    "schools",
    "spanning_cells",
    "spreadsheet_no_bounding_frame",
    "twotables",
    "us-020",
]
RULED_ROWS = 0.8  # grids under a table with fewer rows than this share of its rows: partly ruled
PROSE = [
    "pypdf/resources/crazyones.pdf",
    "pdfminer/samples/simple1.pdf",
    "pdfminer/samples/simple2.pdf",
    "pdfminer/samples/simple3.pdf",
    "pdfminer/samples/simple4.pdf",
    "pdfminer/samples/simple5.pdf",
]

Grid = list[list[str]]


def camelot_cases(corpus: Path) -> list[dict]:
    expected = json.loads((corpus / "camelot/camelot_expected_tables.json").read_text())["expected"]
    return [
        {
            "name": f"camelot:{pdf}:{var}",
            "pdf": corpus / CAMELOT / pdf,
            "page": page,
            "expected": expected[var],
            "layout": layout,
            "stacked": False,
            "lattice": flavour == "lattice",
            "bbox": None,
        }
        for pdf, page, var, layout, flavour in CAMELOT_CASES
    ]


def tabula_cases(corpus: Path) -> list[dict]:
    out = []
    for name in TABULA_CASES:
        pdf = corpus / TABULA / f"{name}.pdf"
        with open(corpus / TABULA / "csv" / f"{name}.csv", encoding="utf-8", newline="") as f:
            expected = list(csv.reader(f))
        out.append(
            {
                "name": f"tabula:{name}",
                "pdf": pdf,
                "page": _page_holding(pdf, expected),
                "expected": expected,
                "layout": "anchor",
                "stacked": True,
                "lattice": False,
                "bbox": None,
            }
        )
    return out


def _page_holding(pdf: Path, expected: Grid) -> int:
    """The page whose words hold most of the expected cells' words."""
    wanted = {w for row in expected for c in row for w in c.split()}
    with pymupdf.open(pdf) as doc:
        hits = [len(wanted & {w[4] for w in p.get_text("words")}) for p in doc]
    return hits.index(max(hits)) + 1


def hand_cases(corpus: Path) -> tuple[list[dict], set[str], list[tuple[Path, int]]]:
    """The hand-checked tables, the names of the corpus cases they replace, and their no-table pages."""
    hand = json.loads((REPO / "bench" / "tables_hand.json").read_text(encoding="utf-8"))
    cases = [
        {
            "name": f"hand:{t['name']}",
            "pdf": corpus / t["pdf"],
            "page": t["page"],
            "expected": t["expected"],
            "layout": "anchor",
            "stacked": False,
            "lattice": False,
            "bbox": None,
        }
        for t in hand["tables"]
    ]
    replaced = {t["replaces"] for t in hand["tables"] if t.get("replaces")}
    return cases, replaced, [(corpus / p["pdf"], p["page"]) for p in hand["no_tables"]]


def docling_cases(corpus: Path) -> tuple[list[dict], list[tuple[Path, int]]]:
    """Docling's ground-truth tables, and the pages of its documents that have none."""
    cases, empty = [], []
    for truth in sorted((corpus / DOCLING / "groundtruth").glob("*.json")):
        pdf = corpus / DOCLING / "sources" / f"{truth.stem}.pdf"
        if not pdf.exists():
            continue
        doc = json.loads(truth.read_text())
        heights = {int(k): v["size"]["height"] for k, v in doc.get("pages", {}).items()}
        with_tables = set()
        for n, t in enumerate(doc.get("tables", [])):
            prov = t["prov"][0]
            page = prov["page_no"]
            with_tables.add(page)
            b = prov["bbox"]
            h = heights.get(page, 792.0)
            bbox = (b["l"], h - b["t"], b["r"], h - b["b"]) if b["coord_origin"] == "BOTTOMLEFT" else None
            data = t["data"]
            grid = [[""] * data["num_cols"] for _ in range(data["num_rows"])]
            for c in data["table_cells"]:
                grid[c["start_row_offset_idx"]][c["start_col_offset_idx"]] = c["text"]
            cases.append(
                {
                    "name": f"docling:{truth.stem}:{n + 1}",
                    "pdf": pdf,
                    "page": page,
                    "expected": grid,
                    "layout": "anchor",
                    "stacked": False,
                    "lattice": False,
                    "bbox": bbox,
                }
            )
        with pymupdf.open(pdf) as d:
            empty += [(pdf, p) for p in range(1, d.page_count + 1) if p not in with_tables]
    return cases, empty


def icdar_cases(corpus: Path) -> list[dict]:
    """The ICDAR 2013 dev documents' table regions (``-str.xml``): one case each, cells as (row, col, text).

    A table continued side by side or on another page has one region per part; each part is a case
    (48 in the dev set), scored against the tables found on its page.
    """
    out = []
    for truth in sorted((corpus / ICDAR_DEV).glob("*-str.xml")):
        doc = truth.name.removesuffix("-str.xml")
        for table in ET.parse(truth).getroot().iter("table"):
            for region in table.iter("region"):
                cells = [
                    (int(c.get("start-row", "0")), int(c.get("start-col", "0")), c.findtext("content") or "")
                    for c in region.iter("cell")
                ]
                out.append(
                    {
                        "name": f"{DEV}:{doc}:{table.get('id')}.{region.get('id')}",
                        "doc": doc,
                        "pdf": corpus / ICDAR_DEV / f"{doc}.pdf",
                        "page": int(region.get("page", "1")),
                        "cells": cells,
                        "subset": DEV,
                    }
                )
    return out


# --- extractors: (pdf, page) → (anchor grids, filled grids) ---------------------------------------


def chandra(pdf: Path, page_no: int) -> tuple[list[Grid], list[Grid]]:
    with pymupdf.open(pdf) as doc:
        page = doc[page_no - 1]
        textpage = page.get_textpage(flags=TEXT_FLAGS)
        read = read_page(page, textpage)
        _, tables = page_tables(page, read.blocks, textpage, read.stats.row_splits)
    return [anchor_grid(t) for t in tables], [filled_grid(t) for t in tables]


def pymupdf_tables(pdf: Path, page_no: int) -> tuple[list[Grid], list[Grid]]:
    with pymupdf.open(pdf) as doc:
        grids = [[[c or "" for c in row] for row in t.extract()] for t in doc[page_no - 1].find_tables()]
    return grids, grids


def _pdfplumber(settings: dict | None) -> Callable:
    import pdfplumber

    def run(pdf: Path, page_no: int) -> tuple[list[Grid], list[Grid]]:
        with pdfplumber.open(pdf) as doc:
            tables = doc.pages[page_no - 1].extract_tables(settings or {})
        grids = [[[c or "" for c in row] for row in t] for t in tables]
        return grids, grids

    return run


def _camelot(flavor: str) -> Callable:
    import camelot

    def run(pdf: Path, page_no: int) -> tuple[list[Grid], list[Grid]]:
        with redirect_stderr(io.StringIO()):
            tables = camelot.read_pdf(str(pdf), pages=str(page_no), flavor=flavor)
        grids = [t.df.astype(str).values.tolist() for t in tables]
        return grids, grids

    return run


def extractors() -> dict[str, Callable]:
    out: dict[str, Callable] = {"chandra_ocr": chandra, "pymupdf_find_tables": pymupdf_tables}
    try:
        out["pdfplumber_lines"] = _pdfplumber(None)
        out["pdfplumber_text"] = _pdfplumber({"vertical_strategy": "text", "horizontal_strategy": "text"})
    except ImportError:
        pass
    try:
        for flavor in ("stream", "hybrid", "lattice"):
            out[f"camelot_{flavor}"] = _camelot(flavor)
    except ImportError:
        pass
    return out


# --- scores ----------------------------------------------------------------------------------------


def scores(expected: Grid, got: Grid) -> dict[str, float]:
    exp, out, rows, cols = align_grids(expected, got)
    col_of = dict(cols)
    matched = sum(1 for i, j in rows for k, x in cols if exp[i][k] and exp[i][k] == out[j][x])
    n_exp = sum(1 for r in exp for c in r if c)
    n_got = sum(1 for r in out for c in r if c)
    paired = dict(rows)
    full = 0
    for i, row in enumerate(exp):
        if not any(row) or i not in paired:
            continue
        other = out[paired[i]]
        same = all(not c or (k in col_of and other[col_of[k]] == c) for k, c in enumerate(row))
        full += same and sum(1 for c in other if c) == sum(1 for c in row if c)
    n_rows = sum(1 for r in exp if any(r))
    return {
        "cell_recall": matched / n_exp if n_exp else 0.0,
        "precision": matched / n_got if n_got else 0.0,
        "row_match": full / n_rows if n_rows else 0.0,
        "structure": structure(exp, out),
    }


def structure(a: Grid, b: Grid) -> float:
    """1 − edit distance / longer length over the row-and-cell token sequences (module docstring)."""
    sa = [tok for row in a for tok in ("\x00<tr>", *row)]
    sb = [tok for row in b for tok in ("\x00<tr>", *row)]
    if not sa and not sb:
        return 1.0
    prev = list(range(len(sb) + 1))
    for i, x in enumerate(sa, 1):
        cur = [i] + [0] * len(sb)
        for j, y in enumerate(sb, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y))
        prev = cur
    return 1 - prev[-1] / max(len(sa), len(sb))


def subset(case: dict) -> str:
    """ruled / partly ruled / unruled (module docstring)."""
    if case["lattice"]:
        return "ruled"
    with pymupdf.open(case["pdf"]) as doc:
        page = doc[case["page"] - 1]
        rules = drawn_rules(page, page.get_cdrawings())
        box = pymupdf.Rect(case["bbox"] or _expected_box(page, case["expected"]))
        if rules is None:
            return "unruled"
        grids = [g for g in find_grids(rules, page_words(page)) if len(rules.v) >= 2]
        under = [g for g in grids if _covers(pymupdf.Rect(g.bbox), box)]
        n_rows = sum(1 for row in case["expected"] if any(row))
        if under and sum(g.row_count for g in under) >= RULED_ROWS * n_rows:
            return "ruled"
        if under:
            return "partly ruled"  # a grid with fewer rows than the table: rules every few rows
        long_h = [e for e in rules.h if e[2] - e[1] >= 0.3 * box.width and box.y0 - 5 <= e[0] <= box.y1 + 5]
        return "partly ruled" if len(long_h) >= 2 else "unruled"


def _covers(grid: pymupdf.Rect, box: pymupdf.Rect) -> bool:
    """Whether a ruled grid lies under the table's box (half the smaller one's area, over 30 pt high)."""
    if grid.width <= 0 or grid.height <= 30:
        return False
    return abs(grid & box) >= 0.5 * min(abs(box), abs(grid))


def _expected_box(page: pymupdf.Page, expected: Grid) -> pymupdf.Rect:
    """Where the expected table lies: the middle 90 % of the page's words that are in its cells."""
    wanted = {w for row in expected for c in row for w in c.split() if len(w) > 1}
    hits = [w for w in page_words(page) if w[4] in wanted]
    if len(hits) < 4:
        return page.rect
    lo, hi = len(hits) // 20, len(hits) - 1 - len(hits) // 20
    xs0, ys0 = sorted(w[0] for w in hits), sorted(w[1] for w in hits)
    xs1, ys1 = sorted(w[2] for w in hits), sorted(w[3] for w in hits)
    return pymupdf.Rect(xs0[lo], ys0[lo], xs1[hi], ys1[hi])


def cell_text(text: str) -> str:
    """The issue's cell normalisation: NFKC, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text or "").split())


def icdar_scores(cells: list[tuple[int, int, str]], got: Grid) -> dict[str, float]:
    """Multiset cell recall, row match and precision of one found table against an ICDAR table.

    Cell recall: share of the expected non-empty cells present in the found table (as a multiset);
    row match: share of the expected non-empty rows found as a row with the same non-empty cells in
    the same order; precision: share of the found table's non-empty cells that are expected.
    """
    exp = Counter(t for _, _, x in cells if (t := cell_text(x)))
    found = Counter(t for row in got for c in row if (t := cell_text(c)))
    common = sum((exp & found).values())
    rows: dict[int, list[tuple[int, str]]] = {}
    for r, c, x in cells:
        if t := cell_text(x):
            rows.setdefault(r, []).append((c, t))
    want = [tuple(t for _, t in sorted(v)) for v in rows.values()]
    have = {tuple(t for c in row if (t := cell_text(c))) for row in got}
    n_exp, n_got = sum(exp.values()), sum(found.values())
    return {
        "cell_recall": common / n_exp if n_exp else 0.0,
        "precision": common / n_got if n_got else 0.0,
        "row_match": sum(1 for w in want if w in have) / len(want) if want else 0.0,
    }


def icdar_best(case: dict, anchors: list[Grid]) -> dict[str, float]:
    """The page's table with the highest cell recall (ties: precision), as the issue scores."""
    found = [icdar_scores(case["cells"], g) for g in anchors]
    empty = {"cell_recall": 0.0, "precision": 0.0, "row_match": 0.0}
    return max(found, key=lambda s: (s["cell_recall"], s["precision"]), default=empty)


def best(case: dict, anchors: list[Grid], filled: list[Grid]) -> dict[str, float]:
    grids = filled if case["layout"] == "filled" else anchors
    if case["stacked"]:
        grids = [[row for g in grids for row in g]] if grids else []
    found = [scores(case["expected"], g) for g in grids]
    empty = {"cell_recall": 0.0, "precision": 0.0, "row_match": 0.0, "structure": 0.0}
    return max(found, key=lambda s: (s["cell_recall"] + s["precision"], s["structure"]), default=empty)


def summarise(picked: list[dict[str, float]]) -> dict:
    keys = [k for k in ("cell_recall", "row_match", "precision", "structure") if picked and k in picked[0]]
    return {"n": len(picked)} | {k: round(statistics.fmean(s[k] for s in picked), 3) for k in keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=REPO.parent / "shared" / "corpus")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "tables_accuracy.json")
    ap.add_argument("--only", nargs="*", help="extractor names to run (default: all importable)")
    ap.add_argument(
        "--sets", nargs="*", choices=("own", "dev"), default=["own", "dev"], help="case sets to run"
    )
    args = ap.parse_args()
    corpus = args.corpus.resolve()
    cases: list[dict] = []
    no_table_pages: list[tuple[Path, int]] = []
    if "own" in args.sets:
        found_docling, empty_pages = docling_cases(corpus)
        by_hand, replaced, hand_empty = hand_cases(corpus)
        cases = camelot_cases(corpus) + tabula_cases(corpus) + found_docling
        cases = [c for c in cases if c["name"] not in replaced] + by_hand
        for case in cases:
            case["subset"] = subset(case)
        prose = [(corpus / p, n) for p in PROSE for n in range(1, pymupdf.open(corpus / p).page_count + 1)]
        no_table_pages = empty_pages + prose + hand_empty
    dev = icdar_cases(corpus) if "dev" in args.sets and (corpus / ICDAR_DEV).is_dir() else []
    names = extractors()
    if args.only:
        names = {k: v for k, v in names.items() if k in args.only}
    result: dict = {"cases": {}, "documents": {}, "extractors": {}}
    for name, fn in names.items():
        pages = sorted({(c["pdf"], c["page"]) for c in cases + dev} | set(no_table_pages))
        got, seconds = {}, 0.0
        for key in pages:
            t0 = time.perf_counter()
            try:
                got[key] = fn(*key)
            except Exception as e:  # a peer failing on a page scores 0 there
                print(f"{name} failed on {key[0].name} p{key[1]}: {e}", file=sys.stderr)
                got[key] = ([], [])
            seconds += time.perf_counter() - t0
        per_case = {c["name"]: best(c, *got[(c["pdf"], c["page"])]) for c in cases}
        per_case |= {c["name"]: icdar_best(c, got[(c["pdf"], c["page"])][0]) for c in dev}
        false = {f"{p.name}:{n}": len(got[(p, n)][0]) for p, n in no_table_pages if got[(p, n)][0]}
        summary = {}
        for sub in ("ruled", "partly ruled", "unruled", "all"):
            summary[sub] = summarise([per_case[c["name"]] for c in cases if sub in ("all", c["subset"])])
        if dev:
            summary[DEV] = summarise([per_case[c["name"]] for c in dev])
            for doc in sorted({c["doc"] for c in dev}):
                figures = summarise([per_case[c["name"]] for c in dev if c["doc"] == doc])
                result["documents"].setdefault(doc, {})[name] = figures
            summary[DEV]["documents_under_0.5"] = sorted(
                d for d, r in result["documents"].items() if r[name]["cell_recall"] < 0.5
            )
        by_set = {  # the source of each case's expectation: camelot, tabula, docling, hand
            src: summarise([per_case[c["name"]] for c in cases if c["name"].split(":")[0] == src])
            for src in ("camelot", "tabula", "docling", "hand")
        }
        if dev:
            by_set[DEV] = {k: v for k, v in summary[DEV].items() if k != "documents_under_0.5"}
        result["extractors"][name] = {
            "subsets": summary,
            "sets": by_set,
            "false_tables": sum(false.values()),
            "false_table_pages": false,
            "s_per_page": round(seconds / len(pages), 4),
        }
        for c in cases + dev:
            result["cases"].setdefault(c["name"], {"subset": c["subset"], "page": c["page"]})[name] = {
                k: round(v, 3) for k, v in per_case[c["name"]].items()
            }
        print(
            name,
            json.dumps(summary.get(DEV, summary["all"])),
            "false tables",
            sum(false.values()),
            file=sys.stderr,
        )
    result["no_table_pages"] = len(no_table_pages)
    result["meta"] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "pymupdf": pymupdf.VersionBind,
        "machine": platform.machine(),
        "sets": args.sets,
    }
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for name, r in result["extractors"].items():
        for kind in ("subsets", "sets"):
            subs = "  ".join(
                f"{k}: {v.get('cell_recall')}/{v.get('row_match')}/{v.get('precision')}"
                f"/{v.get('structure', '-')} (n={v['n']})"
                for k, v in r[kind].items()
                if v["n"]
            )
            print(
                f"{name:22s} {subs}"
                + (f"  false={r['false_tables']}  {r['s_per_page']} s/page" if kind == "sets" else "")
            )


if __name__ == "__main__":
    main()
