"""The ``vllm`` connection type: a vLLM OpenAI-compatible server, turned into the openai engine's options.

A connection holds host, port, the API key (password), the served model (schema or extra
``model``) and ``https`` (extra); any other extra is a ``ServerOptions`` field, e.g.
``max_in_flight`` or ``timeout_s``. As a URI::

    AIRFLOW_CONN_VLLM_DEFAULT='vllm://:KEY@gpu-host:8000/?model=datalab-to%2Fchandra&max_in_flight=96'
"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from airflow.sdk import BaseHook

from chandra_ocr.airflow.provider import VLLM_CONNECTION
from chandra_ocr.config import from_mapping
from chandra_ocr.errors import ConfigError
from chandra_ocr.ocr.openai_engine import ServerOptions

log = logging.getLogger(__name__)

_CONNECTION_KEYS = ("model", "https")  # extras that describe the server rather than ServerOptions


class VllmHook(BaseHook):
    """Reads a ``vllm`` connection: ``connection_options()`` are the openai engine's server settings."""

    conn_name_attr = "vllm_conn_id"
    default_conn_name = "vllm_default"
    conn_type = "vllm"
    hook_name = "vLLM server"

    def __init__(self, vllm_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vllm_conn_id = vllm_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """The connection form (for Airflow < 3.2; newer versions read it from the provider info)."""
        form = VLLM_CONNECTION["ui-field-behaviour"]
        return {"hidden_fields": form["hidden-fields"], "relabeling": form["relabeling"],
                "placeholders": form["placeholders"]}  # fmt: skip

    def server_options(self, **overrides: Any) -> ServerOptions:
        """The connection as ``ServerOptions`` (``overrides`` win); raises ConfigError for bad extras."""
        return from_mapping(ServerOptions, self.connection_options() | overrides)

    def connection_options(self) -> dict[str, Any]:
        """The connection's ``ServerOptions`` values (raises ConfigError without a host)."""
        conn = self.get_connection(self.vllm_conn_id)
        extra = {}
        for key, value in (conn.extra_dejson or {}).items():
            key = key.removeprefix("extra__vllm__")  # the form's field names
            if value not in (None, ""):
                extra[key] = value if key == "model" else _plain(value)
        if not conn.host:
            raise ConfigError(f"connection {self.vllm_conn_id!r} has no host")
        scheme = "https" if _truthy(extra.get("https", False)) else "http"
        port = f":{conn.port}" if conn.port else ""
        values = {k: v for k, v in extra.items() if k not in _CONNECTION_KEYS}
        values |= {
            "base_url": f"{scheme}://{conn.host}{port}/v1",
            "api_key": conn.password or None,
            "model": extra.get("model") or conn.schema or None,
        }
        return values

    def test_connection(self) -> tuple[bool, str]:
        """Ask the server for ``/v1/models``; True when it answers and serves the configured model."""
        try:
            options = self.server_options()
        except ConfigError as e:
            return False, str(e)
        headers = {"Authorization": f"Bearer {options.api_key}"} if options.api_key else {}
        try:
            response = httpx.get(f"{options.base_url}/models", headers=headers, timeout=10.0)
        except httpx.HTTPError as e:
            return False, f"cannot reach {options.base_url}: {type(e).__name__}: {e}"
        if response.status_code != 200:
            return False, f"{options.base_url}/models answered HTTP {response.status_code}"
        served = [m.get("id") for m in response.json().get("data", [])]
        if options.model and options.model not in served:
            return False, f"the server does not serve {options.model!r}; it serves {served}"
        return True, f"{options.base_url} serves {served}"


def _plain(value: Any) -> Any:
    """Extras from a URI arrive as strings: '64' → 64, 'true' → True; other text stays text."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in ("1", "true", "yes", "on")
