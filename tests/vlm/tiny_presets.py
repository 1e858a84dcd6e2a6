"""``PRESETS`` for ``$CHANDRA_OCR_PRESET_MODULES``: the tiny model's preset by name, for runs whose engine is
built in another process (Airflow tasks); the model folder comes from ``$CHANDRA_OCR_TINY_MODEL``."""

from __future__ import annotations

import os
from pathlib import Path

from chandra_ocr.testing.tiny_preset import tiny_preset

PRESETS = {p.name: p for p in [tiny_preset(Path(os.environ["CHANDRA_OCR_TINY_MODEL"]))]}
