"""Provider metadata read by Airflow through the ``apache_airflow_provider`` entry point.

The ``vllm`` connection form is declared here (Airflow ≥ 3.2 reads ``ui-field-behaviour`` and
``conn-fields`` without importing the hook); ``VllmHook.get_ui_field_behaviour`` serves older versions.
"""

from __future__ import annotations

from typing import Any

from chandra_ocr import __version__

VLLM_CONNECTION: dict[str, Any] = {
    "connection-type": "vllm",
    "hook-class-name": "chandra_ocr.airflow.hooks.VllmHook",
    "hook-name": "vLLM server",
    "ui-field-behaviour": {
        "hidden-fields": ["login"],
        "relabeling": {"password": "API key", "schema": "Model"},
        "placeholders": {
            "host": "vllm.internal",
            "port": "8000",
            "schema": "datalab-to/chandra (or extra 'model')",
            "password": "the server's --api-key, if any",
        },
    },
    "conn-fields": {
        "model": {
            "label": "Served model",
            "description": "as served by vLLM (wins over Model above)",
            "schema": {"type": ["string", "null"]},
        },
        "https": {
            "label": "HTTPS",
            "description": "talk to the server over https",
            "schema": {"type": "boolean", "default": False},
        },
        "max_in_flight": {
            "label": "Requests in flight",
            "description": "open requests at once",
            "schema": {"type": ["integer", "null"], "minimum": 1},
        },
        "timeout_s": {
            "label": "Request timeout (s)",
            "description": "per page request",
            "schema": {"type": ["number", "null"], "exclusiveMinimum": 0},
        },
    },  # fmt: skip
}


def get_provider_info() -> dict[str, Any]:
    """Package name, connection types and hooks of this plugin (no Airflow import: called at discovery)."""
    return {
        "package-name": "chandra-ocr-airflow",
        "name": "Chandra OCR",
        "description": "PDF archives into a RAG-ready knowledge base: OCR with a VLM served by vLLM, "
        "staged rows, a Parquet dataset and DuckDB.",
        "versions": [__version__],
        "connection-types": [VLLM_CONNECTION],
    }
