"""`nmtkit serve` in a subprocess, for the tests that drive a real server process (loopback only)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

STARTUP_SECONDS = 60


class Server:
    """`nmtkit serve` in a subprocess on a port the system chose (--port 0, read from its log)."""

    def __init__(self, model: Path, *options: str):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nmtkit", "serve", "-m", str(model), "--port", "0", "--threads", "1", *options],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.log: list[str] = []
        self.url = self._wait_for_address()
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _wait_for_address(self) -> str:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            self.log.append(line)
            found = re.search(r"serving on (http://[\d.]+:\d+)", line)
            if found:
                return found.group(1)
        self.process.kill()
        raise AssertionError("the server did not start:\n" + "".join(self.log) + self.process.stderr.read())

    def _read_log(self) -> None:
        self.log.extend(self.process.stderr)

    def post(self, body: bytes | dict, path: str = "/translate", method: str = "POST",
             timeout: float = 30) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data if method == "POST" else None, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def health(self, timeout: float = 30) -> dict:
        return self.post(b"", "/health", "GET", timeout)[1]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)
