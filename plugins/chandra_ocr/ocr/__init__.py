"""OCR engines (one interface), model presets, paging sizer and the retry/fallback policy."""
