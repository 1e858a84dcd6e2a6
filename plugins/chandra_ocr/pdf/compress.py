"""Compression: a smaller copy of a PDF (Ghostscript, else PyMuPDF) that keeps images at OCR resolution.

Image settings: colour and grey images above 1.5 × ``min_dpi`` are downsampled to exactly
``min_dpi``; images at or below that are left alone, and bitonal (1-bit) images are never
downsampled (thin strokes break first). No preset of Ghostscript is used: ``/ebook`` (150 dpi)
is below what OCR needs and ``/printer`` (300 dpi) would ignore ``min_dpi``. Pages are never
auto-rotated. The copy is kept only when it is at least 5 % smaller and still looks like the
same document (page count; size and text length of the leading pages).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from chandra_ocr.config import PdfOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.pdf.triage import page_route

log = logging.getLogger(__name__)

DOWNSAMPLE_THRESHOLD = 1.5  # images are resampled only above this multiple of the target resolution
MIN_SAVING = 0.05  # a copy saving less than this share is not worth a rewritten file
_CHECK_PAGES = 3  # leading pages whose size and text must survive compression


@dataclass(frozen=True)
class CompressResult:
    """What compression did. ``output`` is the file to use downstream."""

    output: str
    method: str  # "ghostscript" | "pymupdf" | "none"
    bytes_before: int
    bytes_after: int  # size of ``output``
    kept: bool
    note: str


def compress_pdf(
    src: Path,
    dst: Path,
    *,
    min_dpi: int,
    timeout_s: float,
    method: str = "auto",
    min_image_pixels: int = 0,
    routes: PdfOptions | None = None,
) -> CompressResult:
    """Write a compressed copy of ``src`` to ``dst`` and keep it if smaller and equivalent.

    ``method``: "auto" (Ghostscript when ``gs`` is on PATH, else PyMuPDF), "ghostscript" or
    "pymupdf". ``timeout_s`` bounds Ghostscript (killed, original kept); the PyMuPDF path runs
    in-process (run it in a ``PdfWorkers`` task for a hard limit). ``src`` is never modified;
    encrypted or unreadable input is returned as is, with a note. Documents without a raster
    image of at least ``min_image_pixels`` are left alone (their rewrite saves little and costs
    a Ghostscript run per file; born-digital text needs no rendering). With ``routes`` (the triage
    options), only the images of pages that triage sends to OCR count: the others are never rendered.
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise ConfigError("compress_pdf needs a destination different from the source")
    before = src.stat().st_size
    if min_image_pixels and not has_raster_images(src, min_image_pixels, routes):
        why = "no large raster image on a page to render" if routes else "no large raster images"
        return CompressResult(str(src), "none", before, before, False, why)
    reference = _fingerprint(src)  # read only when a rewrite follows: it extracts page text
    if isinstance(reference, str):
        return CompressResult(str(src), "none", before, before, False, reference)
    gs = shutil.which("gs")
    if method == "auto":
        method = "ghostscript" if gs else "pymupdf"
    if method not in ("ghostscript", "pymupdf") or (method == "ghostscript" and not gs):
        raise ConfigError(f"compression method {method!r} is not available")
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if method == "ghostscript":
            failure = _run_ghostscript(gs or "gs", src, tmp, min_dpi, timeout_s)
        else:
            failure = _run_pymupdf(src, tmp, min_dpi)
        if failure is None:
            failure = _compare(reference, before, tmp)
        if failure is not None:
            return CompressResult(str(src), method, before, before, False, failure)
        os.replace(tmp, dst)
        after = dst.stat().st_size
        note = f"{before} → {after} bytes ({after / before:.0%})"
        log.debug("compressed %s with %s: %s", src, method, note)
        return CompressResult(str(dst), method, before, after, True, note)
    finally:
        tmp.unlink(missing_ok=True)


def has_raster_images(path: Path, min_pixels: int, routes: PdfOptions | None = None) -> bool:
    """Whether any page uses an image of at least ``min_pixels`` (read from resources, nothing decoded);
    with ``routes``, any such page that triage routes to OCR (the text of those pages alone is read).

    Unreadable or encrypted files answer True, so that ``_fingerprint`` names the reason.
    """
    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass:
                return True
            return any(
                any(img[2] * img[3] >= min_pixels for img in doc.get_page_images(pno))
                and (routes is None or page_route(doc, pno, routes) == "ocr")
                for pno in range(doc.page_count)
            )
    except Exception:  # MuPDF raises several types on damaged input
        return True


def ghostscript_args(gs: str, src: Path, out: Path, min_dpi: int) -> list[str]:
    """The Ghostscript command line (an argument list, never a shell string)."""
    res = str(int(min_dpi))
    threshold = str(DOWNSAMPLE_THRESHOLD)
    images = []
    for kind in ("Color", "Gray"):
        images += [
            f"-dDownsample{kind}Images=true",
            f"-d{kind}ImageDownsampleType=/Bicubic",
            f"-d{kind}ImageResolution={res}",
            f"-d{kind}ImageDownsampleThreshold={threshold}",
        ]
    return [
        gs,
        "-dSAFER",
        "-dBATCH",
        "-dNOPAUSE",
        "-dQUIET",
        "-sDEVICE=pdfwrite",
        "-dCompatibilityLevel=1.7",
        "-dAutoRotatePages=/None",
        "-dDetectDuplicateImages=true",
        "-dColorConversionStrategy=/LeaveColorUnchanged",
        *images,
        "-dDownsampleMonoImages=false",
        "-sOutputFile=" + str(out).replace("%", "%%"),  # a single % would be a page-number template
        "-f",
        str(src.resolve()),
    ]


def _run_ghostscript(gs: str, src: Path, out: Path, min_dpi: int, timeout_s: float) -> str | None:
    """Run Ghostscript; a reason string on failure or timeout, else None."""
    try:
        proc = subprocess.run(
            ghostscript_args(gs, src, out, min_dpi),
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"ghostscript timed out after {timeout_s:g} s and was killed; original kept"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()
        detail = lines[-1] if lines else "no message"
        return f"ghostscript failed (exit {proc.returncode}: {detail}); original kept"
    return None


def _run_pymupdf(src: Path, out: Path, min_dpi: int) -> str | None:
    """Recompress images above the threshold to ``min_dpi`` and save with garbage collection."""
    try:
        with pymupdf.open(src) as doc:
            doc.rewrite_images(
                dpi_threshold=int(min_dpi * DOWNSAMPLE_THRESHOLD) + 1,
                dpi_target=min_dpi,
                quality=85,
                bitonal=False,
            )
            doc.save(out, garbage=3, deflate=True, use_objstms=1)
    except Exception as e:  # MuPDF raises several types on damaged input
        return f"pymupdf rewrite failed ({e}); original kept"
    return None


_Fingerprint = list[tuple[float, float, int]]  # per leading page: (width, height, text length)


def _fingerprint(path: Path) -> tuple[int, _Fingerprint] | str:
    """(page count, leading-page fingerprints), or why the file must not be compressed."""
    try:
        with pymupdf.open(path) as doc:
            if doc.needs_pass or (doc.metadata or {}).get("encryption"):
                return "encrypted: not compressed"
            pages = [doc[i] for i in range(min(_CHECK_PAGES, doc.page_count))]
            return doc.page_count, [(p.rect.width, p.rect.height, len(p.get_text())) for p in pages]
    except Exception as e:  # unreadable input is triage's business; here it is just left alone
        return f"cannot open ({e}): not compressed"


def _compare(reference: tuple[int, _Fingerprint], before: int, out: Path) -> str | None:
    """Why the compressed copy must not be used (bigger, page count, size or text changed), or None."""
    after = out.stat().st_size
    if after > before * (1 - MIN_SAVING):
        return f"compressed copy not smaller enough ({after} vs {before} bytes); original kept"
    fingerprint = _fingerprint(out)
    if isinstance(fingerprint, str):
        return f"compressed copy unusable ({fingerprint}); original kept"
    if fingerprint[0] != reference[0]:
        return f"compressed copy has {fingerprint[0]} pages instead of {reference[0]}; original kept"
    for no, (old, new) in enumerate(zip(reference[1], fingerprint[1], strict=True), start=1):
        if abs(old[0] - new[0]) > 1 or abs(old[1] - new[1]) > 1:
            return f"compressed copy changed the size of page {no}; original kept"
        if abs(old[2] - new[2]) > max(20, old[2] // 10):
            return f"compressed copy changed the text of page {no} ({old[2]} → {new[2]} chars); original kept"
    return None
