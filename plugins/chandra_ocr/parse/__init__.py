"""Parsers from model output (Chandra layout HTML, Markdown) to blocks and tables."""
