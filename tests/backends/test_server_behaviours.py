"""Ollama and MTPLX: the backend chooses an A/B form that really toggles SD, or refuses it.

The stand-ins follow the upstream servers' source (each behaviour cites its file in
:mod:`pytest_specdec.backends.ollama.standin` and :mod:`pytest_specdec.backends.mtplx.standin`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from generations import generated

pytest.importorskip("llama_cpp", reason="the stand-ins generate with llama-cpp-python (extra [llama-cpp])")
pytest.importorskip("ollama", reason="the Ollama backend needs the ollama client (extra [ollama])")

from pytest_specdec.backends.base import Arm, Backend, GenerationRequest, GenerationStats, ModelPair
from pytest_specdec.backends.mtplx.adapter import MtplxBackend
from pytest_specdec.backends.mtplx.standin import MtplxHandler
from pytest_specdec.backends.ollama.adapter import OllamaBackend
from pytest_specdec.backends.ollama.standin import OllamaHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import BackendRuntimeError, ModelLoadError, SpecdecUsageError

PROMPT = "Copy this sentence exactly: the ferry leaves the north pier at seven."


@pytest.fixture
def serve(engine: GenerationEngine) -> Iterator[object]:
    started: list[StandinServer] = []

    def start(handler: type, **settings: str) -> StandinServer:
        server = StandinServer(handler, engine, settings=settings).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def ollama(server: StandinServer, tag: str, **options: str) -> OllamaBackend:
    return OllamaBackend(ModelPair(tag), {"host": server.url, **options})


def run(backend: Backend, arm: Arm) -> tuple[tuple[int, ...], GenerationStats]:
    return generated(backend, GenerationRequest(PROMPT, arm, 10, seed=1))


SD = Arm("sd", True, 3)


@pytest.mark.parametrize(
    ("version", "tag", "message"),
    [
        ("0.29.3", "specdec-synthetic:mtp", "predates draft_num_predict"),
        ("0.32.4", "specdec-synthetic:latest", "has no MTP layers and no DRAFT"),
        ("0.32.4", "specdec-synthetic:draft", "MLX engine, which never reads draft_num_predict"),
    ],
)
def test_the_option_form_is_refused_where_it_cannot_toggle_sd(serve, version: str, tag: str, message: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler, version=version)
    with pytest.raises(SpecdecUsageError, match=message) as caught:
        ollama(server, tag)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("tag", ["specdec-synthetic:mtp", "specdec-synthetic:gguf-draft"])
def test_the_option_form_is_chosen_on_gguf_with_mtp_layers_or_a_draft(serve, tag: str) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler)
    backend = ollama(server, tag)
    evidence = backend.speculation_evidence()
    assert (evidence.sd_arm, evidence.plain_arm) == (True, False)
    assert "Ollama 0.32.4, GGUF with" in evidence.reason
    plain_units, plain = run(backend, Arm("plain"))
    sd_units, sd = run(backend, SD)
    again, plain_again = run(backend, Arm("plain"))
    backend.close()
    assert plain_units == sd_units == again
    sent = [body["options"]["draft_num_predict"] for _, path, body in server.requests if path == "/api/generate"]
    assert sent == [0, 3, 0]
    # draft_num_predict is a load-time runner option: each switch reloads, and the load is reported apart.
    assert plain.load_seconds == 0
    assert sd.load_seconds == plain_again.load_seconds == 1.5
    assert sd.output_units == "character"


def test_two_tags_on_the_mlx_engine_leave_engagement_to_the_probe(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler)
    backend = ollama(server, "specdec-synthetic:draft", sd="tag", plain_model="specdec-synthetic:plain")
    evidence = backend.speculation_evidence()
    backend.close()
    assert (evidence.sd_arm, evidence.plain_arm) == (None, None), "an MLX drafter shows in no API field"
    with pytest.raises(SpecdecUsageError, match="compares specdec-synthetic:draft with itself"):
        ollama(server, "specdec-synthetic:draft", sd="tag", plain_model="specdec-synthetic:draft")


def test_a_thinking_model_is_asked_not_to_think_and_its_text_counts(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler)
    backend = ollama(server, "specdec-synthetic:think")
    units, _ = run(backend, Arm("plain"))
    backend.close()
    (body,) = [body for _, path, body in server.requests if path == "/api/generate"]
    assert body["think"] is False
    assert units, "the answer arrives in 'response' once thinking is off"


def test_an_error_after_the_first_bytes_is_reported_as_what_it_is(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler)
    backend = ollama(server, "specdec-synthetic:mtp")
    server.faults.add("midstream")
    with pytest.raises(
        BackendRuntimeError, match=r"reported an error in the middle of its answer: llama runner"
    ) as caught:
        run(backend, SD)
    backend.close()
    assert "HTTP -1" not in str(caught.value)


def test_flash_attention_off_vs_on_is_refused_on_the_mlx_engine(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    server = serve(OllamaHandler)
    from pytest_specdec.backends.ollama import adapter as ollama_module

    class Running:  # a managed server already up: the stand-in
        host = server.url

        def __init__(self, environment: dict[str, str]) -> None:
            self.environment = environment

        def start(self) -> Running:
            return self

        def stop(self) -> None:
            pass

    monkeypatch.setattr(ollama_module, "ManagedOllama", Running)
    with pytest.raises(SpecdecUsageError, match="ignores OLLAMA_FLASH_ATTENTION"):
        ollama(
            server,
            "specdec-synthetic:draft",
            sd="tag",
            plain_model="specdec-synthetic:plain",
            serve="true",
            serve_env="OLLAMA_FLASH_ATTENTION=0",
        )


def test_mtplx_sends_the_control_header_and_reports_its_release(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(MtplxHandler, client_controls="hints")
    backend = MtplxBackend(ModelPair("ignored"), {"url": server.url})
    _, plain = run(backend, Arm("plain"))
    _, sd = run(backend, SD)
    fingerprint = backend.fingerprint()
    backend.close()
    assert plain.drafted == 0
    assert sd.drafted is not None
    assert sd.drafted > 0
    assert fingerprint.release.startswith("mtplx ")
    assert "standin" not in fingerprint.release, "/health carries no MTPLX version"


def test_mtplx_that_ignores_the_requested_mode_fails_in_one_line(serve, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from pytest_specdec.backends.mtplx import adapter as mtplx_module

    monkeypatch.setattr(mtplx_module, "CONTROL_HEADER", {})  # a client that does not opt in
    server = serve(MtplxHandler, client_controls="hints")
    backend = MtplxBackend(ModelPair("ignored"), {"url": server.url})
    with pytest.raises(BackendRuntimeError, match=r"ran generation_mode 'mtp' for the plain arm, not 'ar'"):
        run(backend, Arm("plain"))
    backend.close()


def test_mtplx_without_mtp_heads_is_refused(serve) -> None:  # type: ignore[no-untyped-def]
    server = serve(MtplxHandler, mtp_enabled="false")
    with pytest.raises(ModelLoadError, match=r"no MTP heads loaded \(mtp_enabled: false\)"):
        MtplxBackend(ModelPair("ignored"), {"url": server.url})


def test_two_tags_with_one_digest_are_one_model_and_refused(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``ollama cp draft plain`` makes a second name for the same manifest: the arms could not differ."""
    original = OllamaHandler._model

    def copied(self, tag):  # type: ignore[no-untyped-def]
        answer = original(self, tag)
        return {**answer, "digest": original(self, "specdec-synthetic:draft")["digest"]}

    monkeypatch.setattr(OllamaHandler, "_model", copied)
    server = serve(OllamaHandler)
    with pytest.raises(SpecdecUsageError, match="have the same digest: they are one model under two names"):
        ollama(server, "specdec-synthetic:draft", sd="tag", plain_model="specdec-synthetic:plain")
