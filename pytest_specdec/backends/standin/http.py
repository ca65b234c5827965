"""A small threaded HTTP/1.1 server with JSON, chunked streaming and injectable faults."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

FAULTS = ("http500", "malformed", "cut", "no-timings", "slow", "not-found", "loading", "midstream")


class StandinServer(ThreadingHTTPServer):
    """Serves one handler class on 127.0.0.1; ``faults`` can be changed while it runs."""

    daemon_threads = True

    def __init__(
        self,
        handler: type[StandinHandler],
        engine: Any,
        port: int = 0,
        faults: Iterable[str] = (),
        settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.engine = engine
        self.faults: set[str] = set(faults)
        self.settings = dict(settings or {})  # what the real server takes on its command line
        self.state: dict[str, Any] = {}  # what the real server remembers between requests
        self.released = threading.Event()  # a "slow" response waits for this (or the client's timeout)
        self.requests: list[tuple[str, str, Any]] = []
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def start(self) -> StandinServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self.serve_forever, name="specdec-standin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release any held response."""
        self.released.set()
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


class StandinHandler(BaseHTTPRequestHandler):
    """Routes ``(METHOD, path)`` to methods; subclasses fill :attr:`routes`."""

    protocol_version = "HTTP/1.1"
    routes: ClassVar[dict[tuple[str, str], str]] = {}
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read responses, not logs."""

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        name = self.routes.get((method, path))
        if name is None:
            self.send_json(404, self.not_found_body(path))
            return
        body = self.read_json() if method == "POST" else None
        if method == "POST" and body is None:
            return
        self.server.requests.append((method, path, body))
        if "slow" in self.server.faults:
            self.server.released.wait()
            return
        getattr(self, name)(body)

    def do_GET(self) -> None:
        """Route a GET."""
        self._dispatch("GET")

    def do_POST(self) -> None:
        """Route a POST."""
        self._dispatch("POST")

    def not_found_body(self, path: str) -> object:
        """The server's own 404 body."""
        return {"error": f"{path} not found"}

    def error_body(self, status: int, message: str) -> object:
        """The server's own error shape (overridden per server)."""
        return {"error": message}

    def read_json(self) -> dict[str, Any] | None:
        """The request's JSON object, or a 400 in the server's error shape."""
        length = int(self.headers.get("Content-Length", "0") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            self.send_json(400, self.error_body(400, "invalid JSON body"))
            return None
        if not isinstance(parsed, dict):
            self.send_json(400, self.error_body(400, "body must be a JSON object"))
            return None
        return parsed

    def send_bytes(self, status: int, payload: bytes, content_type: str) -> None:
        """A whole response with Content-Length."""
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def send_json(self, status: int, body: object) -> None:
        """A JSON response; the ``malformed`` fault truncates successful ones."""
        payload = json.dumps(body).encode()
        if status < 400 and "malformed" in self.server.faults:
            payload = payload[: len(payload) // 2]
        self.send_bytes(status, payload, "application/json; charset=utf-8")

    def stream(self, content_type: str, chunks: Iterable[bytes], cut_after: int | None = None) -> None:
        """A chunked response; ``cut`` closes the socket mid-stream, ``malformed`` breaks one line's JSON."""
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for index, original in enumerate(chunks):
            if "cut" in self.server.faults and index == (cut_after or 3):
                self.close_connection = True
                self.wfile.flush()
                return
            chunk = original
            if "malformed" in self.server.faults and index == 1:
                ending = b"\n\n" if original.endswith(b"\n\n") else b"\n"
                chunk = original.rstrip(b"\n")[: len(original) // 2] + ending
            self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def fail_if_asked(self) -> bool:
        """Answer with the injected HTTP 500, if any."""
        if "http500" in self.server.faults:
            self.send_json(500, self.error_body(500, "injected failure"))
            return True
        return False


Route = Callable[[StandinHandler, "dict[str, Any] | None"], None]
