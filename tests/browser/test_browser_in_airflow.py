"""The browser inside Airflow: Airflow's own API-server app (``airflow.api_fastapi.app.create_app``,
what ``airflow api-server`` serves), with the plugin found through this distribution's
``airflow.plugins`` entry point, served by uvicorn on 127.0.0.1. Anonymous requests are refused;
a user of the configured auth manager (the simple auth manager here) sees the KB of the run
settings, in Chromium too."""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.slow]


@pytest.fixture(scope="module")
def airflow_api(airflow_db, browser_kb):
    """(base URL, a user's JWT) of Airflow's API server with the plugin, reading ``browser_kb``."""
    import uvicorn
    from airflow.api_fastapi.app import create_app, get_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    before = os.environ.get("CHANDRA_OCR_KB")
    os.environ["CHANDRA_OCR_KB"] = str(browser_kb.root)  # the run settings' KB (no Variable is set)
    config = uvicorn.Config(create_app("core"), host="127.0.0.1", port=0, log_level="warning")
    sock = config.bind_socket()
    sock.listen(config.backlog)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="reader", role="viewer"))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", token
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        if before is None:
            os.environ.pop("CHANDRA_OCR_KB", None)
        else:
            os.environ["CHANDRA_OCR_KB"] = before


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=60) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_every_route_of_the_plugin_needs_an_airflow_user(airflow_api, browser_kb):
    base, token = airflow_api
    doc_id = browser_kb.doc_id("report.pdf")
    routes = ["/", f"/doc/{doc_id}", f"/doc/{doc_id}/page/1", f"/doc/{doc_id}/page/1/image.png", "/review",
              "/search?q=Millbrook", "/static/browser.js"]  # fmt: skip
    for route in routes:
        assert _get(f"{base}/chandra-ocr{route}")[0] == 401, route
        assert _get(f"{base}/chandra-ocr{route}", {"Authorization": "Bearer not-a-token"})[0] == 403, route
    status, page = _get(f"{base}/chandra-ocr/", {"Cookie": f"_token={token}"})  # the UI's session cookie
    assert status == 200 and f'/chandra-ocr/doc/{doc_id}"' in page
    status, page = _get(f"{base}/chandra-ocr/doc/{doc_id}/page/1", {"Authorization": f"Bearer {token}"})
    assert status == 200 and 'href="/chandra-ocr/doc/' in page


def test_the_navigation_offers_the_knowledge_base(airflow_api):
    import json

    base, token = airflow_api
    status, body = _get(f"{base}/api/v2/plugins", {"Authorization": f"Bearer {token}"})
    assert status == 200
    plugin = next(p for p in json.loads(body)["plugins"] if p["name"] == "chandra_ocr_knowledge_base")
    assert [(v["name"], v["href"], v["destination"]) for v in plugin["external_views"]] == [
        ("Knowledge base", "chandra-ocr/", "nav")
    ]
    assert plugin["fastapi_apps"][0]["url_prefix"] == "/chandra-ocr"


def test_a_signed_in_user_sees_the_page_view_in_chromium(airflow_api, browser, browser_kb, tmp_path):
    base, token = airflow_api
    browser.send("Network.setCookie", {"name": "_token", "value": token, "url": base})
    doc_id = browser_kb.doc_id("report.pdf")
    browser.goto(f"{base}/chandra-ocr/")
    assert doc_id in browser.attrs("#documents tbody tr", "data-doc")
    browser.click(f'#documents a[href="/chandra-ocr/doc/{doc_id}"]')
    browser.click("#pages tbody a")
    assert browser.js("location.pathname") == f"/chandra-ocr/doc/{doc_id}/page/1"
    assert "table" in browser.attrs("svg#page g.block", "data-label")
    assert browser.texts("#image-error") == []
    browser.screenshot(tmp_path / "airflow_page_view.png")
    browser.send("Network.deleteCookies", {"name": "_token", "url": base})


def test_task_processes_do_not_pay_for_the_browser():
    """Airflow imports every plugin in every task process: the plugin module leaves FastAPI, the
    browser and Airflow's API security module unimported until the API server's first request."""
    import subprocess
    import sys

    heavy = ["fastapi", "chandra_ocr.browser.app", "airflow.api_fastapi.core_api.security"]
    code = "import sys, chandra_ocr.airflow.browser_plugin; "
    code += f"print([m for m in {heavy!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
