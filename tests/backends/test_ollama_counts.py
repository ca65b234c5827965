"""Ollama's MLX engine counts its drafts in the server's log (v0.32.6+): read where the plugin started the server.

The stand-in writes the line as upstream's ``x/mlxrunner/speculate_stats.go`` does (``standin.stats_line``); the
reader is tested against that line and against upstream's format with every field, and through a managed server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from generations import generated

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.ollama.adapter import OllamaBackend
from pytest_specdec.backends.ollama.speculate_log import speculation_counts
from pytest_specdec.backends.ollama.standin import OllamaHandler, stats_line
from pytest_specdec.backends.standin.engine import EngineStats, GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer

UPSTREAM = (  # every field speculate_stats.go:62 writes, in its order, as slog's text handler quotes them
    'time=2026-08-04T10:11:12.345-07:00 level=INFO source=speculate_stats.go:62 msg="speculative decode stats" '
    "iterations=120 drafted=310 accepted=255 acceptance=0.82 avg_draft=2.58 max_draft=5 avg_accepted=2.12 "
    'depth_over_time="0.0/0 1.9/3 3.0/4 3.1/5"'
)
SD_TAG = {"serve": "true", "sd": "tag", "plain_model": "specdec-synthetic:plain"}


def generate(backend: OllamaBackend, arm: Arm) -> object:
    return generated(backend, GenerationRequest("one two three four five six", arm, 12, seed=7))[1]


def test_the_reader_reads_upstreams_line_and_the_standins() -> None:
    assert speculation_counts(UPSTREAM) == [(310, 255)]
    stats = EngineStats(prompt_tokens=6, prompt_s=0.01, decode_tokens=12, decode_s=0.1, drafted=9, accepted=7)
    line = stats_line(stats, 3)
    log = f'time=x level=INFO msg="starting runner"\n{line}\n{UPSTREAM}'
    assert speculation_counts(log) == [(9, 7), (310, 255)]
    assert 'level=INFO source=speculate_stats.go:62 msg="speculative decode stats" iterations=' in line
    debug = 'level=DEBUG source=speculate_stats.go:84 msg="speculation depth controller" cost=1.2 acceptance=0.8'
    assert speculation_counts(debug) == []


@pytest.mark.usefixtures("fake_ollama_on_path", "engine")
def test_a_managed_servers_logged_counts_are_the_sd_arms_drafts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_TEST_OLLAMA_VERSION", "0.32.6")
    backend = OllamaBackend(ModelPair("specdec-synthetic:draft"), SD_TAG)
    try:
        for _ in range(3):  # the engine's depth starts cold (0) and deepens per request
            sd = generate(backend, Arm("sd", True, 3))
        plain = generate(backend, Arm("plain"))
        log = backend._server.log_text() if backend._server else ""
    finally:
        backend.close()
    *_, (drafted, accepted) = speculation_counts(log)
    assert (sd.drafted, sd.accepted) == (drafted, accepted)  # type: ignore[attr-defined]
    assert drafted > 0
    assert plain.drafted is None, "the plain tag has no drafter: no line, nothing claimed"  # type: ignore[attr-defined]


@pytest.mark.usefixtures("fake_ollama_on_path", "engine")
def test_before_0_32_6_the_line_is_debug_and_nothing_is_claimed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_TEST_OLLAMA_VERSION", "0.32.5")
    backend = OllamaBackend(ModelPair("specdec-synthetic:draft"), SD_TAG)
    try:
        sd = generate(backend, Arm("sd", True, 3))
    finally:
        backend.close()
    assert sd.drafted is None  # type: ignore[attr-defined]


@pytest.fixture
def recorded(engine: GenerationEngine) -> Iterator[StandinServer]:
    server = StandinServer(OllamaHandler, engine, settings={"version": "0.32.6"}).start()
    yield server
    server.stop()


def test_no_request_asks_for_logprobs_which_turns_drafting_off(recorded: StandinServer) -> None:
    backend = OllamaBackend(ModelPair("specdec-synthetic:draft"),
                            {"host": recorded.url, "sd": "tag", "plain_model": "specdec-synthetic:plain"})  # fmt: skip
    try:
        generate(backend, Arm("sd", True, 3))
        generate(backend, Arm("plain"))
    finally:
        backend.close()
    bodies = [body for _, path, body in recorded.requests if path == "/api/generate"]
    assert len(bodies) == 2
    assert not [body for body in bodies if body.get("logprobs") or body.get("top_logprobs")]
