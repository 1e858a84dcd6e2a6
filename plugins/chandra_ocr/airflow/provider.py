"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from chandra_ocr import __version__


def get_provider_info() -> dict[str, Any]:
    """Package name, connection types and hooks of this plugin (no Airflow import: called at discovery)."""
    return {
        "package-name": "chandra-ocr-airflow",
        "name": "Chandra OCR",
        "description": "PDF archives into a RAG-ready knowledge base: OCR with a VLM served by vLLM, "
        "Parquet shards and DuckDB.",
        "versions": [__version__],
        "connection-types": [
            {"connection-type": "vllm", "hook-class-name": "chandra_ocr.airflow.hooks.VllmHook"},
        ],
    }
