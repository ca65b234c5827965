"""The group-sequential design: the pair order, looks, spending, the total-time estimate, and its error rates."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.sequential import (
    boundaries,
    hiccups,
    look_schedule,
    pair_schedule,
    prompts_to_decide,
    random_effects,
    ratio_change,
    spent,
    total_time_ratio,
)
from pytest_specdec.stats import Verdict


@pytest.mark.parametrize("prompts", [1, 3, 4, 5, 16])
def test_a_block_runs_every_prompt_twice_once_with_each_arm_first_and_never_twice_in_a_row(prompts: int) -> None:
    schedule = pair_schedule(prompts, 10 * 2 * prompts, "seed")
    for block in range(10):
        pairs = schedule[block * 2 * prompts : (block + 1) * 2 * prompts]
        for index in range(prompts):
            assert sorted(first for p, first in pairs if p == index) == [False, True]
    if prompts > 1:
        assert all(a[0] != b[0] for a, b in itertools.pairwise(schedule))


def test_which_pair_runs_sd_first_is_a_seeded_coin_not_an_alternation() -> None:
    schedule = pair_schedule(4, 4000, "a")
    assert schedule == pair_schedule(4, 4000, "a"), "the same plan runs in the same order"
    assert schedule != pair_schedule(4, 4000, "b")
    signs = np.array([1.0 if first else -1.0 for _, first in schedule])
    # A fixed alternation has lag-1 correlation -1; the coin's is near 0 (|r| < 4/sqrt(n) here).
    assert abs(float(np.mean(signs[1:] * signs[:-1]))) < 4 / math.sqrt(len(signs))


def test_each_comparison_draws_its_own_arm_order_and_records_it() -> None:
    backend = SimulatedBackend(ModelPair("t", "d"), {"speedup": "1.2"})
    plan = ComparisonPlan("code", prompts_for("code"), Arm("plain"), Arm("sd", True, 3), 8, 16, 16, 0.98)
    first, second = run_comparison(backend, plan), run_comparison(backend, plan)
    assert first.plan.order != second.plan.order
    for comparison in (first, second):  # each ran the order its own seed draws (two seeds can draw the same coins)
        drawn = pair_schedule(len(plan.prompts), len(comparison.pairs), comparison.plan.order)
        assert [(p.prompt_id, p.first) for p in comparison.pairs] == [
            (plan.prompts[index].id, "sd" if sd_first else "plain") for index, sd_first in drawn
        ]
    again = run_comparison(backend, replace(plan, order=first.plan.order))
    assert [p.first for p in again.pairs] == [p.first for p in first.pairs], "a recorded order can be run again"


def test_looks_come_after_whole_blocks_from_sixteen_pairs_on() -> None:
    assert look_schedule(4, 16, 72) == (16, 24, 32, 40, 48, 56, 64, 72)
    assert look_schedule(16, 16, 72) == (32, 64), "sixteen prompts: a block is 32 pairs"
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


def test_the_speedup_is_total_plain_time_over_total_sd_time_not_a_mean_of_ratios() -> None:
    # Two prompts, each plain generation 1 s: SD takes 1 s on one, 1/3 s on the other.
    plain = [1.0] * 8
    sd = [1.0, 1 / 3] * 4
    strata = ["a", "b"] * 4
    estimate = total_time_ratio(plain, sd, strata)
    assert math.exp(estimate.value) == pytest.approx(2.0 / (1.0 + 1 / 3))  # 1.5x, not the geometric 1.73x
    assert estimate.locations == pytest.approx((0.0, math.log(3.0)))


def test_a_generation_in_which_one_arm_stalled_is_left_out_and_named() -> None:
    rng = np.random.default_rng(5)
    strata = [f"p{i % 4}" for i in range(32)]
    plain = list(np.exp(rng.normal(0.0, 0.05, 32)))
    sd = list(np.exp(rng.normal(-0.2, 0.05, 32)))
    clean = total_time_ratio(plain, sd, strata)
    assert clean.left_out == ()
    sd[7] *= 2.5  # one SD generation stalled
    plain[12] *= 3.0  # one plain generation stalled
    spoiled = total_time_ratio(plain, sd, strata)
    assert spoiled.left_out == (7, 12)
    assert abs(spoiled.value - clean.value) < 0.02
    assert hiccups(plain, sd, strata) == (7, 12)


def test_prompts_that_differ_are_not_stalls_even_with_two_pairs_each() -> None:
    strata = [f"p{i % 16}" for i in range(32)]
    effect = [0.0] * 15 + [1.2]  # one prompt SD speeds up 3.3x, the rest not at all
    plain = [1.0 + 0.01 * (i % 3) for i in range(32)]
    sd = [p * math.exp(-effect[i % 16]) * (1.0 + 0.01 * (i % 5)) for i, p in enumerate(plain)]
    assert hiccups(plain, sd, strata) == ()


def test_the_standard_error_follows_the_noise_and_uses_half_the_residual_degrees_of_freedom() -> None:
    rng = np.random.default_rng(2)
    strata = [f"p{i % 4}" for i in range(64)]
    quiet = total_time_ratio(list(np.exp(rng.normal(0, 0.02, 64))), list(np.exp(rng.normal(0, 0.02, 64))), strata)
    loud = total_time_ratio(list(np.exp(rng.normal(0, 0.1, 64))), list(np.exp(rng.normal(0, 0.1, 64))), strata)
    assert loud.se > 3 * quiet.se
    assert quiet.se == pytest.approx(0.02 * math.sqrt(2 / 64), rel=0.3)
    assert quiet.df == pytest.approx(0.5 * (64 - 4))


def test_a_release_change_is_paired_so_a_machine_that_moved_both_cancels() -> None:
    rng = np.random.default_rng(3)
    strata = [f"p{i % 4}" for i in range(32)]
    machine = np.exp(rng.normal(0, 0.3, 32))  # the machine's speed swings widely from pair to pair
    old = (list(machine * np.exp(rng.normal(0, 0.01, 32))), list(machine / 1.5 * np.exp(rng.normal(0, 0.01, 32))))
    new = (list(machine * np.exp(rng.normal(0, 0.01, 32))), list(machine / 1.8 * np.exp(rng.normal(0, 0.01, 32))))
    change = ratio_change(old, new, strata)
    assert math.exp(change.value) == pytest.approx(1.8 / 1.5, rel=0.02)
    assert change.se < 0.01


def test_prompts_like_these_widen_with_the_spread_between_prompts() -> None:
    strata = [f"p{i % 4}" for i in range(32)]
    offsets = {"p0": -0.3, "p1": -0.1, "p2": 0.1, "p3": 0.3}
    plain = [1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(32)]
    sd = [p * math.exp(-0.2 - offsets[s]) for p, s in zip(plain, strata, strict=True)]
    these = total_time_ratio(plain, sd, strata)
    like = random_effects(these)
    assert like is not None
    assert like.se > 5 * these.se
    assert like.df == 3


def test_the_prompt_count_that_decides_the_general_reading_grows_with_the_spread_and_nearness() -> None:
    strata = [f"p{i % 4}" for i in range(32)]
    plain = [1.0] * 32

    def needed(spread: float, bound: float) -> int | None:
        offsets = {"p0": -spread, "p1": -spread / 3, "p2": spread / 3, "p3": spread}
        sd = [math.exp(-0.3 - offsets[s]) for s in strata]
        return prompts_to_decide(total_time_ratio(plain, sd, strata), math.log(bound), 2.33)

    narrow, wide = needed(0.05, 1.2), needed(0.3, 1.2)
    assert narrow is not None
    assert wide is not None
    assert wide > narrow
    near = needed(0.3, 1.26)
    assert near is not None
    assert near > wide


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
            stop_when=stop_rule(expect), bounds=(1.0,), order=str(seed),
        )  # fmt: skip
        (bound,) = judge(expect, run_comparison(backend, plan).speedup, None)
        wrong += bound.verdict is Verdict.REFUTED
    assert wrong <= 8  # 1 % target: 3 expected; P(> 8) < 0.5 % if the rate were 1 %
