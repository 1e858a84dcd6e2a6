"""The knowledge-base browser inside Airflow's UI: a plugin with the browser's FastAPI app and a
"Knowledge base" entry in the navigation (Airflow 3.1+).

Airflow mounts plugin apps without authenticating them, so every route of this one depends on
Airflow's own ``get_user`` (the JWT of the UI's session cookie or an ``Authorization: Bearer``
header, checked by the configured auth manager): an anonymous request gets 401. The KB is the one
the runs use (the Variable ``chandra_ocr``, else ``$CHANDRA_OCR_KB``, else the default, resolved as
``settings.resolve_run_config`` does), looked up again at most every ``SETTINGS_TTL_S``; an
object-store source is read with the run's ``source_conn_id``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from airflow.api_fastapi.core_api.security import get_user
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends

from chandra_ocr.airflow.settings import VARIABLE, RunConfig, resolve_run_config
from chandra_ocr.browser.app import KbTarget, create_app
from chandra_ocr.browser.images import PageImages, default_fs

log = logging.getLogger(__name__)

URL_PREFIX = "/chandra-ocr"
SETTINGS_TTL_S = 30.0


def _run_config() -> RunConfig:
    from airflow.models.variable import Variable

    variable = Variable.get(VARIABLE, default_var=None, deserialize_json=True)
    return resolve_run_config({}, variable, os.environ)


class _RunSettingsTarget:
    """The KB of the run settings, re-read every ``SETTINGS_TTL_S``; page images cached per KB."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._target: KbTarget | None = None

    def __call__(self) -> KbTarget:
        with self._lock:
            if self._target is None or time.monotonic() - self._at > SETTINGS_TTL_S:
                config = _run_config()
                if self._target is None or self._target.layout.root != config.layout().root:
                    self._target = KbTarget(config.layout(), PageImages(_run_fs(config)))
                self._at = time.monotonic()
            return self._target


def _run_fs(config: RunConfig):
    """How an object-store source is read: with the run's connection, like the run's own tasks."""

    def fs_for(url: str) -> Any:
        if config.source_conn_id and url.split("://", 1)[0] == config.source.split("://", 1)[0]:
            from chandra_ocr.airflow.sources import run_source

            source = run_source(config)
            return getattr(source, "fs", None) or default_fs(url)
        return default_fs(url)

    return fs_for


class KnowledgeBasePlugin(AirflowPlugin):
    """Registered through the ``airflow.plugins`` entry point of this distribution."""

    name = "chandra_ocr_knowledge_base"
    fastapi_apps = [
        {
            "app": create_app(_RunSettingsTarget(), dependencies=[Depends(get_user)]),
            "url_prefix": URL_PREFIX,
            "name": "Knowledge base",
        }
    ]
    external_views = [
        {
            "name": "Knowledge base",
            "href": URL_PREFIX.lstrip("/") + "/",  # relative: the UI resolves it against its base URL
            "destination": "nav",
            "url_route": "knowledge-base",
        }
    ]
