"""Unit tests for the pure statistics."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as scipy_stats

from pytest_specdec.stats import (
    Interval,
    Verdict,
    combine,
    speedup_interval,
    verdict_at_least,
    verdict_at_most,
)
from pytest_specdec.store.night_statistics import _pairs_drift


def test_speedup_is_the_geometric_mean_of_pair_ratios() -> None:
    ratios = [1.2, 1.5, 1.1, 1.4]
    interval = speedup_interval([math.log(r) for r in ratios], 0.95)
    assert interval.estimate == pytest.approx(float(np.prod(ratios)) ** 0.25)
    assert interval.low < interval.estimate < interval.high
    assert interval.n == 4


def test_interval_coverage_matches_its_level_on_simulated_data() -> None:
    rng = np.random.default_rng(7)
    true = 1.3
    covered = 0
    for _ in range(2000):
        logs = rng.normal(math.log(true), 0.1, 8)
        interval = speedup_interval(list(logs), 0.9)
        covered += interval.low <= true <= interval.high
    assert 0.88 <= covered / 2000 <= 0.92


def test_single_sample_interval_is_unbounded() -> None:
    interval = speedup_interval([0.2], 0.95)
    assert interval.low == 0.0
    assert interval.high == math.inf


@pytest.mark.parametrize(
    ("low", "high", "at_most", "at_least"),
    [
        (1.1, 1.2, Verdict.HOLDS, Verdict.HOLDS),  # bound 1.25 / 1.05
        (1.3, 1.4, Verdict.REFUTED, Verdict.HOLDS),
        (1.0, 1.3, Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE),
        (0.9, 1.0, Verdict.HOLDS, Verdict.REFUTED),
    ],
)
def test_three_valued_verdicts(low: float, high: float, at_most: Verdict, at_least: Verdict) -> None:
    interval = Interval((low + high) / 2, low, high, 0.95, 10)
    assert verdict_at_most(interval, 1.25) is at_most
    assert verdict_at_least(interval, 1.05) is at_least


def test_combine_refuted_wins_then_all_holds() -> None:
    assert combine([Verdict.HOLDS, Verdict.REFUTED]) is Verdict.REFUTED
    assert combine([Verdict.HOLDS, Verdict.HOLDS]) is Verdict.HOLDS
    assert combine([Verdict.HOLDS, Verdict.INCONCLUSIVE]) is Verdict.INCONCLUSIVE
    assert combine([]) is Verdict.INCONCLUSIVE


def test_drift_on_the_pairs_is_welchs_t_on_log_ratios() -> None:
    rng = np.random.default_rng(3)
    old = list(rng.normal(0.0, 0.01, 20))
    small = list(rng.normal(0.02, 0.01, 20))  # ~2 %: significant, though below the least move drift reports
    large = list(rng.normal(0.2, 0.01, 20))
    assert _pairs_drift(small, old, 0.0, math.inf)[1] == pytest.approx(
        scipy_stats.ttest_ind(small, old, equal_var=False).pvalue
    )
    assert _pairs_drift(large, old, 0.0, math.inf)[0] == pytest.approx(math.exp(0.2), rel=0.02)


def test_a_run_to_run_spread_read_from_few_nights_widens_the_drift_test() -> None:
    """The between-night variance comes with its own degrees of freedom (nights less one per release): the
    test's degrees of freedom combine it with Welch's (Satterthwaite), so the same spread read from 4 nights
    gives a larger p-value than one read from 40, and a spread known exactly gives the normal-limit answer."""
    new, old = [0.12, 0.18, 0.15, 0.2, 0.1], [0.0, 0.05, 0.02, 0.04, 0.01]
    few, many = (_pairs_drift(new, old, 0.004, df)[1] for df in (4, 40))
    assert few > many
    within = statistics.variance(new) / 5 + statistics.variance(old) / 5
    welch = float(scipy_stats.ttest_ind(new, old, equal_var=False).df)
    df = (within + 0.004) ** 2 / (within**2 / welch + 0.004**2 / 4)
    z = math.log(_pairs_drift(new, old, 0.0, math.inf)[0]) / math.sqrt(within + 0.004)
    assert math.isclose(few, 2 * scipy_stats.t.sf(abs(z), df), rel_tol=1e-9)


@pytest.mark.parametrize(("machines", "tau"), [(3, 0.0), (4, 0.04), (8, 0.08)])
def test_pooled_submissions_cover_the_true_speedup_at_their_level(machines: int, tau: float) -> None:
    """Machines of one class that differ by τ, each with its own 95 % interval (its own error): the pooled 95 %
    interval covers the class's true speedup at least 95 % of the time — with three machines too (more where they
    agree: it is never narrower than the inverse-variance interval), where that normal interval covers far less
    once they differ."""
    from pytest_specdec.store.night_statistics import pool_intervals

    rng = np.random.default_rng(machines)
    truth, covered, normal_covered, runs = math.log(1.25), 0, 0, 3000
    for _ in range(runs):
        se = rng.uniform(0.01, 0.05, machines)
        logs = truth + rng.normal(0, tau, machines) + rng.normal(0, se)
        readings = [Interval(math.exp(y), math.exp(y - 1.96 * s), math.exp(y + 1.96 * s), 0.95, 32)
                    for y, s in zip(logs, se, strict=True)]  # fmt: skip
        pooled = pool_intervals(readings, 0.95)
        assert pooled is not None
        covered += pooled.interval.low <= math.exp(truth) <= pooled.interval.high
        weights = 1 / se**2
        centre, half = float(np.sum(weights * logs) / weights.sum()), 1.96 / math.sqrt(weights.sum())
        normal_covered += abs(centre - truth) <= half
    assert covered / runs >= 0.94, covered / runs
    if tau >= 0.04:
        assert normal_covered / runs < 0.85, "the plain inverse-variance interval ignores the machines' spread"
    assert pool_intervals(readings[:1], 0.95) is None, "one submission is not pooled"
