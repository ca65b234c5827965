"""HTTP plumbing shared by the server backends (llama-server, MTPLX), over httpx.

Every transport fault becomes one line naming the service, the URL and the fix:
connection refused, timeouts, HTTP errors (with the server's own message, whatever
its error shape), malformed JSON, and streams cut before their final chunk.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pytest_specdec.backends.base import BackendOptions, OptionSpec
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError, SpecdecUsageError

QUOTED = 300  # characters of a server's own words an error line quotes


def _quoted(text: str) -> str:
    """``text`` on one line, at most :data:`QUOTED` characters (a longer one says how long it was)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= QUOTED else f"{flat[:QUOTED]}… ({len(flat):,} characters)"


def server_message(body: str) -> str:
    """The human message inside an error body: ``{"error": "..."}``,
    ``{"error": {"message": ...}}`` (OpenAI, llama-server) or ``{"detail": ...}``; quoted at most
    :data:`QUOTED` characters, whatever the server sent.

    >>> server_message('{"error": {"message": "model not found"}}')
    'model not found'
    >>> server_message("x" * 10_000_000)[-30:]
    'xxxxx… (10,000,000 characters)'
    """
    try:
        parsed = json.loads(body)
    except ValueError:
        return _quoted(body) or "(empty body)"
    if isinstance(parsed, dict):
        error = parsed.get("error", parsed.get("detail"))
        if isinstance(error, dict):
            return _quoted(str(error.get("message") or error))
        if error is not None:
            return _quoted(str(error))
    return _quoted(body)


def checked_url(url: str, option: str) -> str:
    """``url`` if it is an ``http(s)://HOST[:PORT]`` address; otherwise one line naming the option to fix."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as error:
        raise SpecdecUsageError(f"{option}={url!r} is not a valid URL ({error}) — use http://HOST:PORT") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SpecdecUsageError(f"{option}={url!r} is not a valid URL — use http://HOST:PORT")
    return url


class HttpService:
    """A JSON-over-HTTP server at ``base_url`` (``service`` names it in messages)."""

    def __init__(
        self, service: str, base_url: str, timeout_s: float, fix: str, headers: Mapping[str, str] | None = None
    ) -> None:
        import httpx

        self.service = service
        self.base_url = checked_url(base_url, "url").rstrip("/")
        self.timeout_s = timeout_s
        self.fix = fix
        self._client = httpx.Client(base_url=self.base_url, timeout=timeout_s, headers=dict(headers or {}))

    def _fault(self, error: Exception) -> BackendRuntimeError:
        import httpx

        if isinstance(error, httpx.ConnectError):
            return BackendRuntimeError(
                f"cannot reach {self.service} at {self.base_url} (connection refused) — {self.fix}"
            )
        if isinstance(error, httpx.TimeoutException):
            return BackendRuntimeError(
                f"{self.service} at {self.base_url} did not answer within {self.timeout_s:g} s — "
                "raise --specdec-backend-option timeout=SECONDS or check the server"
            )
        if isinstance(error, (httpx.RemoteProtocolError, httpx.ReadError)):
            return BackendRuntimeError(
                f"{self.service} at {self.base_url} cut the response short ({error}) — no partial result was kept"
            )
        return BackendRuntimeError(f"{self.service} at {self.base_url}: {error}")

    def _check(self, response: Any, path: str) -> None:
        if response.status_code >= 400:
            response.read()
            raise BackendRuntimeError(
                f"{self.service} answered HTTP {response.status_code} on {path}: {server_message(response.text)}"
            )

    def _parsed(self, text: str, path: str, kind: type, what: str) -> Any:
        try:
            parsed = json.loads(text)
        except ValueError as error:
            raise BackendRuntimeError(f"{self.service} sent malformed JSON on {path} ({error})") from None
        if not isinstance(parsed, kind):
            raise BackendRuntimeError(f"{self.service} sent {type(parsed).__name__} on {path}, expected {what}")
        return parsed

    def _decode(self, text: str, path: str) -> dict[str, Any]:
        found: dict[str, Any] = self._parsed(text, path, dict, "a JSON object")
        return found

    def get_text(self, path: str) -> str:
        """GET a text body (llama-server's Prometheus ``/metrics``)."""
        return self._get_text(path)

    def _deadline_passed(self, path: str) -> BackendRuntimeError:
        return BackendRuntimeError(
            f"{self.service} at {self.base_url} did not finish {path} within {self.timeout_s:g} s in all (it kept "
            "sending, slowly) — raise --specdec-backend-option timeout=SECONDS or check the server"
        )

    def _body_within(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> str:
        """The whole response body, read within ``timeout_s`` in all (httpx's timeout is per read)."""
        import httpx

        deadline = time.monotonic() + self.timeout_s
        try:
            with self._client.stream(method, path, json=dict(body) if body is not None else None) as response:
                self._check(response, path)
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        raise self._deadline_passed(path)
                return b"".join(chunks).decode(response.encoding or "utf-8", errors="replace")
        except httpx.HTTPError as error:
            raise self._fault(error) from None

    def _get_text(self, path: str) -> str:
        return self._body_within("GET", path)

    def get(self, path: str) -> dict[str, Any]:
        """GET a JSON object."""
        return self._decode(self._get_text(path), path)

    def get_list(self, path: str) -> list[Any]:
        """GET a JSON array (llama-server's ``/slots``)."""
        found: list[Any] = self._parsed(self._get_text(path), path, list, "a JSON array")
        return found

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST JSON, receive a JSON object."""
        return self._decode(self._body_within("POST", path, body), path)

    def stream_events(self, path: str, body: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """POST JSON and yield the objects of a server-sent-event stream (``data: ...``).

        Ends at ``data: [DONE]`` or when the server closes the stream.
        """
        import httpx

        deadline = time.monotonic() + self.timeout_s
        try:
            with self._client.stream("POST", path, json=dict(body)) as response:
                self._check(response, path)
                pending = ""
                for text in response.iter_text():
                    if time.monotonic() > deadline:
                        raise self._deadline_passed(path)
                    pending += text
                    *lines, pending = pending.split("\n")
                    for line in (raw.strip() for raw in lines):
                        payload = line.removeprefix("data:").strip()
                        if not line.startswith("data:"):
                            continue
                        if payload == "[DONE]":
                            return
                        yield self._decode(payload, path)
                last = pending.strip()  # a stream whose last event has no newline after it
                if last.startswith("data:") and last.removeprefix("data:").strip() != "[DONE]":
                    yield self._decode(last.removeprefix("data:").strip(), path)
        except httpx.HTTPError as error:
            raise self._fault(error) from None

    def events(self, path: str, body: Mapping[str, Any], *, stream: bool) -> Iterator[dict[str, Any]]:
        """The response's JSON objects: each server-sent event, or the one object of a whole response."""
        if stream:
            yield from self.stream_events(path, body)
        else:
            yield self.post(path, body)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()


def deadline_transport(total_s: float) -> Any:
    """An httpx transport whose every response must arrive whole within ``total_s`` (httpx's timeout is per read).

    For clients built on httpx that this module does not drive (the ``ollama`` client): a
    server that drips a byte at a time is cut off with ``httpx.ReadTimeout`` at the deadline.
    """
    import httpx

    class DeadlineStream(httpx.SyncByteStream):
        def __init__(self, inner: Any, deadline: float, request: httpx.Request) -> None:
            self._inner, self._deadline, self._request = inner, deadline, request

        def __iter__(self) -> Iterator[bytes]:
            for chunk in self._inner:
                if time.monotonic() > self._deadline:
                    raise httpx.ReadTimeout(f"no whole answer within {total_s:g} s in all", request=self._request)
                yield chunk

        def close(self) -> None:
            self._inner.close()

    class DeadlineTransport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            deadline = time.monotonic() + total_s
            response = super().handle_request(request)
            response.stream = DeadlineStream(response.stream, deadline, request)
            return response

    return DeadlineTransport()


# The options every server reached through :func:`connect` takes.
HTTP_OPTIONS = (
    OptionSpec("url", "str", "the server's URL"),
    OptionSpec("timeout", "float", "seconds a request may take"),
    OptionSpec("stream", "bool", "stream completions (tokens as they arrive)"),
)


def connect(
    backend: str,
    options: Mapping[str, str],
    *,
    service: str,
    default_url: str,
    timeout_s: float,
    start_hint: str,
    headers: Mapping[str, str] | None = None,
) -> tuple[HttpService, bool]:
    """A service from the ``url`` / ``timeout`` / ``stream`` backend options, and whether to stream."""
    reader = BackendOptions(backend, options)
    url = reader.text("url", default_url)
    timeout = reader.number("timeout", timeout_s, low=0.1, high=86_400)
    stream = reader.flag("stream", True)
    reader.reject_unknown()
    fix = f"{start_hint} or set --specdec-backend-option url=http://HOST:PORT"
    return HttpService(service, url, timeout, fix, headers), stream


def get_or_refuse(http: HttpService, path: str) -> dict[str, Any]:
    """GET at load time: a fault is a usage error (the server is not there), and the pool is closed."""
    try:
        return http.get(path)
    except BackendRuntimeError as error:
        http.close()
        raise ModelLoadError(str(error)) from None


def text_units(text: str) -> tuple[int, ...]:
    """Code points of a text piece: a stand-in for token ids where a server sends none.

    Comparing these across arms is the byte-identical-output check.
    """
    return tuple(ord(character) for character in text)
