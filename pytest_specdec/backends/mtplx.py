"""MTPLX (``mtplx serve``, OpenAI-compatible) over HTTP: MTP heads vs autoregressive.

One server, same weights: the plain arm asks ``"generation_mode": "ar"``, the SD
arm ``"generation_mode": "mtp"`` with ``"depth": γ``. ``/health`` says whether MTP
is loaded (``mtp_enabled``, ``depth``) and what drafts (``draft_head_identity``):
MTPLX uses the target's own MTP heads, not a separate draft model, and the
fingerprint records what the server reports. Token counts come from ``usage``,
timing from the stream (the protocol's wall clock), drafted / accepted counts from
``mtplx_stats`` or, where absent, ``GET /metrics``.
"""

from __future__ import annotations

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
from pytest_specdec.backends.llama_server import text_units
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError

DEFAULT_URL = "http://127.0.0.1:8000"


class MtplxBackend:
    """A running ``mtplx serve``; plain = ``ar`` mode, SD = ``mtp`` mode."""

    name: ClassVar[str] = "mtplx"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        self._http, self._stream = connect(
            self.name, options, service="MTPLX", default_url=DEFAULT_URL, timeout_s=300.0,
            start_hint="start 'mtplx serve'",
        )  # fmt: skip
        url = self._http.base_url
        self._health = get_or_refuse(self._http, "/health")
        if not self._health.get("ok", False):
            raise ModelLoadError(f"MTPLX at {url} is not ready: {self._health} — wait for the model to load")
        if "mtp" not in self._health.get("available_generation_modes", ["mtp", "ar"]):
            raise ModelLoadError(f"MTPLX at {url} offers no 'mtp' generation mode — start it without --no-mtp")
        self._model = str(self._health.get("model") or pair.target)
        self._pair = ModelPair(self._model, "own MTP heads")

    @property
    def pair(self) -> ModelPair:
        """The served model; its drafter is its own MTP heads."""
        return self._pair

    @property
    def drafter(self) -> str:
        """What drafts, as the server reports it (MTPLX: the target's own MTP heads)."""
        identity = self._health.get("draft_head_identity")
        if identity:
            return str(identity)
        return "the target's own MTP heads" if self._health.get("mtp_enabled") else "none (MTP not loaded)"

    def fingerprint(self) -> Fingerprint:
        """Server version (when reported), MTP state and drafter."""
        version = str(self._health.get("version") or "unknown")
        return Fingerprint(
            backend=self.name,
            release=f"mtplx {version}",
            versions={"mtplx": version},
            device=f"server: {self._http.base_url}",
            details={
                "model_path": str(self._health.get("model_path", "")),
                "mtp_enabled": str(self._health.get("mtp_enabled")),
                "depth": str(self._health.get("depth")),
                "default_generation_mode": str(self._health.get("generation_mode")),
                "drafter": self.drafter,
                "separate_draft_model": "no" if self._health.get("mtp_enabled") else "unknown",
            },
        )

    def model_digest(self) -> str:
        """The served model's path and name (MTPLX reports no digest)."""
        import hashlib

        identity = f"{self._health.get('model_path', '')}|{self._model}"
        return hashlib.sha256(identity.encode()).hexdigest()[:16]

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        speculative = request.arm.speculative
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": request.prompt,
            "max_tokens": request.max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "seed": request.seed,
            "stream": self._stream,
            "generation_mode": "mtp" if speculative else "ar",
        }
        if speculative:
            body["depth"] = request.arm.num_draft
        return body

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one greedy completion; counts from ``usage`` and ``mtplx_stats``."""
        usage: dict[str, Any] | None = None
        stats: dict[str, Any] = {}
        for event in self._http.events("/v1/completions", self._body(request), stream=self._stream):
            for choice in event.get("choices") or []:
                text = str(choice.get("text") or "")
                if text:
                    yield TokenBurst(text_units(text))
            if isinstance(event.get("usage"), dict):
                usage = event["usage"]
                stats = event.get("mtplx_stats") or {}
        if usage is None or "completion_tokens" not in usage:
            raise BackendRuntimeError(
                f"MTPLX at {self._http.base_url} ended the completion without 'usage' — no result kept"
            )
        if request.arm.speculative and "drafted_tokens" not in stats:
            latest = self._http.get("/metrics").get("latest") or {}
            stats = latest if isinstance(latest, dict) else {}
        speculative = request.arm.speculative
        return GenerationStats(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            drafted=int(stats.get("drafted_tokens", 0)) if speculative else None,
            accepted=int(stats.get("accepted_drafts", 0)) if speculative else None,
            generated_tokens=int(usage["completion_tokens"]),
        )

    def close(self) -> None:
        """Close the connection pool (the server keeps running)."""
        self._http.close()
