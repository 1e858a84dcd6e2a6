"""Dummy-weight model folders in the shapes of the presets' models (for GPU runs without weights)."""
