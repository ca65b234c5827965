"""Managed ``ollama serve``: a server the plugin starts with a chosen environment.

Needed for server-level switches such as ``OLLAMA_FLASH_ATTENTION`` (unset means
``auto``, which is not a valid "off" arm). The server gets a free loopback port
(``OLLAMA_HOST=127.0.0.1:PORT``), the plugin waits until ``GET /`` answers, and
stops it (SIGTERM, then SIGKILL) when the session ends.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping

from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError

READY_TIMEOUT_S = 60.0


def parse_environment(text: str) -> dict[str, str]:
    """``"OLLAMA_FLASH_ATTENTION=0;OLLAMA_KV_CACHE_TYPE=q8_0"`` → a dict."""
    environment: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecdecUsageError(f"serve_env item {item!r} must look like NAME=VALUE (items separated by ';')")
        environment[key.strip()] = value.strip()
    return environment


def free_port() -> int:
    """A port nothing listens on right now (127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ManagedOllama:
    """``ollama serve`` on a free loopback port, with ``environment`` added."""

    def __init__(self, environment: Mapping[str, str], ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.environment = dict(environment)
        self.ready_timeout_s = ready_timeout_s
        self.host = ""
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> ManagedOllama:
        """Start the server and wait until it answers."""
        binary = shutil.which("ollama")
        if binary is None:
            raise BackendUnavailable(
                "--specdec-ollama-serve needs the 'ollama' binary on PATH — install Ollama or drop the option"
            )
        port = free_port()
        self.host = f"http://127.0.0.1:{port}"
        env = {**os.environ, **self.environment, "OLLAMA_HOST": f"127.0.0.1:{port}"}
        self._process = subprocess.Popen(
            [binary, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.ready_timeout_s
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                stderr = (self._process.stderr.read() if self._process.stderr else b"").decode(errors="replace")
                last = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {self._process.returncode}"
                raise BackendUnavailable(f"'ollama serve' exited before it was ready: {last}")
            try:
                if httpx.get(self.host + "/", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)  # readiness polling of a child process, not test synchronisation
        self.stop()
        raise BackendUnavailable(f"'ollama serve' did not answer on {self.host} within {self.ready_timeout_s:g} s")

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; reaps the process."""
        process = self._process
        self._process = None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if process.stderr:
            process.stderr.close()
