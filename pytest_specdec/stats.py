"""Statistics on samples: intervals, three-valued verdicts, the drift test and its multiplicity control.

The comparison's own interval under optional stopping is the group-sequential design's
(:mod:`pytest_specdec.sequential`); the one-look intervals here serve quantities
measured once (r_v, the probe's ratios, a fraction of the roofline).
"""

from __future__ import annotations

import math
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
