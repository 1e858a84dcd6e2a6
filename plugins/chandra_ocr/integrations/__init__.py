"""Adapters for retrieval frameworks (each needs its framework's extra)."""
