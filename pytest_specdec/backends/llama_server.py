"""llama.cpp's ``llama-server`` over HTTP: the document's "llama.cpp Metal MTP" row.

The user starts the server with speculation, e.g.
``llama-server -m model.gguf --spec-type draft-mtp --spec-draft-n-max 3`` (or a
draft model), and points ``--backend=llama-server`` at it
(``--specdec-backend-option url=http://127.0.0.1:8080``). Each arm is one
``POST /completion``:

* plain: ``"speculative.n_max": 0``; SD: ``"speculative.n_max": γ``;
* greedy (``temperature`` 0, ``top_k`` 1), fixed ``seed``, ``n_predict`` tokens with
  ``ignore_eos``, ``cache_prompt`` off, ``return_tokens`` on;
* decode time and count from the response's ``timings.predicted_ms`` /
  ``predicted_n``; drafted and accepted from ``timings.draft_n`` /
  ``draft_n_accepted`` (the ground truth of "is speculation live").
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_specdec.backends.base import (
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.http_client import connect, get_or_refuse
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError

DEFAULT_URL = "http://127.0.0.1:8080"


def text_units(text: str) -> tuple[int, ...]:
    """Code points of a text piece: a stand-in for token ids where a server sends none.

    Comparing these across arms is the byte-identical-output check.
    """
    return tuple(ord(character) for character in text)


class LlamaServerBackend:
    """A running llama-server; the model is whatever it has loaded."""

    name: ClassVar[str] = "llama-server"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        self._http, self._stream = connect(
            self.name, options, service="llama-server", default_url=DEFAULT_URL, timeout_s=120.0,
            start_hint="start llama-server",
        )  # fmt: skip
        url = self._http.base_url
        health = get_or_refuse(self._http, "/health")
        self._props = get_or_refuse(self._http, "/props")
        if health.get("status") not in (None, "ok"):
            raise ModelLoadError(f"llama-server at {url} is not ready: {health} — wait for the model to load")
        model = str(self._props.get("model_alias") or self._props.get("model_path") or pair.target)
        self._pair = ModelPair(model, "server-configured drafter")
        self._requested = pair

    @property
    def pair(self) -> ModelPair:
        """The model the server reports (its drafter is set on its command line)."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """The server's build and model, from ``/props``."""
        build = str(self._props.get("build_info") or "unknown build")
        settings = self._props.get("default_generation_settings") or {}
        params = settings.get("params", {}) if isinstance(settings, dict) else {}
        return Fingerprint(
            backend=self.name,
            release=f"llama.cpp {build}",
            versions={"llama.cpp": build},
            device=f"server: {self._http.base_url}",
            details={
                "model_path": str(self._props.get("model_path", "")),
                "n_ctx": str(settings.get("n_ctx", "")) if isinstance(settings, dict) else "",
                "speculative.n_max": str(params.get("speculative.n_max", "")) if isinstance(params, dict) else "",
            },
        )

    def model_digest(self) -> str:
        """The server has no digest field: hash what it reports about its model."""
        identity = {k: self._props.get(k) for k in ("model_path", "model_alias", "build_info")}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        return {
            "prompt": request.prompt,
            "n_predict": request.max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "seed": request.seed,
            "ignore_eos": True,
            "cache_prompt": False,
            "return_tokens": True,
            "stream": self._stream,
            "speculative.n_max": request.arm.num_draft if request.arm.speculative else 0,
            "speculative.n_min": 0,
        }

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one greedy completion and read its ``timings``."""
        final: dict[str, Any] | None = None
        for event in self._http.events("/completion", self._body(request), stream=self._stream):
            tokens = event.get("tokens")
            ids = (
                tuple(int(t) for t in tokens) if isinstance(tokens, list) else text_units(str(event.get("content", "")))
            )
            if ids:
                yield TokenBurst(ids)
            if event.get("stop") or not self._stream:  # a whole response is its own final chunk
                final = event
                break
        if final is None:
            raise BackendRuntimeError(
                f"the stream from llama-server at {self._http.base_url} ended before its final chunk — no result kept"
            )
        timings = final.get("timings")
        if not isinstance(timings, dict) or "predicted_ms" not in timings or "predicted_n" not in timings:
            raise BackendRuntimeError(
                f"llama-server at {self._http.base_url} answered without 'timings' (predicted_ms, predicted_n) — "
                "is it llama.cpp's llama-server, and a build from 2024 or later?"
            )
        speculative = request.arm.speculative
        return GenerationStats(
            prompt_tokens=int(timings.get("prompt_n", 0)),
            drafted=int(timings.get("draft_n", 0)) if speculative else None,
            accepted=int(timings.get("draft_n_accepted", 0)) if speculative else None,
            server_decode_seconds=float(timings["predicted_ms"]) / 1000.0,
            server_decode_tokens=int(timings["predicted_n"]),
        )

    def close(self) -> None:
        """Close the connection pool (the server keeps running)."""
        self._http.close()
