"""The project's exception types: one base class, a few specific kinds."""


class ChandraOcrError(Exception):
    """Base class of every error raised by chandra_ocr."""


class ConfigError(ChandraOcrError, ValueError):
    """Options that cannot be used: unknown keys, out-of-range values, missing tools."""


class BadDocumentError(ChandraOcrError):
    """A PDF that cannot be ingested; the message is the human-readable quarantine reason."""


class StageTimeoutError(ChandraOcrError):
    """A document or page exceeded its time limit."""


class StallError(ChandraOcrError):
    """Nothing finished for longer than the run's stall limit: the batch fails (not the document)."""


class EngineError(ChandraOcrError):
    """An OCR engine could not serve requests (not a per-page failure)."""


class EngineOutOfMemoryError(EngineError):
    """The engine ran out of accelerator memory; the caller may retry with a smaller budget."""


class StoreError(ChandraOcrError):
    """The knowledge base (staged rows, Parquet dataset or DuckDB file) could not be read or written."""


class NotFoundError(StoreError):
    """A document or table the caller named is not in the knowledge base (the name can be fixed)."""


class ParseError(ChandraOcrError):
    """Model output that does not parse under its preset (counts as an invalid page)."""
