"""The run's source under Airflow: an object-store URL is read through ``ObjectStoragePath`` with the
run's ``source_conn_id`` (its provider turns the connection into credentials); a path stays local."""

from __future__ import annotations

from chandra_ocr.airflow.settings import RunConfig
from chandra_ocr.errors import ConfigError
from chandra_ocr.sources.entry import is_url
from chandra_ocr.sources.local import LocalSource
from chandra_ocr.sources.object_store import ObjectSource


def run_source(config: RunConfig) -> LocalSource | ObjectSource:
    """The source of ``config``; raises ConfigError when its connection cannot be used."""
    if not is_url(config.source):
        return LocalSource(config.source)
    from airflow.sdk import ObjectStoragePath

    conn_id = config.source_conn_id
    where = f"Airflow connection {conn_id!r}" if conn_id else "no connection (source_conn_id is empty)"
    try:
        fs = ObjectStoragePath(config.source, conn_id=conn_id).fs
    except Exception as e:  # an unknown connection, a provider not installed, a malformed extra
        raise ConfigError(f"source {config.source}: cannot use {where}: {type(e).__name__}: {e}") from e
    return ObjectSource(config.source, fs, credentials=where)
