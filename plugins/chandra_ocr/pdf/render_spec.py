"""How large to render a page for OCR: the pixel budget a preset asks for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RenderSpec:
    """Render budget for one model (or the CPU engine).

    The page is rendered at ``dpi``, then scaled so that the short side is at least
    ``min_short_side`` px, the longest side at most ``longest_edge`` px and the area at most
    ``max_pixels``; finally both sides are rounded down to a multiple of ``multiple_of``.
    """

    dpi: int = 200
    max_pixels: int = 6_291_456
    min_short_side: int = 0
    longest_edge: int | None = None
    multiple_of: int = 1
