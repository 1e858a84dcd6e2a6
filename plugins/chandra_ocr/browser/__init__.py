"""The knowledge-base browser: documents, pages with their blocks drawn, the review queue and search.

One FastAPI app (``app.create_app``) serves it standalone (``chandra-ingest serve``) and inside
Airflow's UI (``chandra_ocr.airflow.browser_plugin``). It opens kb.duckdb read-only, one
connection per request, so it never waits for a load nor makes one wait; page images are rendered
from each document's recorded source on demand (``images.py``). Needs fastapi, uvicorn and jinja2
(Airflow brings them; the ``browser`` extra otherwise).
"""
