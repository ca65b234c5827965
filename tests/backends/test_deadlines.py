"""A server that keeps sending, one byte at a time, cannot hold a request past its timeout."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_specdec.backends.http_client import HttpService
from pytest_specdec.errors import BackendRuntimeError

DRIP_S = 0.1  # one byte each time: every read succeeds well inside the per-read timeout
DRIP_BYTES = 150  # about 15 s in all, then the server gives up (a hang would not end the test)


@pytest.fixture
def dripping() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
                for byte in b'data: {"content": "' + b"x" * DRIP_BYTES:
                    if stop.is_set():
                        return
                    try:
                        connection.sendall(bytes([byte]))
                    except OSError:
                        break  # the client gave up: what the deadline is for
                    stop.wait(DRIP_S)  # the fault itself: a server that drips

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()
    thread.join(timeout=5)


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
def test_a_dripping_server_is_cut_off_at_the_total_deadline(dripping: str, streaming: bool) -> None:
    service = HttpService("llama-server", dripping, 1.0, "check the server")
    started = time.monotonic()
    try:
        with pytest.raises(BackendRuntimeError, match=r"did not finish /completion within 1 s in all"):
            list(service.events("/completion", {"prompt": "x"}, stream=streaming))
    finally:
        service.close()
    assert time.monotonic() - started < DRIP_BYTES * DRIP_S / 2, "cut off long before the server gave up"


def test_ollama_through_its_own_client_is_cut_off_at_the_total_deadline(dripping: str) -> None:
    from pytest_specdec.backends.base import ModelPair
    from pytest_specdec.backends.ollama.adapter import OllamaBackend
    from pytest_specdec.errors import ModelLoadError

    started = time.monotonic()
    with pytest.raises(ModelLoadError, match=r"did not answer within 1 s in all"):
        OllamaBackend(ModelPair("some-model:latest"), {"host": dripping, "timeout": "1"})
    assert time.monotonic() - started < DRIP_BYTES * DRIP_S / 2, "cut off long before the server gave up"
