"""llama.cpp's ``llama-server``: one server process per arm (the document's "llama.cpp MTP" row).

Speculation is a property of the server **process**: current llama.cpp compiles the
per-request ``speculative.*`` fields out (``tools/server/server-schema.cpp``, ``#if 0``),
so a request cannot switch SD off. The plain arm therefore runs on a server started
with ``--spec-type none`` and the SD arm on one started with the configured spec type
(``ngram-simple`` prompt lookup by default, ``draft-simple`` with a draft GGUF, or e.g.
``draft-mtp``) and γ on the flag that spec type reads
(:mod:`~pytest_specdec.backends.llama_server.knobs`: ``--spec-draft-n-max`` for the
``draft-*`` types, ``--spec-ngram-simple-size-m`` for ``ngram-simple``, ...). Two ways to
get them:

* **managed** (default): the plugin starts both on free loopback ports
  (:class:`~pytest_specdec.backends.server_process.ServerProcess`), waits for
  ``/health``, and stops them at the end. When two copies of the model do not fit in
  memory, one server is restarted per arm switch instead (pairs alternate their
  order, so a switch comes once per pair) and a warm-up generation after each restart
  is discarded; the fingerprint says so.
* **connected**: two servers the user started, ``plain_url=`` and ``sd_url=``.

The binary and its release: :mod:`~pytest_specdec.backends.llama_server.binary`. A γ sweep
keeps one SD server at a time (the previous γ's is stopped first); the user's own SD
server runs the γ it was started with (``sd_num_draft=``, llama-server's default 3),
and any other γ is refused rather than reported as measured.

**Several clients at once** (the concurrency axis, backend option ``parallel=N``): each managed server
starts with ``-np N`` slots, each slot holding the ``-c`` one stream needs (``-c`` is N times it:
with explicit slots llama.cpp splits ``-c`` between them); how many slots each server runs is read
back from its ``GET /slots`` into the fingerprint. Servers the user started serve the slots they were
started with, so they refuse it.

**Engaged both ways**: the SD arm must report ``timings.draft_n > 0`` (checked by the
protocol); a plain arm that drafts fails at once with the flag to fix. Whether each
server speculates at all is read from its ``GET /slots`` (each slot's ``speculative``,
``can_speculate()`` in ``tools/server/server-context.cpp``): a server whose draft set-up
failed carries on without SD ("failed to initialize speculative decoding context"), and
that is told apart from an arm that found nothing to draft. (``generation_settings``'s
``speculative.types`` is the configuration copied from start-up, ``server-task.cpp``,
so it is not read for this.) Whether the
server honours per-request speculative fields (older builds did) is probed once per SD
server and recorded in the fingerprint.
"""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pytest_specdec.axes.concurrency import MAX_STREAMS
from pytest_specdec.backends.base import (
    Arm,
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    SpeculationEvidence,
    TokenBurst,
)
from pytest_specdec.backends.context import gguf_file_metadata
from pytest_specdec.backends.files import resolve_gguf
from pytest_specdec.backends.http_client import HttpService, text_units
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.llama_server.binary import check_spec_type, find_binary, server_release
from pytest_specdec.backends.llama_server.command import (
    NO_SPECULATION,
    ArmServer,
    plain_flags,
    server_threads,
    threads_said,
    upstream_lengths,
)
from pytest_specdec.backends.llama_server.knobs import draft_length, kind_of, sampling_fields
from pytest_specdec.backends.llama_server.observed import draft_rounds, said_by_servers, slot_count, slots_speculate
from pytest_specdec.backends.llama_server.queries import PlainServerQueries
from pytest_specdec.backends.server_process import ServerProcess
from pytest_specdec.embedded.prompts import ChatMessage
from pytest_specdec.errors import (
    BackendRuntimeError,
    BackendUnavailable,
    ModelLoadError,
    PlainArmSpeculates,
    SpecdecUsageError,
    TemplateRefused,
)


class LlamaServerBackend(PlainServerQueries):
    """Plain and SD arms on llama-server processes of their own."""

    name: ClassVar[str] = "llama-server"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        plain_url, sd_url = reader.text("plain_url", ""), reader.text("sd_url", "")
        single_url = reader.text("url", "")
        self._spec_type = reader.text("spec_type", "draft-simple" if pair.draft else "ngram-simple")
        binary = reader.text("binary", "")
        self._threads, self._threads_batch, self._threads_from = server_threads(reader, options)
        self._threads_seen: dict[ArmServer, str] = {}  # what each server's log says it runs with
        self._ctx = reader.integer("ctx", 2048, low=64, high=1 << 20)
        self._ctx_set = "ctx" in options  # unset: grown for a long-context comparison (PlainServerQueries)
        self._ctx_before_growth: int | None = None
        self._started_since_growth: set[bool] = set()
        self._timeout_s = reader.number("timeout", 600.0, low=0.1, high=86_400)
        self._stream = reader.flag("stream", True)
        restart = reader.text("restart", "auto")
        self._connected_gamma = reader.integer("sd_num_draft", 3, low=1, high=64)
        self._parallel = reader.integer("parallel", 1, low=1, high=MAX_STREAMS)
        self._tuned = reader.flag("tuned", False)  # γ on an n-gram type's lengths instead of upstream's defaults
        reader.reject_unknown()
        if single_url:
            raise SpecdecUsageError(
                "one llama-server cannot switch SD per request (current builds ignore the speculative.* request "
                "fields): give two servers, plain_url=... (started with --spec-type none) and sd_url=..., "
                "or let the plugin start them (drop url=)"
            )
        if self._spec_type == NO_SPECULATION:
            raise SpecdecUsageError(
                "spec_type=none leaves no SD arm — choose e.g. ngram-simple, draft-simple, draft-mtp"
            )
        if restart not in ("auto", "yes", "no"):
            raise SpecdecUsageError(f"restart={restart!r} must be auto, yes or no")
        self._requested = pair
        self._servers: dict[ArmServer, ServerProcess] = {}
        self._services: dict[ArmServer, HttpService] = {}
        self._bookkeeping()
        self._connected = bool(plain_url or sd_url)
        self._restarted = 0
        if self._connected:
            if not (plain_url and sd_url):
                raise SpecdecUsageError("give both plain_url= and sd_url= (one llama-server per arm)")
            self._binary, self._release, self._version_line = None, "", ""
            self._model: Path | None = None
            self._draft: Path | None = None
            self._one_at_a_time = False
            self._attach(ArmServer(NO_SPECULATION), plain_url)
            self._attach(ArmServer(self._spec_type), sd_url)
            props = self._services[ArmServer(NO_SPECULATION)].get("/props")
            self._release = f"llama.cpp {props.get('build_info') or 'unknown build'}"
        else:
            self._binary = find_binary(binary)
            self._release, self._version_line = server_release(self._binary)
            check_spec_type(self._binary, self._spec_type)
            self._model = resolve_gguf(pair.target)
            self._draft = resolve_gguf(pair.draft) if pair.draft else None
            self._one_at_a_time = restart == "yes" or (restart == "auto" and not self._both_fit())
            self._service(ArmServer(NO_SPECULATION))  # a bad model or binary is a load-time error
        self._pair = ModelPair(str(self._model or pair.target), str(self._draft) if self._draft else pair.draft)

    # -- servers -------------------------------------------------------------------------

    def _bookkeeping(self) -> None:
        """What the servers said and how they were asked, per arm."""
        self._honours_request_fields: dict[ArmServer, bool] = {}
        self._draft_lengths: dict[ArmServer, str] = {}
        self._draft_rounds: dict[ArmServer, tuple[int, int]] = {}
        self._slots: dict[ArmServer, int] = {}  # slots each server says it runs (GET /slots)
        self._starting = threading.Lock()  # several streams at once: one thread starts a server, the rest wait

    def _both_fit(self) -> bool:
        """Whether the plain and the SD server fit in memory together (weights twice, plus the draft)."""
        from pytest_specdec.hardware import machine_profile

        assert self._model is not None
        needed = 2 * self._model.stat().st_size + (self._draft.stat().st_size if self._draft else 0)
        return needed * 1.2 < machine_profile().usable_bytes  # 20 % for KV caches and compute buffers

    def _arguments(self, arm: ArmServer, port: int) -> list[str]:
        assert self._binary is not None
        assert self._model is not None
        command = [str(self._binary), "-m", str(self._model), "--host", "127.0.0.1", "--port", str(port)]
        command += ["-c", str(self._ctx * self._parallel), "-np", str(self._parallel), "--no-webui"]
        if arm.spec_type == NO_SPECULATION:
            command += plain_flags(self._binary)
        else:
            # --metrics: spec_decode_num_drafts_total gives the length each draft really had
            command += ["--spec-type", arm.spec_type, *draft_length(arm.spec_type, arm.num_draft, self._model).flags]
            command += ["--metrics"]
            if self._draft is not None:
                command += ["--spec-draft-model", str(self._draft)]
        command += ["--threads", str(self._threads), "--threads-batch", str(self._threads_batch)]
        return command

    def _attach(self, arm: ArmServer, url: str) -> HttpService:
        service = HttpService(
            "llama-server", url, self._timeout_s, "start it, or let the plugin start it (drop plain_url/sd_url)"
        )
        try:
            health = service.get("/health")
        except BackendRuntimeError as error:
            service.close()
            raise ModelLoadError(str(error)) from None
        if health.get("status") not in (None, "ok"):
            service.close()
            raise ModelLoadError(f"llama-server at {url} is not ready: {health} — wait for the model to load")
        self._services[arm] = service
        return service

    def _service(self, arm: ArmServer) -> HttpService:
        if self._connected:
            if arm.spec_type != NO_SPECULATION and arm.num_draft not in (0, self._connected_gamma):
                raise SpecdecUsageError(
                    f"the SD server at sd_url drafts γ={self._connected_gamma} (sd_num_draft), not γ={arm.num_draft}: "
                    "start one with --spec-draft-n-max matching, set sd_num_draft=, or let the plugin start them"
                )
            known = ArmServer(NO_SPECULATION) if arm.spec_type == NO_SPECULATION else ArmServer(self._spec_type)
            return self._services[known]
        if arm not in self._services:
            speculative = arm.spec_type != NO_SPECULATION
            # a γ this spec type would not draft is refused before any server stops or starts
            drafts = draft_length(arm.spec_type, arm.num_draft, self._model).note if speculative else ""
            if self._one_at_a_time:
                self._stop_all()
            elif speculative:  # a γ sweep: the previous γ's SD server makes way
                self._stop(lambda other: other.spec_type != NO_SPECULATION)
            server = ServerProcess(
                f"llama-server-{arm.label.replace(' ', '-')}", lambda port: self._arguments(arm, port)
            )
            try:
                server.start()
            except BackendUnavailable as error:
                self._no_grown_context(error, speculative)
                raise ModelLoadError(f"{error} — check the model path and the server flags") from None
            self._restarted += self._one_at_a_time  # counted once the server runs: what the fingerprint reports
            if speculative:
                self._draft_lengths[arm] = drafts
            if self._ctx_before_growth is not None:
                self._started_at_grown_context(speculative)
            self._servers[arm] = server
            self._services[arm] = HttpService(
                "llama-server", server.base_url, self._timeout_s, "it stopped: see its log"
            )
            self._slots[arm] = slot_count(self._services[arm])
            self._threads_seen[arm] = threads_said(server.log_text())
        return self._services[arm]

    def _stop_all(self) -> None:
        self._stop(lambda _: True)

    def _stop(self, which: Callable[[ArmServer], bool]) -> None:
        """Close and stop the chosen arms' servers, every one of them even if one fails to stop."""
        chosen = [arm for arm in self._services if which(arm)]
        for arm in chosen:
            self._read_drafts(arm)
        try:
            for arm in chosen:
                self._services.pop(arm).close()
        finally:
            for arm in chosen:
                server = self._servers.pop(arm, None)
                if server is not None:
                    with contextlib.suppress(OSError, subprocess.SubprocessError):
                        server.stop()

    def _arm_server(self, arm: Arm, spec_type: str) -> ArmServer:
        if not arm.speculative:
            return ArmServer(NO_SPECULATION)
        return ArmServer(spec_type, 0 if self.adapts_draft_length() else arm.num_draft)  # 0: upstream's lengths

    # -- the Backend protocol ------------------------------------------------------------

    @property
    def pair(self) -> ModelPair:
        """The GGUF files the servers run (or what the user's servers serve)."""
        return self._pair

    def speculation_kind(self) -> SpeculationKind:
        """What the SD arm's ``--spec-type`` drafts with."""
        return kind_of(self._spec_type)

    def adapts_draft_length(self) -> bool:
        """An n-gram type at upstream's defaults picks each draft's length itself (``tuned=true``: γ sets them)."""
        return upstream_lengths(self._spec_type) and not self._tuned and not self._connected

    def fingerprint(self) -> Fingerprint:
        """The server build, how the arms are served, and what the SD server does with request fields."""
        details = {
            "servers": "connected (plain_url, sd_url)" if self._connected else "managed, one per arm",
            "spec_type": "as started by the user" if self._connected else self._spec_type,
            "plain_flags": "--spec-type none" if self._connected else " ".join(plain_flags(self._binary)),
        }
        if not self._connected:
            details["n_ctx"] = str(self._ctx)  # the -c the servers run with now: grown by an earlier long context too
        details["threads_from"] = self._threads_from
        for arm, seen in self._threads_seen.items():
            details[f"threads[{arm.label}]"] = seen  # as the server's own system_info line says
        for arm, slots in self._slots.items():
            details[f"slots[{arm.label}]"] = str(slots)  # as the server says (GET /slots), 0 where it does not
        if self._one_at_a_time:
            details["servers"] = "managed, one at a time: restarted per arm switch (two copies do not fit in memory)"
            details["restarts"] = str(self._restarted)
        if self._version_line:
            details["version"] = self._version_line
        for arm, honoured in self._honours_request_fields.items():
            details[f"request_fields_honoured[{arm.label}]"] = str(honoured).lower()
        for arm in list(self._services):
            self._read_drafts(arm)
        for arm, note in self._draft_lengths.items():
            tokens, drafts = self._draft_rounds.get(arm, (0, 0))
            seen = f"; drafts averaged {tokens / drafts:.1f} tokens ({tokens} in {drafts}, /metrics)" if drafts else ""
            details[f"draft_length[{arm.label}]"] = note + seen
        return Fingerprint(
            backend=self.name,
            release=self._release,
            versions={"llama.cpp": self._release.split(" ", 1)[-1]},
            device="cpu/gpu as the server chose" if not self._connected else "user-started servers",
            details=details,
        )

    def model_digest(self) -> str:
        """SHA-256 of the GGUF files (the first 16 hex digits); the served paths for connected servers."""
        from pytest_specdec.backends.files import files_digest

        if self._model is None:
            return hashlib.sha256(str(self._pair).encode()).hexdigest()[:16]
        return files_digest([p for p in (self._model, self._draft) if p is not None])

    def weight_bytes(self) -> int:
        """Size of the target GGUF (what one decode step reads, for the roofline)."""
        return self._model.stat().st_size if self._model is not None else 0

    def _body(self, request: GenerationRequest) -> dict[str, Any]:
        return {
            "prompt": request.prompt,
            "n_predict": request.max_tokens,
            **sampling_fields(request.sampling),
            "seed": request.seed,
            "ignore_eos": True,
            "cache_prompt": False,
            "return_tokens": True,
            "stream": self._stream,
        }

    def sampled_draws_per_seed(self) -> str:
        """``same`` on servers this backend starts: their drafters draft greedily (no ``--spec-draft-sampling``),
        the slot's seeded ``dist`` sampler draws once per emitted token and a draft token stands only where it
        equals that draw (server-context.cpp → common_sampler_sample_and_accept_n in common/sampling.cpp); a
        server the user started may sample its drafts (rejection sampling), so there only the distribution holds."""
        return "distribution" if self._connected else "same"

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """One completion on the arm's own server; ``timings`` give decode time and drafts."""
        arm = self._arm_server(request.arm, self._spec_type)
        with self._starting:  # a server is started, warmed and probed once, whatever the streams at once
            restarts = self._restarted
            service = self._service(arm)
            if self._one_at_a_time and self._restarted != restarts:
                self._drain(service, request)  # the first generation after a restart warms the new process
            if arm.spec_type != NO_SPECULATION and arm not in self._honours_request_fields:
                self._honours_request_fields[arm] = self._probe_request_fields(service, request)
        final = yield from self._completion(service, request)
        timings = final["timings"]
        drafted = int(timings.get("draft_n", 0) or 0)
        if arm.spec_type == NO_SPECULATION and drafted > 0:
            said = f"the plain arm now speculates: draft_n={drafted} on {service.base_url}"
            if self._connected:
                raise PlainArmSpeculates(f"{said} — start that server with --spec-type none")
            raise PlainArmSpeculates(
                f"{said}, started with {' '.join(plain_flags(self._binary))} — this llama-server ({self._release}) "
                "drafts anyway: not a comparison of SD against plain decoding; find the flag its --help gives to "
                "turn speculation off"
            )
        speculative = request.arm.speculative
        return GenerationStats(
            prompt_tokens=int(timings.get("prompt_n", 0)),
            drafted=drafted if speculative else 0,
            accepted=int(timings.get("draft_n_accepted", 0) or 0) if speculative else 0,
            server_decode_seconds=float(timings["predicted_ms"]) / 1000.0,
            server_decode_tokens=int(timings["predicted_n"]),
            # The server's own prefill time: the client's clock would count a restart or a probe before it.
            server_ttft_seconds=float(timings["prompt_ms"]) / 1000.0 if "prompt_ms" in timings else None,
        )

    def _completion(
        self, service: HttpService, request: GenerationRequest
    ) -> Generator[TokenBurst, None, dict[str, Any]]:
        final: dict[str, Any] | None = None
        try:
            for event in service.events("/completion", self._body(request), stream=self._stream):
                tokens = event.get("tokens")
                ids = (
                    tuple(int(t) for t in tokens)
                    if isinstance(tokens, list)
                    else text_units(str(event.get("content", "")))
                )
                if ids:
                    yield TokenBurst(ids)
                if event.get("stop") or not self._stream:  # a whole response is its own final chunk
                    final = event
                    break
        except BackendRuntimeError as error:
            raise BackendRuntimeError(f"{error}{self._exit_note(service)}") from None
        if final is None:
            raise BackendRuntimeError(
                f"the stream from llama-server at {service.base_url} ended before its final chunk — no result kept"
            )
        timings = final.get("timings")
        if not isinstance(timings, dict) or "predicted_ms" not in timings or "predicted_n" not in timings:
            raise BackendRuntimeError(
                f"llama-server at {service.base_url} answered without 'timings' (predicted_ms, predicted_n) — "
                "is it llama.cpp's llama-server, and a build from 2024 or later?"
            )
        return final

    def _exit_note(self, service: HttpService) -> str:
        for arm, server in self._servers.items():
            if self._services.get(arm) is service and not server.running:
                return f" (the {arm.label} server exited: {server.last_log_line() or 'no log line'})"
        return ""

    def _drain(self, service: HttpService, request: GenerationRequest) -> None:
        for _ in self._completion(service, request):
            pass

    def speculation_evidence(self) -> SpeculationEvidence:
        """Each arm's server's own word (``GET /slots``): does it speculate at all?"""
        sd = [arm for arm in self._services if arm.spec_type != NO_SPECULATION]
        plain = ArmServer(NO_SPECULATION)
        return said_by_servers(
            sd[-1].label if sd else "SD",
            slots_speculate(self._services[sd[-1]]) if sd else None,
            slots_speculate(self._services[plain]) if plain in self._services else None,
            self._servers.get(sd[-1]) if sd else None,
            self._draft_lengths.get(sd[-1], "") if sd else "",
        )

    def _read_drafts(self, arm: ArmServer) -> None:
        """Draft tokens and drafts so far, from a managed SD server's ``/metrics``."""
        if arm.spec_type != NO_SPECULATION and arm in self._servers:
            found = draft_rounds(self._services[arm])
            if found is not None:
                self._draft_rounds[arm] = found

    def _probe_request_fields(self, service: HttpService, request: GenerationRequest) -> bool:
        """Does this server drop SD when a request sends ``speculative.n_max: 0``? (Older builds did.)"""
        body = {**self._body(request), "stream": False, "n_predict": 16, "speculative.n_max": 0, "speculative.n_min": 0}
        timings = service.post("/completion", body).get("timings") or {}
        return int(timings.get("draft_n", 0) or 0) == 0

    def is_base_model(self) -> bool:
        """No chat template in the GGUF (managed) or in ``/props`` (the user's servers); synthetic pairs excepted."""
        from pytest_specdec.embedded import models

        return not models.is_embedded(self._requested.target) and not self._has_template()

    def _has_template(self) -> bool:
        if self._model is not None:
            return "tokenizer.chat_template" in gguf_file_metadata(self._model)
        return bool(self._plain_service().get("/props").get("chat_template"))

    def chat_text(self, messages: Sequence[ChatMessage]) -> str | None:
        """The server's own ``POST /apply-template`` (its chat endpoint's template, from the GGUF or ``--chat-template``);
        ``None`` for a managed server's GGUF with no template of its own (the server would fall back to ChatML; we do
        not guess). A server you started answers ``/props`` with the template it uses, its ChatML fallback included."""
        if not self._has_template():
            return None
        body = {"messages": [message._asdict() for message in messages]}
        try:
            return str(self._plain_service().post("/apply-template", body)["prompt"])
        except BackendRuntimeError as error:  # the template's own raise_exception answers an HTTP error
            raise TemplateRefused(
                f"{self._requested.target}'s chat template refused the conversation: {error}"
            ) from None

    def _plain_service(self) -> HttpService:
        return self._service(ArmServer(NO_SPECULATION))

    def streams_refusal(self, streams: int) -> str | None:
        """Managed servers are started with the slots asked for; the user's serve the slots they were started with."""
        if self._connected:
            return (
                "servers the user started (plain_url, sd_url) serve the slots they were started with — let the "
                "plugin start them (drop plain_url/sd_url) to measure several streams at once"
            )
        return None

    def close(self) -> None:
        """Stop managed servers; close connections to the user's."""
        self._stop_all()
