"""The feed's progress lines: counts, rate and ETA at a steady cadence, never one line per chunk."""

from __future__ import annotations

import logging
import re

from chandra_ocr.progress import Progress


def test_progress_logs_at_its_cadence_not_per_chunk(caplog):
    log = logging.getLogger("test.feed_progress")
    with caplog.at_level(logging.INFO, logger=log.name):
        progress = Progress("vector feed kb/vector", 1000, log, every_s=3600, unit="chunks")
        for _ in range(1000):
            progress.add(1)
        assert caplog.messages == []  # the cadence (here an hour) has not come round
        progress.done()
        progress = Progress("due every time", 10, log, every_s=0, unit="chunks")
        progress.add(4)
    final, due = caplog.messages
    assert re.fullmatch(r"vector feed kb/vector: 1000/1000 chunks, [0-9.]+ chunks/s, ETA 0s", final)
    assert re.fullmatch(r"due every time: 4/10 chunks, [0-9.]+ chunks/s, ETA [0-9]+s", due)


def test_the_final_line_is_not_repeated(caplog):
    """A last batch that brings the cadence round logs the final counts once, not again at ``done``."""
    log = logging.getLogger("test.feed_progress")
    with caplog.at_level(logging.INFO, logger=log.name):
        progress = Progress("vector feed", 5, log, every_s=0, unit="chunks")
        progress.add(5)
        progress.done()
    assert len(caplog.messages) == 1 and "5/5 chunks" in caplog.messages[0]
