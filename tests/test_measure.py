"""The one measurement protocol, driven by a scripted backend on a clock the test controls.

Every duration here is set by the script, so each test knows the exact answer: what a
trial times, which arm runs first, when the run stops and why, and what the lossless
check calls a near-tie.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

import pytest

from pytest_specdec.backends.base import (
    Arm,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.embedded.prompts import Prompt
from pytest_specdec.measure import (
    END_TO_END,
    ComparisonPlan,
    CutShort,
    Progress,
    check_output,
    run_comparison,
    run_trial,
)
from pytest_specdec.render.report import progress_line

PROMPTS = tuple(Prompt(f"p{i}", "code", f"prompt number {i}") for i in range(4))
PLAIN, SD = Arm("plain"), Arm("sd", speculative=True, num_draft=3)


class FakeClock:
    """Seconds that pass only when the scripted backend says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class ScriptedBackend:
    """A backend whose every generation takes exactly the seconds it is told to."""

    clock: FakeClock
    plain_step_s: float = 0.020
    sd_step_s: float = 0.010
    prefill_s: float = 0.100
    sd_drafts: bool = True
    plain_drafts: bool = False
    diverge_at: int | None = None  # the SD arm emits another token here
    margin: float | None = None  # what logit_margin answers (None: the backend cannot say)
    calls: list[tuple[str, str]] = field(default_factory=list)
    every_token: list[bool] = field(default_factory=list)  # what each request asked
    name: ClassVar[str] = "scripted"

    @property
    def pair(self) -> ModelPair:
        return ModelPair("t", "d")

    def fingerprint(self) -> Fingerprint:
        return Fingerprint(self.name, "scripted 1")

    def model_digest(self) -> str:
        return "digest"

    def close(self) -> None:
        pass

    def generate(self, request: GenerationRequest) -> GenerationStream:
        self.calls.append((request.arm.label, request.prompt))
        self.every_token.append(request.every_token)
        step = self.sd_step_s if request.arm.speculative else self.plain_step_s
        self.clock.now += self.prefill_s
        held: list[int] = []  # as the in-process backends do: the first token, then the rest at the last one
        for position in range(request.max_tokens):
            self.clock.now += step
            token = 100 + position
            if request.arm.speculative and position == self.diverge_at:
                token = 7
            held.append(token)
            if request.every_token or position in (0, request.max_tokens - 1):
                yield TokenBurst(tuple(held))
                held.clear()
        drafts = self.sd_drafts if request.arm.speculative else self.plain_drafts
        return GenerationStats(
            prompt_tokens=5,
            drafted=12 if drafts else 0,
            accepted=9 if drafts else 0,
        )


@dataclass
class MarginBackend(ScriptedBackend):
    """The same, able to show the plain arm's logit margin where the arms diverge."""

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        return self.margin


def plan(**changes: object) -> ComparisonPlan:
    base: dict[str, object] = {
        "category": "code", "prompts": PROMPTS, "baseline": PLAIN, "treatment": SD, "max_tokens": 8,
        "min_trials": 8, "max_trials": 16, "confidence": 0.98,
    }  # fmt: skip
    return ComparisonPlan(**(base | changes))  # type: ignore[arg-type]


def test_a_trial_times_decoding_from_the_first_token_to_the_last_and_keeps_prefill_apart() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock)
    trial = run_trial(backend, PROMPTS[0], PLAIN, plan(), clock)
    assert backend.every_token == [False], "a measurement asks for the first token, then the rest at once"
    assert trial.ttft_s == pytest.approx(0.100 + 0.020)
    assert trial.decode_tokens == 7  # the first token belongs to the time to first token
    assert trial.decode_s == pytest.approx(7 * 0.020)
    assert trial.decode_tps == pytest.approx(50.0)
    assert trial.token_ids == tuple(range(100, 108))


def test_a_server_that_times_itself_wins_over_the_client_clock() -> None:
    clock = FakeClock()

    @dataclass
    class Timed(ScriptedBackend):
        def generate(self, request: GenerationRequest) -> GenerationStream:
            yield from ScriptedBackend.generate(self, request)
            return GenerationStats(prompt_tokens=5, server_decode_seconds=0.5, server_decode_tokens=10)

    trial = run_trial(Timed(clock), PROMPTS[0], PLAIN, plan(), clock)
    assert trial.decode_s == 0.5
    assert trial.decode_tokens == 10


def test_every_pair_runs_both_arms_on_one_prompt_and_the_order_is_balanced() -> None:
    clock = FakeClock()
    backend = ScriptedBackend(clock)
    comparison = run_comparison(backend, plan(min_trials=16, max_trials=16, stop_when=lambda *_: False), clock=clock)
    assert backend.calls[:2] == [("plain", PROMPTS[0].text), ("sd", PROMPTS[0].text)], "warm-up: one per arm"
    measured = backend.calls[2:]
    assert len(measured) == 2 * len(comparison.pairs) == 32
    for first, second in zip(measured[::2], measured[1::2], strict=True):
        assert first[1] == second[1]
        assert {first[0], second[0]} == {"plain", "sd"}
    firsts = [pair.first for pair in comparison.pairs]
    assert firsts.count("sd") == firsts.count("plain"), "each arm goes first equally often"
    for prompt in PROMPTS:
        order = [p.first for p in comparison.pairs if p.prompt_id == prompt.id]
        assert order.count("sd") == order.count("plain"), f"{prompt.id} sees both orders"


def test_a_known_speedup_is_measured_exactly_when_the_clock_has_no_noise() -> None:
    clock = FakeClock()
    comparison = run_comparison(ScriptedBackend(clock), plan(stop_when=lambda *_: False), clock=clock)
    assert comparison.speedup.estimate == pytest.approx(2.0)
    assert comparison.arm_tps("baseline") == pytest.approx(50.0)
    assert comparison.arm_tps("treatment") == pytest.approx(100.0)
    assert comparison.acceptance is not None
    assert comparison.acceptance.estimate == pytest.approx(0.75)
    assert comparison.output.identical
    assert comparison.engaged is True


def test_end_to_end_adds_each_arms_time_to_first_token_and_the_other_metric_is_kept() -> None:
    clock = FakeClock()
    scripted = ScriptedBackend(clock)
    comparison = run_comparison(scripted, plan(stop_when=lambda *_: False).under(metric=END_TO_END), clock=clock)
    # 8 tokens: plain 0.100 s prefill + 8 x 0.020 s, SD 0.100 s + 8 x 0.010 s, prompt in to last token out
    assert comparison.speedup.estimate == pytest.approx((0.1 + 8 * 0.02) / (0.1 + 8 * 0.01))
    assert comparison.other_metric is not None
    assert comparison.other_metric.estimate == pytest.approx(2.0)  # decode alone, first token to last
    assert comparison.ttft_s("baseline") == pytest.approx(0.12)
    assert comparison.ttft_s("treatment") == pytest.approx(0.11)
    assert comparison.statement == "these 4 code prompts, end to end"
    decode = run_comparison(scripted, plan(stop_when=lambda *_: False), clock=clock)
    assert decode.other_metric is not None
    assert decode.other_metric.estimate == pytest.approx(comparison.speedup.estimate)


def test_a_decided_run_stops_at_its_first_look_and_progress_counts_every_pair() -> None:
    clock = FakeClock()
    seen: list[Progress] = []
    comparison = run_comparison(
        ScriptedBackend(clock), plan(stop_when=lambda *_: True), progress=seen.append, clock=clock
    )
    assert comparison.stopped == f"decided at look 1 of {len(comparison.looks)}"
    assert len(comparison.pairs) == comparison.looks[0]
    assert [p.done for p in seen] == list(range(1, len(comparison.pairs) + 1))
    assert seen[0].interval is None, "no interval from a single pair"


@pytest.mark.parametrize(
    ("script", "reason"),
    [
        ({"sd_drafts": False}, "stopped: the SD arm never drafted"),
        ({"plain_drafts": True}, "stopped: the plain arm drafted"),
        ({"diverge_at": 3}, "stopped: the arms produced different tokens"),
    ],
)
def test_a_run_that_cannot_be_judged_stops_with_its_reason(script: dict[str, object], reason: str) -> None:
    clock = FakeClock()
    never = plan(max_trials=32, stop_when=lambda *_: False)
    comparison = run_comparison(ScriptedBackend(clock, **script), never, clock=clock)  # type: ignore[arg-type]
    assert comparison.stopped == reason
    assert len(comparison.pairs) < comparison.looks[-1]


def test_a_divergence_fails_the_lossless_check_where_it_happens() -> None:
    clock = FakeClock()
    comparison = run_comparison(ScriptedBackend(clock, diverge_at=3), plan(), clock=clock)
    assert not comparison.output.identical
    assert (comparison.output.prompt_id, comparison.output.position) == ("p0", 3)
    assert comparison.output.margin is None


@pytest.mark.parametrize(("margin", "tolerated"), [(0.05, True), (0.5, False)])
def test_a_near_tie_is_a_note_and_a_clear_margin_is_a_failure(margin: float, tolerated: bool) -> None:
    clock = FakeClock()
    backend = MarginBackend(clock, diverge_at=3, margin=margin)
    run = plan(near_tie_logits=0.25)
    pairs = run_comparison(backend, run, clock=clock).pairs
    checked = check_output(pairs, backend, run)
    assert checked.identical is tolerated
    if tolerated:
        assert len(checked.near_ties) == len(PROMPTS), "one note per prompt, however often it diverges"
        assert "near-tie (plain logit margin 0.050 ≤ 0.25)" in checked.near_ties[0]
    else:
        assert checked.margin == pytest.approx(0.5)


def test_a_budget_that_runs_out_says_so() -> None:
    clock = FakeClock()
    comparison = run_comparison(ScriptedBackend(clock), plan(stop_when=lambda *_: False), clock=clock)
    assert comparison.stopped == "trial budget used up"
    assert len(comparison.pairs) == 16
    assert math.isfinite(comparison.speedup.high)


def test_a_runtime_that_compiles_per_shape_is_warmed_on_every_prompt_at_full_length() -> None:
    """mlx on a GPU: each prompt's first full-length generation is slow until its kernels exist."""

    @dataclass
    class Compiling(ScriptedBackend):
        lengths: list[int] = field(default_factory=list)

        def compiles_per_shape(self) -> bool:
            return True

        def generate(self, request: GenerationRequest) -> GenerationStream:
            self.lengths.append(request.max_tokens)
            return (yield from ScriptedBackend.generate(self, request))

    clock = FakeClock()
    backend = Compiling(clock)
    run_comparison(backend, plan(min_trials=8, max_trials=8, stop_when=lambda *_: False), clock=clock)
    warm = 2 * len(PROMPTS)
    assert backend.calls[:warm] == [(arm, p.text) for p in PROMPTS for arm in ("plain", "sd")]
    assert set(backend.lengths[:warm]) == {plan().max_tokens}, "at the full token budget"


@pytest.mark.parametrize(("budget_s", "looks_run"), [(10.0, 1), (12.0, 2), (None, 3)])
def test_a_time_budget_stops_at_the_last_look_that_fits_it(budget_s: float | None, looks_run: int) -> None:
    """A pair takes 0.44 s (plain 0.26, SD 0.18) and so does the warm-up; looks at 16, 24 and 32 pairs end at
    7.48, 11.00 and 14.52 s."""
    clock = FakeClock()
    never = plan(max_trials=32, stop_when=lambda *_: False, time_budget_s=budget_s)
    comparison = run_comparison(ScriptedBackend(clock), never, clock=clock)
    assert len(comparison.pairs) == 8 + 8 * looks_run
    if budget_s is None:
        assert comparison.stopped == "trial budget used up"
    else:
        assert comparison.stopped == (
            f"stopped at look {looks_run} of 3: the next look would end past this comparison's time budget "
            f"({budget_s:.0f} s)"
        )
        assert clock.now <= budget_s


def test_a_time_budget_spent_before_the_first_look_still_measures_it() -> None:
    clock = FakeClock()
    spent = plan(max_trials=32, stop_when=lambda *_: False, time_budget_s=0.0)
    comparison = run_comparison(ScriptedBackend(clock), spent, clock=clock)
    assert len(comparison.pairs) == comparison.looks[0] == 16
    assert comparison.stopped.startswith("stopped at look 1 of 3")


@dataclass
class InterruptedBackend(ScriptedBackend):
    """Ctrl-C (or SIGTERM, raised as it) arrives during its ``stop_at``-th generation."""

    stop_at: int = 0

    def generate(self, request: GenerationRequest) -> GenerationStream:
        if len(self.calls) + 1 == self.stop_at:
            raise KeyboardInterrupt
        return (yield from ScriptedBackend.generate(self, request))


@pytest.mark.parametrize("stop_at", [2, 5, 13])
def test_an_interrupt_during_the_pairs_carries_the_pairs_measured_so_far(stop_at: int) -> None:
    """Generation 1-2 are the warm-up; pair i is generations 2i+1 and 2i+2: fewer than two whole pairs carry none."""
    clock = FakeClock()
    whole = (stop_at - 3) // 2
    backend = InterruptedBackend(clock, stop_at=stop_at)
    if whole < 2:
        with pytest.raises(KeyboardInterrupt) as plain:
            run_comparison(backend, plan(), clock=clock)
        assert type(plain.value) is KeyboardInterrupt
        return
    with pytest.raises(CutShort) as cut:
        run_comparison(backend, plan(), clock=clock)
    partial = cut.value.comparison
    assert len(partial.pairs) == whole
    assert partial.stopped == f"interrupted after {whole} of at most 16 pairs"
    assert partial.speedup.estimate == pytest.approx(0.020 / 0.010), "decode rates: 20 ms a token plain, 10 SD"
    assert type(cut.value.__cause__) is KeyboardInterrupt


def test_progress_counts_the_distribution_check_from_the_first_pair() -> None:
    """Sampled SD whose draws differ per seed: the check after the pairs is in every time-left estimate."""

    @dataclass
    class Sampler(ScriptedBackend):
        def sampled_draws_per_seed(self) -> str:
            return "differ"

    clock = FakeClock()
    seen: list[Progress] = []
    sampled = plan(min_trials=8, max_trials=8, stop_when=lambda *_: False, distribution_generations=4)
    sampled = sampled.under(sampling=Sampling(0.7))
    run_comparison(Sampler(clock), sampled, progress=seen.append, clock=clock)
    pairs = [p for p in seen if p.stage == "pair"]
    # a pair is 0.44 s for 8 tokens a generation; the check draws 4 × 4 prompts × 2 arms of 16 tokens
    assert pairs[-1].after_s == pytest.approx(0.44 * 4 * 4 * 16 / 8)
    line = progress_line(pairs[0], 0.44)
    assert "of it the distribution check" in line
    seen.clear()  # arms that need not agree (different models): no check follows, none is counted
    run_comparison(Sampler(clock), replace(sampled, require_identical_output=False), progress=seen.append, clock=clock)
    assert {p.after_s for p in seen if p.stage == "pair"} == {0.0}
