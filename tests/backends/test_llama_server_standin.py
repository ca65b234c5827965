"""The llama-server stand-in follows the bundled llama.cpp: which flag is γ, /slots, /props, draft_n."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend
from pytest_specdec.backends.llama_server.knobs import draft_length, mtp_heads
from pytest_specdec.backends.llama_server.standin import LlamaServerHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import SpecdecUsageError

PROMPT = "one two three four five six seven eight"


def run(backend: LlamaServerBackend, arm: Arm) -> tuple[tuple[int, ...], object]:
    stream = backend.generate(GenerationRequest(PROMPT, arm, 12, seed=7))
    units: list[int] = []
    while True:
        try:
            units.extend(next(stream).token_ids)
        except StopIteration as stop:
            return tuple(units), stop.value


@pytest.fixture
def start(engine: GenerationEngine) -> Iterator[Callable[..., StandinServer]]:
    started: list[StandinServer] = []

    def starting(**settings: str) -> StandinServer:
        server = StandinServer(LlamaServerHandler, engine, settings=settings).start()
        started.append(server)
        return server

    yield starting
    for server in started:
        server.stop()


def drafted(server: StandinServer) -> int:
    body = {"prompt": "one two three", "n_predict": 12, "stream": False, "seed": 0}
    timings = httpx.post(server.url + "/completion", json=body, timeout=30).json()["timings"]
    return int(timings.get("draft_n", 0))


def test_draft_n_max_moves_only_the_draft_types(start: Callable[..., StandinServer]) -> None:
    ngram = [drafted(start(spec_type="ngram-simple", n_max=str(gamma))) for gamma in (1, 3, 8)]
    assert len(set(ngram)) == 1, "ngram-simple reads its size-m, not --spec-draft-n-max"
    drafts = [drafted(start(spec_type="draft-simple", n_max=str(gamma))) for gamma in (1, 3)]
    assert drafts[0] != drafts[1]
    sized = [drafted(start(spec_type="ngram-simple", ngram_simple_size_m=str(m))) for m in (1, 3)]
    assert sized[0] != sized[1], "size-m is ngram-simple's draft length"


def test_props_say_no_draft_length_and_answers_carry_the_configured_types(start: Callable[..., StandinServer]) -> None:
    server = start(spec_type="ngram-simple")
    props = httpx.get(server.url + "/props", timeout=10).json()
    assert props["default_generation_settings"]["params"] == {"speculative.types": "none,ngram-simple"}
    body = {"prompt": "one two", "n_predict": 4, "stream": False}
    final = httpx.post(server.url + "/completion", json=body, timeout=30).json()
    assert final["generation_settings"]["speculative.types"] == "none,ngram-simple"


def test_a_plain_server_sends_no_draft_counts_and_slots_say_who_speculates(start: Callable[..., StandinServer]) -> None:
    plain, sd, failed = (
        start(spec_type="none"),
        start(spec_type="draft-simple"),
        start(spec_type="draft-simple", speculation_context="failed"),
    )
    body = {"prompt": "one two", "n_predict": 6, "stream": False}
    assert "draft_n" not in httpx.post(plain.url + "/completion", json=body, timeout=30).json()["timings"]
    assert "draft_n" not in httpx.post(failed.url + "/completion", json=body, timeout=30).json()["timings"]
    flags = [httpx.get(s.url + "/slots", timeout=10).json()[0]["speculative"] for s in (plain, sd, failed)]
    assert flags == [False, True, False]


def test_a_server_whose_draft_set_up_failed_is_not_speculating_in_the_evidence(
    start: Callable[..., StandinServer],
) -> None:
    plain, failed = start(spec_type="none"), start(spec_type="draft-simple", speculation_context="failed")
    backend = LlamaServerBackend(ModelPair("ignored"), {"plain_url": plain.url, "sd_url": failed.url})
    try:
        run(backend, Arm("plain"))
        _, stats = run(backend, Arm("sd", True, 3))
        evidence = backend.speculation_evidence()
    finally:
        backend.close()
    assert stats.drafted == 0  # type: ignore[attr-defined]
    assert (evidence.sd_arm, evidence.plain_arm) == (False, False)
    assert "is not speculating (GET /slots: speculative=false)" in evidence.reason


def test_each_spec_type_gets_its_own_flag_for_gamma() -> None:
    assert draft_length("draft-mtp", 3).flags == ("--spec-draft-n-max", "3")
    assert draft_length("ngram-simple", 20).flags == (
        "--spec-ngram-simple-size-m", "20", "--spec-ngram-simple-size-n", "12",
    )  # fmt: skip
    assert draft_length("ngram-map-k", 4).flags[:2] == ("--spec-ngram-map-k-size-m", "4")
    assert draft_length("ngram-mod", 8).flags == ("--spec-ngram-mod-n-max", "8", "--spec-ngram-mod-n-min", "8")
    assert draft_length("ngram-cache", 8).flags == ()
    with pytest.raises(SpecdecUsageError, match=r"ngram-cache drafts 8 tokens, fixed in llama\.cpp"):
        draft_length("ngram-cache", 3)


def test_draft_mtp_refuses_a_gamma_above_its_chained_heads(tmp_path: Path) -> None:
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "mtp.gguf"
    writer = gguf.GGUFWriter(str(path), "qwen35moe")
    writer.add_uint32("qwen35moe.nextn_predict_layers", 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert mtp_heads(path) == 2
    assert draft_length("draft-mtp", 2, path).flags == ("--spec-draft-n-max", "2")
    with pytest.raises(SpecdecUsageError, match=r"chains 2 MTP heads and drafts at most 2 tokens"):
        draft_length("draft-mtp", 3, path)
