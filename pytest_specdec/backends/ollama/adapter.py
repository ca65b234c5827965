"""Ollama through the official ``ollama`` client: built-in speculative decoding.

Two ways to form the A/B pair (backend option ``sd``), each accepted only where the
server's own answers say it really toggles SD (:mod:`~pytest_specdec.backends.ollama.model`):

* ``sd=option`` (default) — one tag; the SD arm sends ``options.draft_num_predict = γ``,
  the plain arm ``0``. Only on Ollama ≥ 0.30.0 and a GGUF tag with MTP layers or a
  DRAFT. It is a load-time runner option: switching it reloads the runner
  (``load_duration``), which is excluded from decode and first-token timing and
  reported.
* ``sd=tag`` — two tags: ``--specdec-model`` has the drafter and ``plain_model=TAG``
  the same weights without it (the MLX engine drafts whenever a drafter ships).

Decode rate is ``eval_count / eval_duration`` (nanoseconds); time to first token is
``prompt_eval_duration`` (the stream's clock would include a reload). Thinking models
get ``think: false`` (Ollama turns thinking on by default, ``server/routes.go``), and
text arriving in ``thinking`` still counts as output. Ollama's API exposes no token
ids and no acceptance counts: the output check compares characters, and SD being live
is judged from the static evidence and the engagement probe (:mod:`pytest_specdec.analysis`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

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
from pytest_specdec.backends.http_client import checked_url, deadline_transport, text_units
from pytest_specdec.backends.ollama.model import (
    DRAFT_NUM_PREDICT_DEFAULT,
    OllamaModel,
    describe_model,
    option_evidence,
    parse_version,
    refuse_flash_attention_on_mlx,
    tag_evidence,
)
from pytest_specdec.backends.ollama.serve import ManagedOllama, parse_environment
from pytest_specdec.backends.ollama.speculate_log import INFO_SINCE, speculation_counts
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError, SpecdecUsageError

DEFAULT_HOST = "http://127.0.0.1:11434"
LOG_WAIT_S = 2.0  # how long an SD request waits for its stats line after the last chunk


def full_tag(model: str) -> str:
    """``qwen3-coder:30b`` stays; ``llama3`` becomes ``llama3:latest``."""
    return model if ":" in model.rsplit("/", 1)[-1] else model + ":latest"


class OllamaBackend:
    """One Ollama server and one or two tags."""

    name: ClassVar[str] = "ollama"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        host = reader.text("host", os.environ.get("OLLAMA_HOST", "") or DEFAULT_HOST)
        self._timeout = reader.number("timeout", 300.0, low=0.1, high=86_400)
        self._mode = reader.text("sd", "option")
        self._plain_tag = reader.text("plain_model", "")
        self._raw = reader.flag("raw", False)
        serve = reader.flag("serve", False)
        environment = parse_environment(reader.text("serve_env", ""))
        reader.reject_unknown()
        if self._mode not in ("option", "tag"):
            raise SpecdecUsageError(
                f"backend option sd={self._mode!r} must be option or tag — fix --specdec-backend-option sd="
            )
        if self._mode == "tag" and not self._plain_tag:
            raise SpecdecUsageError(
                "backend option sd=tag needs plain_model=TAG (the same weights without a draft head)"
            )
        self._server = ManagedOllama(environment).start() if serve else None
        self._host = (
            self._server.host if self._server else checked_url(host if "://" in host else f"http://{host}", "host")
        )
        import ollama

        # A total deadline per request: the client's own timeout is per read, which a dripping server defeats.
        self._client = ollama.Client(
            host=self._host, timeout=self._timeout, transport=deadline_transport(self._timeout)
        )
        self._tag = full_tag(pair.target)
        try:
            self._version = str(self._http_get("/api/version").get("version", "unknown"))
            self._digests = {m.model: m.digest for m in self._call(self._client.list).models if m.model}
            for tag in [self._tag, *([full_tag(self._plain_tag)] if self._mode == "tag" else [])]:
                if tag not in self._digests:
                    raise ModelLoadError(f"model {tag} is not on the server — run 'ollama pull {tag}'")
            self._show = self._call(self._client.show, self._tag)
            self._model = describe_model(self._tag, self._http_post("/api/show", {"model": self._tag}))
            refuse_flash_attention_on_mlx(self._model, environment)
            if self._mode == "option":
                self._evidence = option_evidence(self._version, self._model)
                self._plain_model: OllamaModel | None = None
            else:
                plain = full_tag(self._plain_tag)
                if plain != self._tag and self._digests[plain] == self._digests[self._tag]:
                    raise SpecdecUsageError(
                        f"{self._tag} and {plain} have the same digest: they are one model under two names, so the "
                        "arms cannot differ — make the plain twin from the same weights without the draft "
                        "(a Modelfile with the same FROM and no DRAFT), or use sd=option"
                    )
                self._plain_model = describe_model(plain, self._http_post("/api/show", {"model": plain}))
                self._evidence = tag_evidence(self._version, self._model, self._plain_model)
        except BackendRuntimeError as error:
            self.close()
            raise ModelLoadError(str(error)) from None
        except (ModelLoadError, SpecdecUsageError):
            self.close()
            raise
        draft = f"built-in draft head (vs {full_tag(self._plain_tag)})" if self._mode == "tag" else "draft_num_predict"
        self._pair = ModelPair(self._tag, draft)

    def default_num_draft(self) -> int | None:
        """On a GGUF tag with a DRAFT layer, the ``draft_num_predict`` a request that sets none gets (4); elsewhere
        none of its own (an MTP-only GGUF does not speculate unless asked, so any γ there is the user's)."""
        drafting = self._mode == "option" and self._model.gguf and self._model.draft_layer
        return DRAFT_NUM_PREDICT_DEFAULT if drafting else None

    def adapts_draft_length(self) -> bool:
        """The MLX engine sends no γ: its depth controller picks each round's depth from acceptance and cost.

        ``x/mlxrunner/speculate_depth.go`` (``depthController``: argmax of expected committed tokens
        per cost, probing deeper every few rounds); no request option reaches it and no API field
        reports it (``draft_num_predict`` is read only on the GGUF path, ``llm/llama_server.go``).
        """
        return not self._model.gguf

    def _unreachable(self) -> BackendRuntimeError:
        return BackendRuntimeError(
            f"cannot reach Ollama at {self._host} — start 'ollama serve' or set --specdec-ollama-host / OLLAMA_HOST"
        )

    def _translate(self, error: Exception) -> BackendRuntimeError:
        import httpx
        import ollama
        from pydantic import ValidationError

        if isinstance(error, ConnectionError | httpx.ConnectError):
            return self._unreachable()
        if isinstance(error, ollama.ResponseError):
            if error.status_code == -1:  # an {"error": ...} line after the first bytes, under HTTP 200
                return BackendRuntimeError(
                    f"Ollama at {self._host} reported an error in the middle of its answer: {error.error} "
                    "— no partial result was kept"
                )
            if error.status_code == 404 and "not found" in str(error.error):
                return BackendRuntimeError(f"model {self._tag} is not on the server — run 'ollama pull {self._tag}'")
            return BackendRuntimeError(f"Ollama at {self._host} answered HTTP {error.status_code}: {error.error}")
        if isinstance(error, httpx.TimeoutException):
            return BackendRuntimeError(
                f"Ollama at {self._host} did not answer within {self._timeout:g} s in all — raise "
                "--specdec-backend-option timeout=SECONDS"
            )
        if isinstance(error, httpx.RemoteProtocolError | httpx.ReadError):
            return BackendRuntimeError(
                f"the stream from Ollama at {self._host} was cut ({error}) — no partial result was kept"
            )
        if isinstance(error, ValueError | ValidationError):  # json.JSONDecodeError is a ValueError
            return BackendRuntimeError(f"Ollama at {self._host} sent malformed JSON ({str(error).splitlines()[0]})")
        return BackendRuntimeError(f"Ollama at {self._host}: {error}")

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except Exception as error:  # the client raises httpx, pydantic, json and its own errors
            raise self._translate(error) from None

    def _http_get(self, path: str) -> dict[str, Any]:
        """A GET the client has no method for (``/api/version``)."""
        return self._json(self._call(self._client._client.get, path), path)

    def _http_post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """A POST whose whole answer is needed (``/api/show`` with ``tensors``, which the client drops)."""
        return self._json(self._call(self._client._client.post, path, json=dict(body)), path)

    def _json(self, response: Any, path: str) -> dict[str, Any]:
        if response.status_code >= 400:
            raise BackendRuntimeError(f"Ollama at {self._host} answered HTTP {response.status_code} on {path}")
        parsed = self._call(response.json)
        return parsed if isinstance(parsed, dict) else {}

    def speculation_evidence(self) -> SpeculationEvidence:
        """What the server's answers say each arm can do (version, model format, MTP layers, DRAFT)."""
        return self._evidence

    @property
    def pair(self) -> ModelPair:
        """The tag and how its SD arm is formed."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """Server version, model details, digest, full GPU residency, managed environment."""
        details = self._show.details
        loaded = {m.model: m for m in self._call(self._client.ps).models}
        resident = loaded.get(self._tag)
        info = {
            "format": str(details.format if details else ""),
            "family": str(details.family if details else ""),
            "parameter_size": str(details.parameter_size if details else ""),
            "quantization_level": str(details.quantization_level if details else ""),
            "digest": str(self._digests.get(self._tag, "")),
            "fully_on_gpu": str(resident.size_vram == resident.size) if resident else "not loaded",
            "sd": self._mode,
            "drafter": self._model.drafter,
            "evidence": self._evidence.reason,
        }
        if self._server is not None:
            info.update({f"env.{k}": v for k, v in sorted(self._server.environment.items())})
        return Fingerprint(
            backend=self.name,
            release=f"ollama {self._version}",
            versions={"ollama": self._version},
            device=f"server: {self._host}",
            details=info,
        )

    def model_digest(self) -> str:
        """The tag's digest from ``/api/tags`` (and the plain tag's in two-tag mode)."""
        digests = [str(self._digests.get(self._tag, ""))[:16]]
        if self._mode == "tag":
            digests.append(str(self._digests.get(full_tag(self._plain_tag), ""))[:16])
        return "+".join(digests)

    def _stream(self, request: GenerationRequest) -> Iterator[Any]:
        speculative = request.arm.speculative
        options: dict[str, Any] = {
            "temperature": 0,
            "top_k": 1,
            "seed": request.seed,
            "num_predict": request.max_tokens,
        }
        described = self._model if speculative or self._plain_model is None else self._plain_model
        if described.gguf:  # the MLX engine never reads it; on GGUF it is the switch
            options["draft_num_predict"] = request.arm.num_draft if speculative else 0
        stream = self._call(
            self._client.generate,
            model=described.tag,
            prompt=request.prompt,
            options=options,
            stream=True,
            raw=self._raw,
            think=False if described.thinking else None,
        )
        while True:
            try:
                chunk = next(stream)
            except StopIteration:
                return
            except Exception as error:
                raise self._translate(error) from None
            yield chunk

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """One greedy generation; rates from ``eval_count`` / ``eval_duration``; drafts from the server's log
        where the plugin started it and its MLX engine logs them (``speculate_log.py``).

        No request carries ``logprobs``: the MLX engine turns drafting off for one that asks (``speculate.go``).
        """
        logged = len(self._server.log_text()) if self._server is not None else None
        final = None
        for chunk in self._stream(request):
            text = (getattr(chunk, "thinking", None) or "") + (chunk.response or "")
            if text:  # a model that thinks despite think=false still produces output
                yield TokenBurst(text_units(text))
            if chunk.done:
                final = chunk
                break
        if final is None:
            raise BackendRuntimeError(f"the stream from Ollama at {self._host} ended before 'done' — no result kept")
        if not final.eval_count or not final.eval_duration:
            raise BackendRuntimeError(
                f"Ollama at {self._host} answered without eval_count / eval_duration — is it a real Ollama server?"
            )
        counts = self._logged_counts(logged, request.arm.speculative)
        return GenerationStats(
            prompt_tokens=int(final.prompt_eval_count or 0),
            drafted=counts[0] if counts else None,
            accepted=counts[1] if counts else None,
            server_decode_seconds=final.eval_duration / 1e9,
            server_decode_tokens=int(final.eval_count),
            server_ttft_seconds=(final.prompt_eval_duration or 0) / 1e9,
            generated_tokens=int(final.eval_count),
            load_seconds=(final.load_duration or 0) / 1e9,
            output_units="character",
        )

    def _logged_counts(self, since: int | None, speculative: bool) -> tuple[int, int] | None:
        """This request's ``(drafted, accepted)`` from the managed server's log, or ``None`` where it logs none.

        The line is written when the runner's decoder closes, which may come just after the last chunk: an SD
        request on an engine that logs them waits for it briefly (polling the log, at most LOG_WAIT_S).
        """
        if since is None or self._server is None:
            return None
        logs = speculative and not self._model.gguf and (parse_version(self._version) or (0, 0, 0)) >= INFO_SINCE
        deadline = time.monotonic() + (LOG_WAIT_S if logs else 0.0)
        while True:
            found = speculation_counts(self._server.log_text()[since:])
            if found or time.monotonic() >= deadline:
                break
            time.sleep(0.02)  # polling a child's log file for a line it writes after the response
        if not found:
            return None
        return found[-1]  # requests are serial: a line before it can only be an earlier request's, written late

    def close(self) -> None:
        """Close the client and stop a managed server."""
        client = getattr(self, "_client", None)
        if client is not None:
            client._client.close()
        if self._server is not None:
            self._server.stop()
            self._server = None
