"""The knowledge-base browser inside Airflow's UI: a plugin with the browser's FastAPI app and a
"Knowledge base" entry in the navigation (Airflow 3.1+).

Airflow mounts plugin apps without authenticating them, so every route of this one depends on
Airflow's own ``get_user`` (the JWT of the UI's session cookie or an ``Authorization: Bearer``
header, checked by the configured auth manager): an anonymous request gets 401. The KB is the one
the runs use (the Variable ``chandra_ocr``, else ``$CHANDRA_OCR_KB``, else the default, resolved as
``settings.resolve_run_config`` does), looked up again at most every ``SETTINGS_TTL_S``; an
object-store source is read with the run's ``source_conn_id``.

Airflow imports every plugin in every task process (for its macros), so this module imports nothing
heavy: the app is built, in the API server, on its first request (FastAPI and Airflow's API
security module alone take seconds to import).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import TYPE_CHECKING, Any

from airflow.plugins_manager import AirflowPlugin

if TYPE_CHECKING:
    from chandra_ocr.airflow.settings import RunConfig
    from chandra_ocr.browser.app import KbTarget

URL_PREFIX = "/chandra-ocr"
SETTINGS_TTL_S = 30.0


def _run_config() -> RunConfig:
    from airflow.models.variable import Variable

    from chandra_ocr.airflow.settings import VARIABLE, resolve_run_config

    # the text, parsed by the run settings' own rules (a malformed Variable is an error, not defaults)
    return resolve_run_config({}, Variable.get(VARIABLE, default_var=None), os.environ)


class _RunSettingsTarget:
    """The KB of the run settings, re-read every ``SETTINGS_TTL_S``; page images cached per KB."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._at = float("-inf")
        self._target: KbTarget | None = None
        self._key: tuple = ()

    def __call__(self) -> KbTarget:
        from chandra_ocr.browser.app import KbTarget
        from chandra_ocr.browser.images import PageImages

        with self._lock:
            if self._target is None or time.monotonic() - self._at > SETTINGS_TTL_S:
                config = _run_config()
                key = (config.kb, config.source, config.source_conn_id)
                if self._target is None or key != self._key:
                    self._target, self._key = KbTarget(config.layout(), PageImages(_run_fs(config))), key
                self._at = time.monotonic()
            return self._target


def _run_fs(config: RunConfig):
    """How an object-store source is read: with the run's connection, like the run's own tasks."""
    from chandra_ocr.browser.images import default_fs

    def fs_for(url: str) -> Any:
        if config.source_conn_id and url.split("://", 1)[0] == config.source.split("://", 1)[0]:
            from chandra_ocr.airflow.sources import run_source

            source = run_source(config)
            return getattr(source, "fs", None) or default_fs(url)
        return default_fs(url)

    return fs_for


class _BrowserApp:
    """The browser's ASGI app, built on the first request it gets (imports in a worker thread)."""

    def __init__(self) -> None:
        self._app: Any = None
        self._lock = threading.Lock()

    def _build(self) -> Any:
        with self._lock:
            if self._app is None:
                from airflow.api_fastapi.core_api.security import get_user
                from fastapi import Depends

                from chandra_ocr.browser.app import create_app

                self._app = create_app(_RunSettingsTarget(), dependencies=[Depends(get_user)])
            return self._app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        app = self._app or await asyncio.to_thread(self._build)
        await app(scope, receive, send)


class KnowledgeBasePlugin(AirflowPlugin):
    """Registered through the ``airflow.plugins`` entry point of this distribution."""

    name = "chandra_ocr_knowledge_base"
    fastapi_apps = [
        {
            "app": _BrowserApp(),
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
