"""Debian's Chromium, headless, driven through its DevTools protocol (a WebSocket; ``websockets``
comes with Airflow): navigate, evaluate JavaScript, move the mouse, take screenshots.

No WebDriver and no browser download: the browser is the system's ``chromium`` (scripts/system-deps.sh).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from pace import scaled
from websockets.sync.client import connect

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--no-proxy-server", "--remote-debugging-port=0",
         "--remote-allow-origins=*"]  # fmt: skip
TIMEOUT_S = 30.0  # on a quiet machine; times the slowdown measured when the browser starts


class Browser:
    """One Chromium with one tab; every call waits at most ``timeout_s`` (``TIMEOUT_S``, scaled)."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1100) -> None:
        self.timeout_s = scaled(TIMEOUT_S)
        chromium = shutil.which("chromium")
        assert chromium, "Debian's chromium is not installed: run `make test` (scripts/system-deps.sh)"
        self.process = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.is_file() and len(port_file.read_text().split()) >= 2):
            assert time.monotonic() < deadline and self.process.poll() is None, "Chromium did not start"
            time.sleep(0.05)
        port = port_file.read_text().split()[0]
        self._stack = contextlib.ExitStack()
        url = f"ws://127.0.0.1:{port}{port_file.read_text().split()[1]}"
        self.ws = self._stack.enter_context(connect(url, max_size=None))
        self._ids = itertools.count(1)
        self.events: list[dict] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})  # fmt: skip

    def _call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + self.timeout_s
        while True:
            reply = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == message["id"]:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply["result"]
            self.events.append(reply)

    def send(self, method: str, params: dict | None = None) -> dict:
        """One DevTools command in the tab; its result."""
        return self._call(method, params, self.session)

    def goto(self, url: str) -> None:
        """Open ``url`` and wait for its load event (scripts, styles and images loaded)."""
        self.events.clear()
        loader = self.send("Page.navigate", {"url": url}).get("loaderId")
        self.wait_load(url, loader)

    def click(self, selector: str) -> None:
        """Click the first element ``selector`` finds and wait for the page it opens."""
        self.events.clear()
        self.js(f"document.querySelector({json.dumps(selector)}).click()")
        self.wait_load(selector)

    def wait_load(self, what: str, loader: str | None = None) -> None:
        """Wait until the tab's main frame navigated (by ``loader`` if given), then fired its load event."""
        deadline = time.monotonic() + self.timeout_s
        while not self._loaded(loader):
            assert time.monotonic() < deadline, f"{what} did not load"
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))

    def _loaded(self, loader: str | None) -> bool:
        navigated = False
        for event in self.events:
            method = event.get("method")
            frame = event.get("params", {}).get("frame", {})
            main = method == "Page.frameNavigated" and "parentId" not in frame
            if main and loader in (None, frame["loaderId"]):
                navigated = True
            elif method == "Page.loadEventFired" and navigated:
                return True
        return False

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able)."""
        done = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}
        )
        assert "exceptionDetails" not in done, done["exceptionDetails"]
        return done["result"].get("value")

    def texts(self, selector: str) -> list[str]:
        """The trimmed text of every element ``selector`` finds."""
        return self.js(f"{_all(selector)}.map(e => e.textContent.trim())")

    def table(self, selector: str) -> list[list[str]]:
        """The trimmed cell texts of every table row ``selector`` finds."""
        return self.js(f"{_all(selector)}.map(tr => [...tr.cells].map(c => c.textContent.trim()))")

    def attrs(self, selector: str, name: str) -> list[str | None]:
        """Attribute ``name`` of every element ``selector`` finds."""
        return self.js(f"{_all(selector)}.map(e => e.getAttribute({json.dumps(name)}))")

    def hover(self, x: float, y: float) -> None:
        """Move the mouse to viewport coordinates (x, y)."""
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})

    def screenshot(self, path: Path) -> Path:
        """The viewport as a PNG at ``path``."""
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"]))
        return path

    def dialogs(self) -> list[dict]:
        """Alert/confirm/prompt dialogs the page opened since the last ``goto``."""
        return [e for e in self.events if e.get("method") == "Page.javascriptDialogOpening"]

    def close(self) -> None:
        self._stack.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _all(selector: str) -> str:
    """JavaScript: the array of elements ``selector`` finds."""
    return f"[...document.querySelectorAll({json.dumps(selector)})]"
