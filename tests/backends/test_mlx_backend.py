"""Real mlx-lm runs (mlx on the CPU here) on the embedded synthetic pairs."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("mlx_lm", reason="mlx-lm is not installed (extra [mlx])")

from pytest_specdec.backends.base import Arm, GenerationRequest, GenerationStream, ModelPair, TokenBurst
from pytest_specdec.backends.mlx.adapter import MlxBackend
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.embedded import models
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import ModelLoadError
from pytest_specdec.measure import ComparisonPlan, check_output, run_comparison, run_trial

ALIGNED = ModelPair(models.DEFAULT_TARGET, "embedded:draft-aligned")
UNRELATED = ModelPair(models.DEFAULT_TARGET, "embedded:draft-unrelated")


@pytest.fixture(scope="module")
def aligned() -> MlxBackend:
    return MlxBackend(ALIGNED, {})


@pytest.fixture(scope="module")
def unrelated() -> MlxBackend:
    return MlxBackend(UNRELATED, {})


def plan(category: str = "code", trials: int = 3) -> ComparisonPlan:
    return ComparisonPlan(
        category=category,
        prompts=prompts_for(category),
        baseline=Arm("plain"),
        treatment=Arm("sd", speculative=True, num_draft=3),
        max_tokens=24,
        min_trials=trials,
        max_trials=trials,
        confidence=0.95,
    )


def test_drafting_is_observed_from_the_draft_models_own_calls(aligned: MlxBackend) -> None:
    """Each draft call after the target's prefill is one proposal: as many as mlx-lm's rounds draft, never more."""
    trial = run_trial(aligned, prompts_for("copy")[0], Arm("sd", True, 3), plan("copy"), time.perf_counter)
    assert trial.accepted is not None
    assert trial.drafted is not None
    assert trial.accepted <= trial.drafted <= 3 * 24, (trial.drafted, trial.accepted)
    assert trial.drafted >= 3, "the first round alone drafts γ"


def test_a_release_that_never_calls_the_draft_reads_drafted_zero_and_sd_not_engaged(
    aligned: MlxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapped mlx-lm whose SD path drops the draft model, as a broken release would: observed, not assumed."""
    import mlx_lm

    real = mlx_lm.stream_generate

    def drops_the_draft(model: object, tokenizer: object, prompt: object, **kwargs: object) -> object:
        kwargs.pop("draft_model", None)
        kwargs.pop("num_draft_tokens", None)
        return real(model, tokenizer, prompt, **kwargs)

    monkeypatch.setattr(mlx_lm, "stream_generate", drops_the_draft)
    comparison = run_comparison(aligned, plan("copy", trials=4))
    assert {p.treatment.drafted for p in comparison.pairs} == {0}
    assert comparison.engaged is False
    assert comparison.stopped == "stopped: the SD arm never drafted"


def test_sd_reproduces_plain_tokens_exactly(aligned: MlxBackend) -> None:
    comparison = run_comparison(aligned, plan("copy"))
    assert comparison.output.identical
    for pair in comparison.pairs:
        assert len(pair.baseline.token_ids) == 24
        assert pair.baseline.token_ids == pair.treatment.token_ids


def test_the_lossless_check_really_compares_tokens(aligned: MlxBackend) -> None:
    comparison = run_comparison(aligned, plan())
    pair = comparison.pairs[0]
    tampered = list(pair.treatment.token_ids)
    tampered[5] += 1
    from dataclasses import replace

    broken = replace(pair, treatment=replace(pair.treatment, token_ids=tuple(tampered)))
    check = check_output([broken])
    assert not check.identical
    assert check.position == 5
    assert check.prompt_id == pair.prompt_id


def test_acceptance_is_a_rate_and_aligned_beats_unrelated(aligned: MlxBackend, unrelated: MlxBackend) -> None:
    good = run_comparison(aligned, plan())
    bad = run_comparison(unrelated, plan())
    assert good.acceptance is not None
    assert bad.acceptance is not None
    assert 0.0 < good.acceptance.estimate <= 1.0
    assert 0.0 <= bad.acceptance.estimate < 1.0
    assert good.acceptance.estimate > bad.acceptance.estimate
    assert good.engaged is True


def test_trial_reports_tokens_timing_and_memory(aligned: MlxBackend) -> None:
    prompt = prompts_for("prose")[0]
    trial = run_trial(aligned, prompt, Arm("sd", speculative=True, num_draft=2), plan(), clock=time.perf_counter)
    assert trial.prompt_tokens > 0
    assert trial.decode_tokens == 23
    assert trial.decode_s > 0
    assert trial.ttft_s > 0
    assert trial.drafted is not None
    assert trial.accepted is not None
    assert 0 <= trial.accepted <= trial.drafted
    assert trial.peak_memory_bytes is not None
    assert trial.peak_memory_bytes > 0


def test_fingerprint_names_versions_and_cpu_device(aligned: MlxBackend) -> None:
    fingerprint = aligned.fingerprint()
    assert fingerprint.release.startswith("mlx-lm ")
    assert set(fingerprint.versions) == {"mlx", "mlx-lm"}
    assert fingerprint.device.startswith(("cpu", "gpu"))


def test_draft_with_another_vocabulary_is_refused(tmp_path: pytest.TempPathFactory, aligned: MlxBackend) -> None:
    import json
    import shutil
    from pathlib import Path

    source = models.materialize("embedded:draft-aligned")
    other = Path(str(tmp_path)) / "other-vocab"
    shutil.copytree(source, other)
    tokenizer = json.loads((other / "tokenizer.json").read_text())
    tokenizer["model"]["vocab"]["zzzextra"] = len(tokenizer["model"]["vocab"])
    (other / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ModelLoadError, match="different vocabulary from target"):
        MlxBackend(ModelPair(models.DEFAULT_TARGET, str(other)), {})


def test_missing_model_path_is_a_clear_error() -> None:
    with pytest.raises(ModelLoadError, match="model path /nonexistent/model does not exist"):
        MlxBackend(ModelPair("/nonexistent/model"), {})


def test_plugin_run_on_real_mlx(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.speedup(min=0.1)
        def test_aligned(specdec):
            specdec.compare(category="code", max_tokens=16)
        """
    )
    result = pytester.runpytest(
        "--backend=mlx", "--specdec-min-trials=3", "--specdec-max-trials=3", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=1)
    # Three pairs of real timings: the aligned pair is far above 0.1x, but with so few
    # pairs the interval may still straddle the bound; it must never be refuted.
    assert re.search(r"^mlx .*embedded:target \(synthetic\).* code .*(holds|inconclusive)\s", result.stdout.str(), re.M)


class Lossy(MlxBackend):
    """An SD arm that swaps its fourth token for the plain arm's least likely one: lossy well above any near-tie."""

    def generate(self, request: GenerationRequest) -> GenerationStream:
        import mlx.core as mx

        stream = super().generate(request)
        position = 0
        while True:
            try:
                burst = next(stream)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            if request.arm.speculative and position <= 3 < position + len(burst.token_ids):  # bursts of any size
                prefix = self._prompt_ids(request.prompt)  # the prompt; the tokens so far are not needed for argmin
                worst = int(mx.argmin(self._target.model(mx.array([prefix]))[0, -1]).item())
                tokens = list(burst.token_ids)
                tokens[3 - position] = worst
                burst = TokenBurst(tuple(tokens), burst.from_draft)
            position += len(burst.token_ids)
            yield burst


def test_the_plain_arms_margin_is_read_from_the_target(aligned: MlxBackend) -> None:
    prompt = prompts_for("code")[0].text
    tokens = [
        t for burst in aligned.generate(GenerationRequest(prompt, Arm("plain"), 4, seed=0)) for t in burst.token_ids
    ]
    other = (tokens[1] + 1) % 256
    margin = aligned.logit_margin(prompt, tokens[:1], tokens[1], other)
    assert margin is not None
    assert margin > 0, "greedy decoding chose the token with the larger logit"
    assert aligned.logit_margin(prompt, tokens[:1], other, tokens[1]) == pytest.approx(-margin)


@pytest.mark.parametrize(("near_tie", "fails"), [(0.1, True), (1e9, False)])
def test_a_lossy_sd_arm_fails_unless_the_divergence_is_within_the_near_tie_limit(near_tie: float, fails: bool) -> None:
    from dataclasses import replace

    lossy = Lossy(ALIGNED, {})
    try:
        comparison = run_comparison(lossy, replace(plan("code", trials=2), near_tie_logits=near_tie))
    finally:
        lossy.close()
    output = comparison.output
    assert output.identical is not fails
    if fails:
        assert output.position == 3
        assert output.margin is not None
        assert output.margin > near_tie, "the margin is read, and it is far above the limit"
    else:
        assert output.near_ties, "within the limit: a note, not a failure"


def test_sampling_follows_the_seed_and_sd_draws_other_tokens_of_one_law(aligned: MlxBackend) -> None:
    def drawn(arm: Arm, seed: int) -> list[int]:
        request = GenerationRequest(prompts_for("code")[0].text, arm, 12, seed, Sampling(0.7))
        return [t for burst in aligned.generate(request) for t in burst.token_ids]

    plain, sd = Arm("plain"), Arm("sd", speculative=True, num_draft=3)
    assert drawn(plain, 5) == drawn(plain, 5)
    assert drawn(plain, 5) != drawn(plain, 6)
    assert drawn(sd, 5) == drawn(sd, 5)  # SD is seeded too, though its draws are not plain's
    assert aligned.sampled_draws_per_seed() == "distribution"


def test_a_long_context_is_counted_and_sized_from_the_configs(aligned: MlxBackend) -> None:
    text = prompts_for("copy")[0].text
    assert aligned.count_tokens(text) == len(aligned._target.tokenizer.encode(text, add_special_tokens=False))
    assert aligned.context_window() == 4096
    target_kv, draft_kv = 2 * 8 * 4 * 64 * 2, 2 * 1 * 4 * 64 * 2  # float16 caches of an 8- and a 1-layer model
    draft_weights = sum(f.stat().st_size for f in aligned._draft.path.glob("*.safetensors"))
    assert aligned.context_bytes(1000) == (target_kv + draft_kv) * 1000 + draft_weights


def test_the_tokens_a_chat_template_adds_are_counted_for_the_context(tmp_path: Path) -> None:
    folder = tmp_path / "templated"
    shutil.copytree(models.materialize(models.DEFAULT_TARGET), folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["chat_template"] = "<bos>user: {{ messages[0]['content'] }}<eos>assistant:"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    templated = MlxBackend(ModelPair(str(folder)), {})
    wrapped = templated._target.tokenizer.encode("<bos>user: x<eos>assistant:", add_special_tokens=False)
    assert templated.template_tokens() == len(wrapped) - templated.count_tokens("x") > 2
    assert MlxBackend(ModelPair(str(folder)), {"chat_template": "false"}).template_tokens() == 0


@pytest.mark.parametrize("arm", [Arm("plain"), Arm("sd", True, 3)], ids=["plain", "sd"])
def test_a_measured_stream_is_the_first_token_then_the_rest_with_their_draft_flags(
    aligned: MlxBackend, arm: Arm
) -> None:
    """No burst per token inside the decode window; the same tokens, flags and counts as a burst a token."""
    prompt = prompts_for("code")[1].text

    def run(every_token: bool) -> tuple[list[tuple[int, ...]], list[tuple[bool, ...] | None], object]:
        stream = aligned.generate(GenerationRequest(prompt, arm, 12, every_token=every_token))
        tokens, flags = [], []
        while True:
            try:
                burst = next(stream)
            except StopIteration as stop:
                return tokens, flags, stop.value
            tokens.append(burst.token_ids)
            flags.append(burst.from_draft)

    tokens, flags, stats = run(True)
    held_tokens, held_flags, held_stats = run(False)
    assert [len(b) for b in tokens] == [1] * 12
    assert [len(b) for b in held_tokens] == [1, 11]
    assert [t for b in held_tokens for t in b] == [t for b in tokens for t in b]
    assert [f for b in held_flags for f in b or ()] == [f for b in flags for f in b or ()]
    assert (held_stats.accepted, held_stats.drafted) == (stats.accepted, stats.drafted)  # type: ignore[attr-defined]
    assert any(f for b in flags for f in b or ()) is arm.speculative


def test_a_measured_stream_that_stops_on_eos_sends_its_rest_before_mlx_lm_cleans_up(
    aligned: MlxBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mlx-lm sends its end-of-sequence token as its last response, then leaves ``wired_limit`` (a synchronize on
    Metal; mlx_lm/generate.py: stream_generate): the decode window ends at that response, not after the clean-up."""
    import types

    import mlx_lm

    events: list[object] = []

    def stream_generate(*_: object, **__: object) -> object:
        try:
            for token in (10, 11, 12):
                yield types.SimpleNamespace(token=token, from_draft=False, finish_reason=None)
            yield types.SimpleNamespace(token=2, from_draft=False, finish_reason="stop")  # before the budget of 64
        finally:
            events.append("clean-up")

    monkeypatch.setattr(mlx_lm, "stream_generate", stream_generate)
    for burst in aligned.generate(GenerationRequest("prompt", Arm("plain"), 64, every_token=False)):
        events.append(burst.token_ids)
    assert events == [(10,), (11, 12, 2), "clean-up"]
