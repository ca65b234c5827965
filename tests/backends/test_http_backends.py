"""llama-server, Ollama and MTPLX backends against stand-in servers on 127.0.0.1.

The stand-ins answer with the real field names, units and error shapes, and their
generations are real (llama-cpp-python on the synthetic pair; a speculative request
really drafts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from generations import generated

pytest.importorskip("llama_cpp", reason="the stand-ins generate with llama-cpp-python (extra [llama-cpp])")
pytest.importorskip("ollama", reason="the Ollama backend needs the ollama client (extra [ollama])")

from pytest_specdec.analysis import probe_engagement
from pytest_specdec.backends.base import Arm, Backend, GenerationRequest, ModelPair, NotRun
from pytest_specdec.backends.http_client import QUOTED, server_message
from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend
from pytest_specdec.backends.llama_server.knobs import draft_length, mtp_heads
from pytest_specdec.backends.llama_server.standin import LlamaServerHandler
from pytest_specdec.backends.mtplx.adapter import MtplxBackend
from pytest_specdec.backends.mtplx.standin import MtplxHandler
from pytest_specdec.backends.ollama.adapter import OllamaBackend
from pytest_specdec.backends.ollama.serve import ManagedOllama, free_port
from pytest_specdec.backends.ollama.standin import OllamaHandler
from pytest_specdec.backends.standin.engine import GenerationEngine
from pytest_specdec.backends.standin.http import StandinServer
from pytest_specdec.errors import BackendRuntimeError, BackendUnavailable, ModelLoadError, SpecdecUsageError
from pytest_specdec.store.files import load_run
from pytest_specdec.store.records import Role

PROMPT = "Copy this sentence exactly: the ferry leaves the north pier at seven."
HANDLERS = {"llama-server": LlamaServerHandler, "ollama": OllamaHandler, "mtplx": MtplxHandler}


@pytest.fixture
def servers(engine: GenerationEngine) -> Iterator[dict[str, StandinServer]]:
    running = {kind: StandinServer(handler, engine).start() for kind, handler in HANDLERS.items()}
    # llama-server speculates or not as started (--spec-type); the plugin needs one server per arm.
    running["llama-server-sd"] = StandinServer(
        LlamaServerHandler, engine, settings={"spec_type": "draft-simple", "n_max": "3"}
    ).start()
    yield running
    for server in running.values():
        server.stop()


def connect(kind: str, url: str, **options: str) -> Backend:
    if kind == "ollama":
        return OllamaBackend(ModelPair("specdec-synthetic:mtp"), {"host": url, **options})
    if kind == "mtplx":
        return MtplxBackend(ModelPair("ignored"), {"url": url, **options})
    plain, _, sd = url.partition(" ")
    return LlamaServerBackend(ModelPair("ignored"), {"plain_url": plain, "sd_url": sd or plain, **options})


def url_of(servers: dict[str, StandinServer], kind: str) -> str:
    """The URL (llama-server: the plain and the SD server's, space-separated) of a stand-in."""
    if kind == "llama-server":
        return f"{servers['llama-server'].url} {servers['llama-server-sd'].url}"
    return servers[kind].url


def run(backend: Backend, arm: Arm, max_tokens: int = 12) -> tuple[tuple[int, ...], object]:
    return generated(backend, GenerationRequest(PROMPT, arm, max_tokens, seed=7))


@pytest.mark.parametrize("kind", ["llama-server", "ollama", "mtplx"])
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "whole"])
def test_plain_and_sd_arms_agree_and_report_counts(
    servers: dict[str, StandinServer], kind: str, streaming: bool
) -> None:
    options = {} if kind == "ollama" else {"stream": str(streaming).lower()}
    backend = connect(kind, url_of(servers, kind), **options)
    try:
        plain_units, plain = run(backend, Arm("plain"))
        sd_units, sd = run(backend, Arm("sd", True, 3))
    finally:
        backend.close()
    assert plain_units == sd_units, "greedy SD must reproduce the plain output"
    assert plain_units
    for stats in (plain, sd):
        decoded = getattr(stats, "server_decode_tokens", None) or getattr(stats, "generated_tokens", None)
        assert decoded == 12
    if kind == "ollama":
        assert sd.drafted is None  # Ollama's API exposes no acceptance data
    else:
        assert sd.drafted > 0
        assert 0 <= sd.accepted <= sd.drafted
        assert plain.drafted in (None, 0)


def test_llama_server_arms_go_to_their_own_servers_and_request_no_speculation(
    servers: dict[str, StandinServer],
) -> None:
    backend = connect("llama-server", url_of(servers, "llama-server"))
    run(backend, Arm("plain"))
    run(backend, Arm("sd", True, 3))
    backend.close()
    plain = [body for _, path, body in servers["llama-server"].requests if path == "/completion"]
    sd = [body for _, path, body in servers["llama-server-sd"].requests if path == "/completion"]
    assert len(plain) == 1
    assert len(sd) == 2  # the one-off probe of per-request fields, then the generation
    assert all("speculative.n_max" not in b for b in (*plain, sd[-1]))
    assert all(b["n_predict"] == 12 and b["temperature"] == 0 and b["cache_prompt"] is False for b in plain)
    assert sd[0]["speculative.n_max"] == 0
    fingerprint = backend.fingerprint()
    assert fingerprint.release == "llama.cpp b9330-standin"
    honoured = {k: v for k, v in fingerprint.details.items() if k.startswith("request_fields_honoured")}
    assert list(honoured.values()) == ["false"]


def test_one_llama_server_for_both_arms_is_refused(servers: dict[str, StandinServer]) -> None:
    with pytest.raises(SpecdecUsageError, match="one llama-server cannot switch SD per request"):
        LlamaServerBackend(ModelPair("ignored"), {"url": servers["llama-server"].url})


def test_a_plain_llama_server_that_speculates_fails_in_one_line(servers: dict[str, StandinServer]) -> None:
    sd_url = servers["llama-server-sd"].url
    backend = LlamaServerBackend(ModelPair("ignored"), {"plain_url": sd_url, "sd_url": sd_url})
    with pytest.raises(
        BackendRuntimeError,
        match=r"^the plain arm now speculates: draft_n=\d+ .* start that server with --spec-type none$",
    ):
        run(backend, Arm("plain"))
    backend.close()


def test_a_llama_server_still_loading_is_refused(servers: dict[str, StandinServer]) -> None:
    servers["llama-server"].faults.add("loading")
    with pytest.raises(ModelLoadError, match="answered HTTP 503 on /health: Loading model"):
        connect("llama-server", url_of(servers, "llama-server"))


def test_ollama_requests_and_fingerprint(servers: dict[str, StandinServer]) -> None:
    server = servers["ollama"]
    backend = connect("ollama", server.url)
    run(backend, Arm("plain"))
    run(backend, Arm("sd", True, 3))
    fingerprint = backend.fingerprint()
    backend.close()
    options = [body["options"] for _, path, body in server.requests if path == "/api/generate"]
    assert [o["draft_num_predict"] for o in options] == [0, 3]
    assert all(o["num_predict"] == 12 and o["temperature"] == 0 and o["seed"] == 7 for o in options)
    assert fingerprint.release == "ollama 0.32.4"
    assert fingerprint.details["format"] == "gguf"
    assert fingerprint.details["quantization_level"] == "F16"
    assert fingerprint.details["fully_on_gpu"] == "True"
    assert backend.model_digest() == fingerprint.details["digest"][:16]


def test_ollama_two_tag_mode_pairs_a_draft_tag_with_a_plain_tag(servers: dict[str, StandinServer]) -> None:
    server = servers["ollama"]
    backend = OllamaBackend(
        ModelPair("specdec-synthetic:draft"),
        {"host": server.url, "sd": "tag", "plain_model": "specdec-synthetic:plain"},
    )
    run(backend, Arm("plain"))
    run(backend, Arm("sd", True, 3))
    backend.close()
    models = [body["model"] for _, path, body in server.requests if path == "/api/generate"]
    assert models == ["specdec-synthetic:plain", "specdec-synthetic:draft"]
    assert backend.pair.draft == "built-in draft head (vs specdec-synthetic:plain)"


def test_mtplx_modes_depth_and_drafter(servers: dict[str, StandinServer]) -> None:
    server = servers["mtplx"]
    backend = connect("mtplx", server.url)
    run(backend, Arm("plain"))
    run(backend, Arm("sd", True, 2))
    backend.close()
    bodies = [body for _, path, body in server.requests if path == "/v1/completions"]
    assert [b["generation_mode"] for b in bodies] == ["ar", "mtp"]
    assert "depth" not in bodies[0]
    assert bodies[1]["depth"] == 2
    details = backend.fingerprint().details
    assert details["separate_draft_model"] == "no"
    assert "own MTP head" in details["drafter"]


def test_mtplx_counts_fall_back_to_metrics(servers: dict[str, StandinServer]) -> None:
    server = servers["mtplx"]
    backend = connect("mtplx", server.url)
    server.faults.add("no-timings")  # the response then carries no mtplx_stats
    _, stats = run(backend, Arm("sd", True, 3))
    backend.close()
    assert ("GET", "/metrics", None) in server.requests
    assert stats.drafted > 0


def test_model_not_pulled_is_one_line(servers: dict[str, StandinServer]) -> None:
    with pytest.raises(
        ModelLoadError, match=r"^model qwen3-coder:30b is not on the server — run 'ollama pull qwen3-coder:30b'$"
    ):
        OllamaBackend(ModelPair("qwen3-coder:30b"), {"host": servers["ollama"].url})


@pytest.mark.parametrize("kind", ["llama-server", "ollama", "mtplx"])
def test_unreachable_server_names_the_address(kind: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ModelLoadError, match=f"cannot reach .* at {url}"):
        connect(kind, f"{url} {url}" if kind == "llama-server" else url)


FAULT_MESSAGES = {
    "http500": "answered HTTP 500.*injected failure",
    "malformed": "malformed JSON",
    "cut": "cut|ended before",
    "no-timings": "without",
    "slow": "did not answer within 0.5 s",
}


# MTPLX times from the stream: a response without timings falls back to /metrics (tested above).
FAULT_CASES = [
    (k, f)
    for k in ("llama-server", "ollama", "mtplx")
    for f in sorted(FAULT_MESSAGES)
    if (k, f) != ("mtplx", "no-timings")
]


@pytest.mark.parametrize(("kind", "fault"), FAULT_CASES)
def test_faults_give_one_line_and_no_result(servers: dict[str, StandinServer], kind: str, fault: str) -> None:
    backend = connect(kind, url_of(servers, kind), timeout="0.5" if fault == "slow" else "60")
    faulty = [servers[kind], servers["llama-server-sd"]] if kind == "llama-server" else [servers[kind]]
    for server in faulty:
        server.faults.add(fault)
    try:
        with pytest.raises(BackendRuntimeError, match=FAULT_MESSAGES[fault]) as caught:
            run(backend, Arm("sd", True, 3))
    finally:
        for server in faulty:
            server.released.set()
        backend.close()
    assert "\n" not in str(caught.value)


def test_probe_measures_both_arms_on_equal_length_pairs(servers: dict[str, StandinServer]) -> None:
    backend = connect("ollama", servers["ollama"].url)
    try:
        probe = probe_engagement(
            backend, baseline=Arm("plain"), treatment=Arm("sd", True, 3), max_tokens=8, confidence=0.95, rounds=1
        )
    finally:
        backend.close()
    generated = [body for _, path, body in servers["ollama"].requests if path == "/api/generate"]
    assert len(generated) == 16  # 4 pairs x 2 prompts x 2 arms
    assert {len(body["prompt"]) for body in generated[:2]} == {len(generated[0]["prompt"])}
    assert probe.sd_ratio.n == probe.plain_ratio.n == 4
    assert probe.describe().startswith("engagement probe: predictable/unpredictable decode ratio")


@pytest.mark.usefixtures("fake_ollama_on_path")
def test_managed_server_starts_with_its_environment_and_stops() -> None:
    backend = OllamaBackend(
        ModelPair("specdec-synthetic:mtp"),
        {"serve": "true", "serve_env": "OLLAMA_FLASH_ATTENTION=0;OLLAMA_NUM_PARALLEL=1"},
    )
    server = backend._server
    assert server is not None
    assert server.running
    seen = backend._http_get("/api/version")["standin_environment"]
    assert seen == {"OLLAMA_FLASH_ATTENTION": "0", "OLLAMA_NUM_PARALLEL": "1"}
    assert backend.fingerprint().details["env.OLLAMA_FLASH_ATTENTION"] == "0"
    _, stats = run(backend, Arm("sd", True, 3))
    assert stats.server_decode_tokens == 12
    backend.close()
    assert not server.running
    with pytest.raises(ModelLoadError, match="cannot reach Ollama"):
        OllamaBackend(ModelPair("specdec-synthetic:mtp"), {"host": server.host})


def test_managed_server_without_binary_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BackendUnavailable, match="needs the 'ollama' binary on PATH"):
        ManagedOllama({}).start()


@pytest.mark.parametrize(
    ("kind", "options"),
    [
        ("ollama", ["--specdec-model=specdec-synthetic:mtp", "--specdec-ollama-host={url}"]),
        ("mtplx", ["--specdec-backend-option=url={url}"]),
        ("llama-server", ["--specdec-backend-option=plain_url={url}", "--specdec-backend-option=sd_url={sd}"]),
    ],
)
def test_benchmark_runs_end_to_end_through_the_plugin(
    pytester: pytest.Pytester, servers: dict[str, StandinServer], kind: str, options: list[str]
) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(max=1.0)
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    url, sd = servers[kind].url, servers["llama-server-sd"].url
    result = pytester.runpytest(
        f"--backend={kind}",
        *(o.format(url=url, sd=sd) for o in options),
        "--specdec-min-trials=2",
        "--specdec-max-trials=2",
        "--specdec-notes=all",  # the probe's note among however many the run has
        "-p",
        "no:cacheprovider",
    )
    assert result.ret in (0, 1)  # the verdict is whatever was measured
    result.stdout.fnmatch_lines([f"{kind} *copy*x [[]*2 *"])
    if kind == "ollama":
        result.stdout.fnmatch_lines(["*engagement probe: predictable/unpredictable decode ratio*"])


def test_plain_arm_from_another_runtime_on_the_same_weights(
    pytester: pytest.Pytester, servers: dict[str, StandinServer]
) -> None:
    """MTPLX's SD against llama-cpp-python's plain decoding of the very GGUF it serves, and against its own plain."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(max=1.0)
        def test_sd(specdec):
            specdec.compare(category="copy", max_tokens=8)
        """
    )
    result = pytester.runpytest(
        "--backend=mtplx", f"--specdec-backend-option=url={servers['mtplx'].url}",
        "--specdec-plain-runtime=llama-cpp", "--specdec-min-trials=2", "--specdec-max-trials=2",
        "--specdec-json=run.json", "-p", "no:cacheprovider",
    )  # fmt: skip
    assert result.ret in (0, 1)  # the verdict is whatever was measured
    run = load_run(pytester.path / "run.json")
    own, other = run.comparisons
    assert (own.baseline_arm, other.baseline_arm) == ("plain", "llama-cpp plain")
    assert own.judgement.role is Role.REFERENCE_ROW, "the backend's own plain mode is the reference"
    assert other.judgement.gating, "the verdict is against the other runtime's plain decoding"
    assert other.release.startswith("llama-cpp-python ")
    assert " | mtplx" in other.release, "a release of either runtime can change the conclusion"
    assert "llama-cpp-python" in other.versions
    result.stdout.fnmatch_lines(
        [
            "*[[]copy[]] plain ways: llama-cpp plain * tok/s, the backend's own plain * tok/s*SD vs llama-cpp plain *x (the verdict)*"
        ]
    )


# The llama-server stand-in follows the bundled llama.cpp: which flag is γ, /slots, /props, draft_n.


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
    assert evidence.why is NotRun.DRAFTER_NOT_LOADED, "asked to speculate, the server set no drafter up"


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


@pytest.mark.parametrize(
    "body", ['{"error": "' + "x" * 10_000_000 + '"}', "<html>" + "y" * 10_000_000, '{"detail": {"message": "z"}}']
)
def test_a_servers_error_body_is_quoted_in_a_few_hundred_characters(body: str) -> None:
    """A 10 MB error reply is not echoed into a 10-million-character line (issue #51)."""
    said = server_message(body)
    assert len(said) <= QUOTED + 40
    assert "\n" not in said
    assert said == "z" or re.search(r"… \(10,000,0\d\d characters\)$", said)
