"""Debian's headless chromium, driven over the DevTools protocol on a pipe (no network port,
no package): open a page, evaluate JavaScript in it, collect its console errors, take a
screenshot. For the tests of `smallville serve` and its benchmark."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """One headless chromium and one page in it. `evaluate(js)` returns the value of an
    expression (awaited if a promise); `errors` collects exceptions and console errors."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 900) -> None:
        to_chrome, self._write = os.pipe()
        self._read, from_chrome = os.pipe()

        def fds() -> None:  # chromium reads commands on fd 3 and answers on fd 4
            high = os.dup(to_chrome), os.dup(from_chrome)  # (out of the way of 3 and 4 first)
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--remote-debugging-pipe",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-quic",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=fds,
            close_fds=False,
        )  # (our pipes close on exec; 3 and 4 stay)
        os.close(to_chrome)
        os.close(from_chrome)
        self._next, self._answers, self.errors = 0, {}, []
        self._lock, self._arrived = threading.Lock(), threading.Condition()
        self._reader = threading.Thread(target=self._listen, daemon=True)
        self._reader.start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Page", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _listen(self) -> None:
        buffer = b""
        with os.fdopen(self._read, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buffer += chunk
                *messages, buffer = buffer.split(b"\0")
                for raw in messages:
                    message = json.loads(raw)
                    if "id" in message:
                        with self._arrived:
                            self._answers[message["id"]] = message
                            self._arrived.notify_all()
                    else:
                        self._note(message)

    def _note(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            self.errors.append(
                params["exceptionDetails"].get("exception", {}).get("description")
                or params["exceptionDetails"].get("text")
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            self.errors.append(params["entry"]["text"] + " " + params["entry"].get("url", ""))

    def call(self, method: str, session: bool = False, timeout: float = 60, **params) -> dict:
        with self._lock:
            self._next += 1
            ident = self._next
        message = {"id": ident, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._arrived:
            while ident not in self._answers:
                if not self._arrived.wait(deadline - time.monotonic()) and ident not in self._answers:
                    raise TimeoutError(f"chromium did not answer {method} in {timeout} s")
            answer = self._answers.pop(ident)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def open(self, url: str) -> None:
        """Go to `url` and wait until its document has loaded."""
        self.call("Page.navigate", session=True, url=url)
        self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'", what=url)

    def evaluate(self, expression: str):
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60, what: str = ""):
        """The value of `expression` once it is truthy, looked at until a deadline."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # (the page was between documents)
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout} s for {what or expression}")
            time.sleep(0.05)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (OSError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._write)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
