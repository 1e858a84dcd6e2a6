"""The ``vllm`` connection type: from AIRFLOW_CONN_* variables to the openai engine's ServerOptions."""

from __future__ import annotations

import json
import logging
import socket
import warnings

import pytest

from chandra_ocr.errors import ConfigError

KEY = "sk-live-7f3a9c2e51d04b8e"


@pytest.fixture
def hook(monkeypatch):
    from chandra_ocr.airflow.hooks import VllmHook

    def make(value: str, conn_id: str = "vllm_test") -> VllmHook:
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", value)
        return VllmHook(conn_id)

    return make


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


def test_uri_form_gives_server_options(hook):
    options = hook(
        f"vllm://:{KEY}@gpu-1.internal:8000/?model=datalab-to%2Fchandra&max_in_flight=96"
    ).server_options()
    assert options.base_url == "http://gpu-1.internal:8000/v1"
    assert options.api_key == KEY and options.model == "datalab-to/chandra" and options.max_in_flight == 96
    assert KEY not in repr(options)


def test_json_form_with_https_model_in_schema_and_overrides(hook):
    conn = {"conn_type": "vllm", "host": "ocr.example.org", "port": 443, "password": KEY,
            "schema": "lightonai/LightOnOCR-2-1B", "extra": {"https": True, "timeout_s": 120}}  # fmt: skip
    options = hook(json.dumps(conn), "vllm_json").server_options(max_in_flight=8)
    assert options.base_url == "https://ocr.example.org:443/v1"
    assert (options.model, options.timeout_s, options.max_in_flight) == ("lightonai/LightOnOCR-2-1B", 120, 8)


def test_no_key_and_default_connection_name(hook):
    from chandra_ocr.airflow.hooks import VllmHook

    assert VllmHook.default_conn_name == "vllm_default" and VllmHook.conn_type == "vllm"
    options = hook("vllm://localhost:8000", "vllm_default").server_options()
    assert options.api_key is None and options.model is None


def test_bad_extras_and_missing_host_are_config_errors(hook):
    with pytest.raises(ConfigError, match="max_inflight"):
        hook("vllm://h:1/?max_inflight=3").server_options()
    with pytest.raises(ConfigError, match="no host"):
        hook(json.dumps({"conn_type": "vllm", "password": KEY}), "vllm_nohost").server_options()


def test_test_connection_reports_an_unreachable_server_without_the_key(hook, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    ok, message = hook(f"vllm://:{KEY}@127.0.0.1:{_closed_port()}/?model=m").test_connection()
    assert not ok and "cannot reach http://127.0.0.1" in message
    out = capsys.readouterr()
    assert KEY not in message and KEY not in caplog.text and KEY not in out.out + out.err


def test_the_connection_form_is_declared_in_the_provider_info_without_deprecations():
    from airflow.providers_manager import ProvidersManager

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manager = ProvidersManager()
        behaviour = manager.field_behaviours["vllm"]
        widgets = manager.connection_form_widgets
    assert behaviour["hidden_fields"] == ["login"]
    assert behaviour["relabeling"] == {"password": "API key", "schema": "Model"}
    assert {"extra__vllm__model", "extra__vllm__https", "extra__vllm__max_in_flight"} <= set(widgets)
    assert [str(w.message) for w in caught if "chandra_ocr" in str(w.message)] == []


def test_extras_saved_by_the_form_are_read(hook):
    conn = {"conn_type": "vllm", "host": "h", "extra": {"extra__vllm__model": "m", "extra__vllm__https": True,
                                                        "extra__vllm__timeout_s": None}}  # fmt: skip
    options = hook(json.dumps(conn), "vllm_form").server_options()
    assert (options.base_url, options.model, options.timeout_s) == ("https://h/v1", "m", 600.0)
