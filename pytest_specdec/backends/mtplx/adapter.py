"""MTPLX (``mtplx serve``, OpenAI-compatible) over HTTP: MTP heads vs autoregressive.

One server, same weights: the plain arm asks ``"generation_mode": "ar"``, the SD
arm ``"generation_mode": "mtp"`` with ``"depth": γ``. What follows MTPLX's source
(the PyPI wheel, ``mtplx/server/openai.py``):

* the request's ``generation_mode`` is binding only while client controls are
  allowed; ``MTPLX_CLIENT_CONTROLS_DEFAULT=hints`` ignores it silently, and the header
  ``X-MTPLX-Allow-Client-Controls`` makes it binding either way
  (``_client_controls_allowed``) — so every request sends that header, and the mode
  that really ran (``mtplx_stats.generation_mode``) must be the one asked for;
* ``/health`` ``mtp_enabled`` is the runtime's truth (its ``available_generation_modes``
  list is hard-coded): without MTP heads loaded there is no SD arm;
* ``/health`` carries no MTPLX version: the release is ``mtplx --version`` on this
  machine, else the installed package's version, else it says it is unknown.

Token counts come from ``usage``, timing from the stream (the protocol's wall clock),
drafted / accepted counts from ``mtplx_stats`` (both arms: ``ar`` drafts 0) or, where
absent, ``GET /metrics``. The real server cannot start on Linux: its runtime loads
macOS's libSystem when imported.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from typing import Any, ClassVar

from pytest_specdec.backends.base import (
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.http_client import connect, get_or_refuse, text_units
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError

DEFAULT_URL = "http://127.0.0.1:8000"
CONTROL_HEADER = {"X-MTPLX-Allow-Client-Controls": "1"}


def mtplx_release() -> str:
    """``mtplx 2.12.2`` from ``mtplx --version``, else the installed package; says so when unknown."""
    binary = shutil.which("mtplx")
    if binary is not None:
        try:
            done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            done = None
        words = (done.stdout.split() if done is not None else [])[:2]
        if len(words) == 2 and words[0] == "mtplx":
            return f"mtplx {words[1]}"
    try:
        return f"mtplx {metadata.version('mtplx')}"
    except metadata.PackageNotFoundError:
        return "mtplx (version unknown: its /health reports none and no mtplx is installed here)"


class MtplxBackend:
    """A running ``mtplx serve``; plain = ``ar`` mode, SD = ``mtp`` mode."""

    name: ClassVar[str] = "mtplx"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        self._http, self._stream = connect(
            self.name, options, service="MTPLX", default_url=DEFAULT_URL, timeout_s=300.0,
            start_hint="start 'mtplx serve'", headers=CONTROL_HEADER,
        )  # fmt: skip
        url = self._http.base_url
        self._health = get_or_refuse(self._http, "/health")
        if not self._health.get("ok", False):
            raise ModelLoadError(f"MTPLX at {url} is not ready: {self._health} — wait for the model to load")
        if self._health.get("mtp_enabled") is False:
            self._http.close()
            raise ModelLoadError(
                f"MTPLX at {url} has no MTP heads loaded (mtp_enabled: false): there is no SD arm to measure — "
                "start 'mtplx serve' with MTP (without --stock-ar / --no-load-mtp)"
            )
        self._release = mtplx_release()
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

    def default_num_draft(self) -> int | None:
        """The depth ``mtplx serve`` runs when a request sets none: its configured ``depth`` (``/health``)."""
        depth = self._health.get("depth")
        return depth if isinstance(depth, int) and depth > 0 else None

    def fingerprint(self) -> Fingerprint:
        """MTPLX release (``mtplx --version``), MTP state and drafter."""
        return Fingerprint(
            backend=self.name,
            release=self._release,
            versions={"mtplx": self._release.removeprefix("mtplx ")},
            device=f"server: {self._http.base_url}",
            details={
                "model_path": str(self._health.get("model_path", "")),
                "mtp_enabled": str(self._health.get("mtp_enabled")),
                "depth": str(self._health.get("depth")),
                # --adaptive-policy (mtplx/adaptive.py): with one set, γ is the ceiling each round may stop short of
                "adaptive": str(self._health.get("adaptive", "not reported")),
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
        if "drafted_tokens" not in stats:
            latest = self._http.get("/metrics").get("latest") or {}
            stats = latest if isinstance(latest, dict) else {}
        asked = self._body(request)["generation_mode"]
        ran = stats.get("generation_mode", asked)
        if ran != asked:
            raise BackendRuntimeError(
                f"MTPLX at {self._http.base_url} ran generation_mode {ran!r} for the {request.arm.label} arm, not "
                f"{asked!r}: it ignores client controls (fields ignored: {stats.get('client_control_fields_ignored')}) "
                "— unset MTPLX_CLIENT_CONTROLS_DEFAULT=hints on the server"
            )
        depth = stats.get("mtp_depth")
        if request.arm.speculative and isinstance(depth, int) and depth != request.arm.num_draft:
            raise BackendRuntimeError(
                f"MTPLX at {self._http.base_url} ran mtp_depth {depth} where γ={request.arm.num_draft} was asked "
                f"(requested_mtp_depth {stats.get('requested_mtp_depth')}; its long-context cap lowers the depth "
                "for long prompts) — no result is labelled with a depth that did not run: measure γ="
                f"{depth}, or turn the cap off (MTPLX_LONG_CONTEXT_MTP_DEPTH_POLICY=off)"
            )
        return GenerationStats(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            drafted=int(stats["drafted_tokens"]) if "drafted_tokens" in stats else None,
            accepted=int(stats["accepted_drafts"]) if "accepted_drafts" in stats else None,
            generated_tokens=int(usage["completion_tokens"]),
            output_units="character",
        )

    def close(self) -> None:
        """Close the connection pool (the server keeps running)."""
        self._http.close()
