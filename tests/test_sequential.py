"""The group-sequential design: balanced blocks, looks, spending, the robust estimate, and its error rates."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.sequential import (
    block_schedule,
    boundaries,
    look_schedule,
    random_effects,
    spent,
    stratified_huber,
)
from pytest_specdec.stats import Verdict


@pytest.mark.parametrize("prompts", [1, 3, 4, 5])
def test_a_block_runs_every_prompt_twice_once_with_each_arm_first(prompts: int) -> None:
    block = block_schedule(prompts)
    assert len(block) == 2 * prompts
    for index in range(prompts):
        assert sorted(first for p, first in block if p == index) == [False, True]


def test_looks_come_after_whole_blocks_from_sixteen_pairs_on() -> None:
    assert look_schedule(4, 16, 72) == (16, 24, 32, 40, 48, 56, 64, 72)
    assert look_schedule(4, 16, 75) == (16, 24, 32, 40, 48, 56, 64, 72), "the budget is rounded down to blocks"
    assert look_schedule(4, 2, 2) == (2,), "a budget below one design look is one look at its end"


def test_spending_is_little_early_and_all_at_the_end() -> None:
    assert spent(1.0, 0.01) == pytest.approx(0.01)
    assert spent(0.25, 0.01) < 0.001
    z = boundaries((0.25, 0.5, 0.75, 1.0), 0.01)
    assert z[0] > z[1] > z[2] > z[3] > stats.norm.isf(0.01)
    assert boundaries((1.0,), 0.01)[0] == pytest.approx(stats.norm.isf(0.01))


def test_the_boundaries_spend_exactly_their_error_on_brownian_paths() -> None:
    rng = np.random.default_rng(11)
    fractions = (0.25, 0.5, 0.75, 1.0)
    z = np.array(boundaries(fractions, 0.02))
    steps = rng.normal(size=(200_000, 4)) * np.sqrt(np.diff((0.0, *fractions)))
    paths = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    crossed = float(np.mean((paths >= z).any(axis=1)))
    assert crossed == pytest.approx(0.02, abs=0.002)


def test_one_slow_generation_does_not_move_the_robust_estimate() -> None:
    rng = np.random.default_rng(5)
    strata = [f"p{i % 4}" for i in range(32)]
    values = list(rng.normal(0.2, 0.05, 32))
    clean = stratified_huber(values, strata)
    values[7] -= math.log(3.0)  # one generation ran 3x slow
    spoiled = stratified_huber(values, strata)
    assert abs(spoiled.value - clean.value) < 0.02
    assert spoiled.df == pytest.approx(0.5 * (32 - 4))


def test_prompts_like_these_widen_with_the_spread_between_prompts() -> None:
    strata = [f"p{i % 4}" for i in range(32)]
    offsets = {"p0": -0.3, "p1": -0.1, "p2": 0.1, "p3": 0.3}
    values = [0.2 + offsets[s] + 0.01 * ((i * 7) % 5 - 2) for i, s in enumerate(strata)]
    these = stratified_huber(values, strata)
    like = random_effects(these)
    assert like is not None
    assert like.se > 5 * these.se


def test_a_true_speedup_at_the_bound_is_rarely_called_wrong_under_realistic_noise() -> None:
    """A/A (the same arm twice, so no per-prompt effect) against max=1.0: refuted in well under 3 % of 300 runs."""
    expect = Expectations(speedup=SpeedupBounds(max=1.0))
    wrong = 0
    for seed in range(300):
        backend = SimulatedBackend(
            ModelPair("t", "d"),
            {
                "noise": "0.1",
                "drift": "0.001",
                "wander": "0.01",
                "outliers": "0.02",
                "seed": str(seed),
            },
        )
        plan = ComparisonPlan(
            "code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 16, 72, 0.98,
            stop_when=stop_rule(expect), bounds=(1.0,),
        )  # fmt: skip
        (bound,) = judge(expect, run_comparison(backend, plan).speedup, None)
        wrong += bound.verdict is Verdict.REFUTED
    assert wrong <= 8  # 1 % target: 3 expected; P(> 8) < 0.5 % if the rate were 1 %
