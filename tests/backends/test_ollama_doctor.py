"""``pytest-specdec doctor``'s Ollama lines against the stand-in: which tags toggle SD, and how to pair the rest."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from pytest_specdec.backends.ollama import doctor
from pytest_specdec.backends.ollama.doctor import tag_findings
from pytest_specdec.backends.ollama.standin import OllamaHandler
from pytest_specdec.backends.server_process import free_port
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer


@pytest.fixture
def ollama(engine: GenerationEngine) -> Iterator[StandinServer]:
    server = StandinServer(OllamaHandler, engine).start()
    yield server
    server.stop()


def line_for(lines: list[str], tag: str) -> str:
    return next(line for line in lines if line.startswith((f"ollama {tag}:", f"! ollama {tag}:")))


def test_each_pulled_tag_says_whether_it_can_toggle_sd(ollama: StandinServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    lines = tag_findings()
    assert lines[0].startswith(f"ollama 0.32.4 at {ollama.url}: ")
    assert "sd=option toggles SD" in line_for(lines, "specdec-synthetic:mtp")
    assert "no MTP layers and no DRAFT — Ollama cannot speculate" in line_for(lines, "specdec-synthetic:latest")
    twin = line_for(lines, "specdec-synthetic:draft")
    assert "plain twin" in twin
    assert "same FROM and no DRAFT" in twin
    assert "sd=tag plain_model=" in twin


def test_an_old_server_is_told_to_upgrade(engine: GenerationEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    server = StandinServer(OllamaHandler, engine, settings={"version": "0.29.1"}).start()
    try:
        monkeypatch.setenv("OLLAMA_HOST", server.url)
        lines = tag_findings()
    finally:
        server.stop()
    assert line_for(lines, "specdec-synthetic:mtp").startswith("! ollama specdec-synthetic:mtp: MTP layers, but ")


def test_no_server_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    (line,) = tag_findings()
    assert line.startswith("ollama: no server answered at http://127.0.0.1:")
    assert "start `ollama serve`" in line


def test_a_server_that_drips_bytes_is_cut_off_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor against a server that answers a byte at a time ends with its one line (issue #51: it never did)."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def drip() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
        while not stop.wait(0.05):  # the misbehaviour under test: one byte every 50 ms, for ever
            try:
                connection.sendall(b" ")
            except OSError:
                break
        connection.close()

    threading.Thread(target=drip, daemon=True).start()
    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setattr(doctor, "REQUEST_S", 0.5)
    try:
        (line,) = tag_findings()
    finally:
        stop.set()
        listener.close()
    assert line.startswith("ollama: no server answered at http://127.0.0.1:")
    assert "(ReadTimeout)" in line
