"""LM Studio through its own Python SDK (PyPI ``lmstudio``): one loaded target, with and without ``draftModel``.

The plain arm is the request without a draft model, the SD arm the same request with
``draftModel`` (the SDK sends it as ``llm.prediction.speculativeDecoding.draftModel``,
``lmstudio/_kv_config.py``). No draft length is sent: LM Studio decides how far to draft
(its config has ``minDraftLengthToConsider`` and ``minContinueDraftingProbability``, and an
exact length only as an override), so the default arm is adaptive. Engagement and acceptance
are LM Studio's own counts in each prediction's stats (``usedDraftModelKey``,
``totalDraftTokensCount``, ``acceptedDraftTokensCount``): an SD request that used no draft
model drafted 0, observed. The engine behind the model is read from the model info LM Studio
returns (``getModelInfo``'s ``format``: ``gguf`` is served by its llama.cpp engine, ``safetensors`` by its MLX
engine); the SDK has no call for the engine's runtime version, so the fingerprint says so.
Where LM Studio's ``lms`` is installed, it loads the target (and unloads it at the end, when it was
not loaded before) and names the engine's runtime release (:mod:`.lms`). Timing is this process's
clock over the fragment stream.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

from pytest_specdec.backends.base import (
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    SpeculationEvidence,
    TokenBurst,
)
from pytest_specdec.backends.files import names_digest
from pytest_specdec.backends.http_client import text_units
from pytest_specdec.backends.lmstudio.lms import Lms
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError, SpecdecUsageError

if TYPE_CHECKING:
    from lmstudio import LlmPredictionConfigDict

ENGINES = {"gguf": "llama.cpp", "ggml": "llama.cpp", "safetensors": "MLX", "mlx_placeholder": "MLX"}
# Why LM Studio's MLX engine may load a draft model and never draft with it (lmstudio-ai/mlx-engine):
MLX_REFUSALS = (
    "its MLX engine takes a separate draft model only for models it does not batch, and ignores a model's own "
    "MTP heads (lmstudio-ai/mlx-engine #370)"
)


def one_line(error: BaseException) -> str:
    """The SDK's message on one line (its messages span several)."""
    return " ".join(str(error).split())


def _on_this_machine(host: str) -> bool:
    """Whether ``host`` (``HOST:PORT``, empty for the SDK's default ports) is this machine's loopback."""
    name = host.rpartition(":")[0].strip("[]")
    return name in ("", "127.0.0.1", "localhost", "::1")


class LmStudioBackend:
    """One LM Studio server, a loaded target and a draft model key."""

    name: ClassVar[str] = "lmstudio"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        # HOST:PORT as the SDK takes it (an http:// or ws:// in front, as a gate's serve recipe passes it, is dropped)
        host = reader.text("host", os.environ.get("LMSTUDIO_HOST", "")).split("://", 1)[-1].rstrip("/")
        timeout = reader.number("timeout", 300.0, low=0.1, high=86_400)
        given = reader.text("lms", "")
        self._lms = Lms.found(given)
        if given and self._lms is None:
            raise SpecdecUsageError(f"lmstudio lms={given!r} is not a program here — fix the path, or leave it out")
        reader.reject_unknown()
        name, _, port = host.rpartition(":")
        if host and not (name and port.isdigit() and 0 < int(port) < 65536):
            raise SpecdecUsageError(
                f"lmstudio host={host!r} is not HOST:PORT — fix --specdec-backend-option host= (or $LMSTUDIO_HOST), "
                "e.g. 127.0.0.1:1234"
            )
        if not pair.draft:
            raise SpecdecUsageError(
                "lmstudio measures a draft model against none: name one LM Studio has downloaded — "
                "--specdec-draft=MODEL_KEY (`lms ls` lists them)"
            )
        import lmstudio

        lmstudio.set_sync_api_timeout(timeout)
        self._pair = pair
        self._host = host or "default port"
        self._where = host or "LM Studio's default ports"
        if self._lms is not None and not _on_this_machine(host):
            self._lms = None  # lms speaks to the LM Studio on this machine: not the one measured
        self._stack = contextlib.ExitStack()
        try:
            self._connect(lmstudio, pair, host)
        except BaseException:
            self._stack.close()  # whatever lms or the SDK loaded for this run is unloaded again
            raise
        self._runtime = (
            self._lms.runtime(self._format)
            if self._lms is not None
            else "not reported (the lmstudio SDK has no call for it, and no `lms` for this server)"
        )
        self._sd_requests = {True: 0, False: 0}  # SD requests LM Studio counted drafts for, and not
        self._used_keys: set[str] = set()  # the draft models it named for them (usedDraftModelKey)

    def speculation_evidence(self) -> SpeculationEvidence:
        """What LM Studio's counts said of the SD requests so far."""
        drafted, idle = self._sd_requests[True], self._sd_requests[False]
        used = ", ".join(sorted(self._used_keys))
        if idle and not drafted:
            why = f"; {MLX_REFUSALS}" if self.engine == "MLX" else ""
            return SpeculationEvidence(
                False,
                False,
                f"LM Studio counted no drafted token in any of the {idle} SD request(s) (draft model used: {used}){why}",
            )
        return SpeculationEvidence(
            True if drafted else None, False, "LM Studio counts each request's drafted and accepted tokens"
        )

    def _connect(self, lmstudio: Any, pair: ModelPair, host: str) -> None:
        """The client, the target (loaded by ``lms`` where it runs, else got or loaded by the SDK), its format."""
        import httpx

        if self._lms is not None:  # lms loads the target, and unloads it at the end
            self._lms.ensure_loaded(pair.target)
            self._stack.callback(self._lms.unload_ours)
        try:
            # Entering the client probes /lmstudio-greeting (the host given, else the SDK's own ports).
            self._client = self._stack.enter_context(lmstudio.Client(host or None))
            before = {str(m.identifier) for m in self._client.llm.list_loaded()}
            self._model = self._client.llm.model(pair.target)
            if pair.target not in before and self._lms is None:  # loaded by this run: unloaded at its end
                self._stack.callback(self._client.llm.unload, pair.target)
            self._version = self._app_version()
            self._format = str(self._model.get_info().format)  # getModelInfo; each prediction reports it again
        except lmstudio.LMStudioModelNotFoundError:
            raise ModelLoadError(
                f"LM Studio at {self._where} has no model {pair.target!r} — download it (`lms get`), or name one "
                "`lms ls` lists with --specdec-model"
            ) from None
        except (lmstudio.LMStudioError, httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
            # The SDK's probe turns only refused and timed-out connections into its own error: a port that never
            # answers, an address it cannot parse, or a server that is not LM Studio raise others.
            raise ModelLoadError(
                f"LM Studio did not answer as LM Studio at {self._where} ({one_line(error)}) — start its server "
                "(`lms server start`), or pass --specdec-backend-option host=HOST:PORT"
            ) from None

    def _app_version(self) -> str:
        """LM Studio's release from its ``system`` namespace's ``version`` call; says so when it does not answer."""
        try:
            answer: Any = self._client.system.remote_call("version")
        except Exception as error:
            return f"unknown (its version call failed: {type(error).__name__})"
        if isinstance(answer, dict) and answer.get("version"):
            return str(answer["version"])
        return "unknown (its version call answered nothing)"

    @property
    def pair(self) -> ModelPair:
        """The target key and the draft key, as LM Studio names them."""
        return self._pair

    def adapts_draft_length(self) -> bool:
        """LM Studio decides each draft's length itself when a request sends none (the default arm)."""
        return True

    @property
    def engine(self) -> str:
        """The engine serving the target, from the model's format as LM Studio reports it."""
        return ENGINES.get(self._format, f"unknown (format {self._format})")

    def fingerprint(self) -> Fingerprint:
        """LM Studio's release and engine, the SDK's release, the model's format."""
        engine = self.engine
        return Fingerprint(
            backend=self.name,
            release=f"LM Studio {self._version} ({engine} engine)",
            versions={"lmstudio (app)": self._version, "lmstudio": metadata.version("lmstudio")},
            device=f"server: {self._host}",
            details={
                "engine": engine,
                "engine_runtime": self._runtime,
                "format": self._format,
                "draft_model": str(self._pair.draft),
            },
        )

    def model_digest(self) -> str:
        """The two model keys (LM Studio reports no digest)."""
        return names_digest(self._pair)

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Stream one greedy completion; the counts are LM Studio's own."""
        import lmstudio

        speculative = request.arm.speculative
        config: LlmPredictionConfigDict = {"maxTokens": request.max_tokens, "temperature": 0.0}
        if speculative and self._pair.draft:
            config["draftModel"] = self._pair.draft
        try:
            stream = self._model.complete_stream(request.prompt, config=config)
            for fragment in stream:
                if fragment.content:
                    yield TokenBurst(text_units(fragment.content))
            result = stream.result()
        except lmstudio.LMStudioError as error:
            raise BackendRuntimeError(
                f"LM Studio at {self._host} failed the {request.arm.label} arm: {one_line(error)}"
            ) from None
        self._format = str(result.model_info.format)
        stats = result.stats
        # LM Studio's own counts; a request for which it names no draft model and counts no drafts drafted nothing.
        drafted = int(stats.total_draft_tokens_count or 0)
        if speculative:
            self._sd_requests[drafted > 0] += 1
            self._used_keys.add(str(stats.used_draft_model_key or "none"))
        return GenerationStats(
            prompt_tokens=int(stats.prompt_tokens_count or 0),
            drafted=drafted,
            accepted=int(stats.accepted_draft_tokens_count or 0),
            generated_tokens=None if stats.predicted_tokens_count is None else int(stats.predicted_tokens_count),
            output_units="character",
        )

    def streams_refusal(self, streams: int) -> str | None:
        """No concurrency axis: one prediction at a time, each with its own counts."""
        return (
            "the lmstudio backend sends one prediction at a time (LM Studio's draft counts are per prediction) — "
            "measure concurrency on llama-server"
        )

    def close(self) -> None:
        """Leave the client (LM Studio keeps the models loaded)."""
        self._stack.close()
