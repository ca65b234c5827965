"""Statistics on samples: intervals, three-valued verdicts, the drift test and its multiplicity control.

The comparison's own interval under optional stopping is the group-sequential design's
(:mod:`pytest_specdec.sequential`); the one-look intervals here serve quantities
measured once (r_v, the probe's ratios, a fraction of the roofline).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    """The three-valued answer to "does this claim hold here?"."""

    HOLDS = "holds"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True)
class Interval:
    """An estimate with a two-sided interval at a (simultaneous) confidence level."""

    estimate: float
    low: float
    high: float
    confidence: float
    n: int

    @property
    def half_width_ratio(self) -> float:
        """Half the interval's width relative to the estimate (for ratio scales)."""
        return (self.high - self.low) / 2 / self.estimate if self.estimate else math.inf


def mean_interval(samples: Sequence[float], confidence: float) -> tuple[float, float, float]:
    """Mean and Student-t interval of ``samples`` (unbounded for a single sample)."""
    n = len(samples)
    if n == 0:
        raise ValueError("an interval needs at least one sample")
    mean = math.fsum(samples) / n
    if n == 1:
        return mean, -math.inf, math.inf
    variance = math.fsum((x - mean) ** 2 for x in samples) / (n - 1)
    if variance == 0.0:
        return mean, mean, mean
    from scipy import stats as scipy_stats

    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(variance / n)
    return mean, mean - half, mean + half


def speedup_interval(log_ratios: Sequence[float], confidence: float) -> Interval:
    """Geometric mean of log-ratios with a t interval (one look)."""
    mean, low, high = mean_interval(log_ratios, confidence)
    return Interval(math.exp(mean), math.exp(low), math.exp(high), confidence, len(log_ratios))


def verdict_at_least(interval: Interval, bound: float) -> Verdict:
    """Claim "value ≥ bound": holds if the whole interval is at or above it."""
    if interval.low >= bound:
        return Verdict.HOLDS
    if interval.high < bound:
        return Verdict.REFUTED
    return Verdict.INCONCLUSIVE


def verdict_at_most(interval: Interval, bound: float) -> Verdict:
    """Claim "value ≤ bound": holds if the whole interval is at or below it."""
    if interval.high <= bound:
        return Verdict.HOLDS
    if interval.low > bound:
        return Verdict.REFUTED
    return Verdict.INCONCLUSIVE


def verdict_on(interval: Interval, kind: str, bound: float) -> Verdict:
    """The verdict on a ``min`` or ``max`` bound.

    >>> verdict_on(Interval(1.3, 1.25, 1.35, 0.95, 16), "max", 1.2)
    <Verdict.REFUTED: 'refuted'>
    """
    return verdict_at_most(interval, bound) if kind == "max" else verdict_at_least(interval, bound)


def combine(verdicts: Sequence[Verdict]) -> Verdict:
    """One verdict for several bounds: any refuted refutes, all holding holds."""
    if any(v is Verdict.REFUTED for v in verdicts):
        return Verdict.REFUTED
    if verdicts and all(v is Verdict.HOLDS for v in verdicts):
        return Verdict.HOLDS
    return Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class DriftTest:
    """Whether a new set of log-ratios differs from a baseline's."""

    ratio: float  # new speedup / baseline speedup
    p_value: float
    significant: bool


def drift_test(
    new: Sequence[float],
    old: Sequence[float],
    alpha: float,
    min_effect: float,
    *,
    between_variance: float = 0.0,
    between_df: float = math.inf,
) -> DriftTest:
    """Welch's two-sample t-test on log-ratios plus a minimum relative effect.

    ``between_variance``: what the two runs' levels add to the difference of their means when they ran on
    different nights (twice the run-to-run variance, :mod:`pytest_specdec.store.spread`), estimated with
    ``between_df`` degrees of freedom; the test's degrees of freedom combine Welch's and those
    (Satterthwaite), so a spread read from few nights widens the test as it should.

    >>> round(drift_test([0.1, 0.2, 0.15], [0.0, 0.05, 0.02], 0.05, 0.0, between_variance=0.01, between_df=4).p_value, 3)
    0.284
    """
    ratio = math.exp(math.fsum(new) / len(new) - math.fsum(old) / len(old))
    if len(new) < 2 or len(old) < 2:
        return DriftTest(ratio, math.nan, False)
    from scipy import stats as scipy_stats

    result = scipy_stats.ttest_ind(new, old, equal_var=False)
    p_value = float(result.pvalue)
    if between_variance > 0:
        within = statistics.variance(new) / len(new) + statistics.variance(old) / len(old)
        statistic = math.log(ratio) / math.sqrt(within + between_variance)
        welch = float(result.df)
        df = (within + between_variance) ** 2 / (within**2 / welch + between_variance**2 / between_df)
        p_value = float(
            2 * (scipy_stats.t.sf(abs(statistic), df) if math.isfinite(df) else scipy_stats.norm.sf(abs(statistic)))
        )
    if math.isnan(p_value):  # both samples constant
        p_value = 0.0 if ratio != 1.0 else 1.0
    significant = p_value < alpha and abs(math.log(ratio)) >= math.log1p(min_effect)
    return DriftTest(ratio, p_value, significant)


def benjamini_hochberg(p_values: Sequence[float], rate: float) -> list[bool]:
    """Which p-values are discoveries at false-discovery ``rate`` (Benjamini–Hochberg step-up)."""
    ranked = sorted(range(len(p_values)), key=lambda i: p_values[i])
    cutoff = 0
    for rank, index in enumerate(ranked, start=1):
        if p_values[index] <= rate * rank / len(p_values):
            cutoff = rank
    chosen = set(ranked[:cutoff])
    return [i in chosen for i in range(len(p_values))]


def wilson_interval(hits: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson score interval of a proportion (95 % by default)."""
    centre = (hits + z * z / 2) / (n + z * z)
    half = z * math.sqrt(hits * (n - hits) / n + z * z / 4) / (n + z * z)
    return centre - half, centre + half


@dataclass(frozen=True)
class Pooled:
    """Several machines' readings of one thing as one answer: the pooled speedup and how far the machines differ."""

    interval: Interval  # ``n``: the readings pooled
    tau: float  # the between-reading standard deviation of log speedup (0: no more than their own errors)


def pool_intervals(intervals: Sequence[Interval], confidence: float) -> Pooled | None:
    """A random-effects pooling of ratio intervals on the log scale (``None`` for fewer than two readings).

    Each reading's standard error is read back from its interval at its own confidence (a sequential interval is
    wider than a fixed one: the pooled interval is then conservative); τ² is DerSimonian–Laird's moment estimate of
    how much the readings differ beyond their errors; the interval is Hartung–Knapp's — a t with ``k − 1`` degrees
    of freedom on the weighted residual variance, never narrower than the plain inverse-variance one — which holds
    its level with few readings where the normal one does not.

    >>> pooled = pool_intervals([Interval(1.2, 1.1, 1.31, 0.95, 32), Interval(1.3, 1.2, 1.41, 0.95, 32)], 0.95)
    >>> round(pooled.interval.estimate, 3), pooled.interval.n, pooled.interval.low < 1.2 < 1.3 < pooled.interval.high
    (1.251, 2, True)
    """
    from scipy.stats import norm, t

    points = []
    for i in intervals:
        if not (0 < i.low <= i.estimate <= i.high < math.inf and 0 < i.confidence < 1) or i.high == i.low:
            continue
        se = (math.log(i.high) - math.log(i.low)) / (2 * float(norm.ppf(0.5 + i.confidence / 2)))
        points.append((math.log(i.estimate), se * se))
    k = len(points)
    if k < 2:
        return None
    fixed = [1 / v for _, v in points]
    centre = math.fsum(w * y for w, (y, _) in zip(fixed, points, strict=True)) / math.fsum(fixed)
    q = math.fsum(w * (y - centre) ** 2 for w, (y, _) in zip(fixed, points, strict=True))
    c = math.fsum(fixed) - math.fsum(w * w for w in fixed) / math.fsum(fixed)
    tau2 = max(0.0, (q - (k - 1)) / c)
    weights = [1 / (v + tau2) for _, v in points]
    total = math.fsum(weights)
    mean = math.fsum(w * y for w, (y, _) in zip(weights, points, strict=True)) / total
    spread = math.fsum(w * (y - mean) ** 2 for w, (y, _) in zip(weights, points, strict=True)) / (k - 1)
    half = float(t.ppf(0.5 + confidence / 2, k - 1)) * math.sqrt(max(spread, 1.0) / total)
    pooled = Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence, k)
    return Pooled(pooled, math.sqrt(tau2))
