"""The knowledge base the report tests read, and how they query it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kb_query import kb_rows

from chandra_ocr.pipeline import RunSummary

# A file name that must be escaped in HTML (and still be a valid file name).
ODD_NAME = 'memo <b>&"copy".pdf'


@dataclass(frozen=True)
class IngestedKb:
    """A knowledge base and the summary of the run that built it."""

    kb: Path
    summary: RunSummary

    def rows(self, sql: str) -> list[tuple]:
        return kb_rows(self.kb, sql)
