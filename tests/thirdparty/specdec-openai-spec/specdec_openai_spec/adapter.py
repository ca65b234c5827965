"""The adapter: one completion per request, streamed; drafts read as a difference of /metrics counters."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from importlib import metadata
from typing import Any, ClassVar

import httpx

from pytest_specdec.backends.base import (
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.server_process import ServerProcess
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError

# vLLM's v1 engine counts these (vllm/v1/spec_decode/metrics.py; Prometheus adds _total to a counter).
DRAFTED = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def server_releases() -> dict[str, str]:
    """The release of the server program installed here (this package's own version)."""
    try:
        return {"openai-spec (server)": metadata.version("specdec-openai-spec")}
    except metadata.PackageNotFoundError:
        return {}


def _counter(text: str, name: str) -> int:
    found = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return int(float(found.group(1))) if found else 0


class OpenAISpecBackend:
    """Two served models on one OpenAI-compatible server: plain and speculative."""

    name: ClassVar[str] = "openai-spec"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        self._pair = pair
        self._server: ServerProcess | None = None
        if options.get("serve", "false").lower() in ("1", "true", "yes", "on"):
            # The plugin's managed-server helper: a free port, ready on /health, a pid file with the run's identity
            # (a killed run's server is reaped by the next start), the log kept when it fails.
            self._server = ServerProcess("openai-spec", lambda port: ["specdec-openai-spec-serve", "--port", str(port)],
                                         ready_path="/health").start()  # fmt: skip
        url = self._server.base_url if self._server else options.get("url", "http://127.0.0.1:8000")
        self._plain = options.get("plain_model", "plain")
        self._sd = options.get("sd_model", "sd")
        self._http = httpx.Client(base_url=url, timeout=float(options.get("timeout", "120")))
        try:
            self._version = str(self._http.get("/version").json()["version"])
            served = {m["id"] for m in self._http.get("/v1/models").json()["data"]}
        except (httpx.HTTPError, ValueError, KeyError) as error:
            self.close()
            raise ModelLoadError(f"no OpenAI-compatible server at {url}: {error} — start it or fix url=") from None
        missing = sorted({self._plain, self._sd} - served)
        if missing:
            self.close()
            raise ModelLoadError(f"the server at {url} serves no model {missing[0]!r} (it serves {sorted(served)})")

    @property
    def pair(self) -> ModelPair:
        """The models this backend instance serves."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """The server's own release."""
        return Fingerprint(self.name, f"openai-spec {self._version}", {"openai-spec": self._version})

    def model_digest(self) -> str:
        """The served models' names and the release (the server exposes no file digest)."""
        return "sha256:" + hashlib.sha256(f"{self._plain}|{self._sd}|{self._version}".encode()).hexdigest()

    def _metrics(self) -> str:
        return self._http.get("/metrics").text

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one completion; an SD request's drafts are the change of the server's counters."""
        model = self._sd if request.arm.speculative else self._plain
        before = self._metrics()
        body = {"model": model, "prompt": request.prompt, "max_tokens": request.max_tokens, "temperature": 0,
                "seed": request.seed, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
        usage: dict[str, Any] = {}
        units = 0
        try:
            with self._http.stream("POST", "/v1/completions", json=body) as response:
                if response.status_code != 200:
                    raise BackendRuntimeError(f"/v1/completions answered {response.status_code}")
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    event = json.loads(line.removeprefix("data: "))
                    usage = event.get("usage") or usage
                    for choice in event.get("choices", []):
                        text = str(choice.get("text", ""))
                        units += len(text)
                        if text:
                            yield TokenBurst(tuple(ord(c) for c in text))
        except httpx.HTTPError as error:
            raise BackendRuntimeError(f"the server failed mid-stream: {error}") from None
        after = self._metrics()
        drafted = _counter(after, DRAFTED) - _counter(before, DRAFTED)
        accepted = _counter(after, ACCEPTED) - _counter(before, ACCEPTED)
        return GenerationStats(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            drafted=drafted if request.arm.speculative else 0,
            accepted=accepted if request.arm.speculative else 0,
            generated_tokens=int(usage.get("completion_tokens", units)),
            output_units="character",
        )

    def close(self) -> None:
        """Close the connection pool, and stop the server this backend started."""
        self._http.close()
        if self._server is not None:
            self._server.stop()
