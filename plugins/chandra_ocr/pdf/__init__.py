"""PDF work: compression, triage (route per page), the text layer, rendering and the PDF worker pool."""
