"""Managed ``ollama serve``: a server the plugin starts with a chosen environment.

Needed for server-level switches such as ``OLLAMA_FLASH_ATTENTION`` (unset means
``auto``, which is not a valid "off" arm). The server gets a free loopback port
(``OLLAMA_HOST=127.0.0.1:PORT``) and is ready when ``GET /`` answers; it runs as a
:class:`~pytest_specdec.backends.server_process.ServerProcess` (own process group,
log file, reaped after a killed run).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from pytest_specdec.backends.server_process import READY_TIMEOUT_S, ServerProcess, free_port
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError

__all__ = ["ManagedOllama", "free_port", "parse_environment"]


def parse_environment(text: str) -> dict[str, str]:
    """``"OLLAMA_FLASH_ATTENTION=0;OLLAMA_KV_CACHE_TYPE=q8_0"`` → a dict."""
    environment: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SpecdecUsageError(f"serve_env item {item!r} must look like NAME=VALUE (items separated by ';')")
        environment[key.strip()] = value.strip()
    return environment


class ManagedOllama:
    """``ollama serve`` on a free loopback port, with ``environment`` added."""

    def __init__(self, environment: Mapping[str, str], ready_timeout_s: float = READY_TIMEOUT_S) -> None:
        self.environment = dict(environment)
        self.ready_timeout_s = ready_timeout_s
        self.host = ""
        self._server: ServerProcess | None = None

    def start(self) -> ManagedOllama:
        """Start the server and wait until it answers."""
        binary = shutil.which("ollama")
        if binary is None:
            raise BackendUnavailable(
                "--specdec-ollama-serve needs the 'ollama' binary on PATH — install Ollama or drop the option"
            )
        port = free_port()
        self._server = ServerProcess(
            "ollama serve",
            lambda _: [binary, "serve"],
            ready_path="/",
            environment={**self.environment, "OLLAMA_HOST": f"127.0.0.1:{port}"},
            ready_timeout_s=self.ready_timeout_s,
            port=port,
        ).start()
        self.host = self._server.base_url
        return self

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._server is not None and self._server.running

    def log_text(self) -> str:
        """What the server has logged so far (its stdout and stderr)."""
        return self._server.log_text() if self._server is not None else ""

    def stop(self) -> None:
        """Stop the server's process group."""
        if self._server is not None:
            self._server.stop()
