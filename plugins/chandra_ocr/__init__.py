"""chandra_ocr: PDF archives into a RAG-ready knowledge base (Parquet + DuckDB)."""

__version__ = "0.1.0"

# Bumped whenever a change alters what the pipeline writes for the same input; documents
# ingested under an older value can be re-OCR'd with `reprocess`.
PIPELINE_VERSION = "3"  # 3: header levels, wrapped cells and stub heads of tables (2: own ruled-table reader)
