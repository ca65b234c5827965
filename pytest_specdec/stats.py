"""Statistics on paired samples: speedup intervals, verdicts, adaptive stopping.

Each paired trial gives one log-ratio ``log(tok/s SD / tok/s plain)`` measured on
the same prompt, back to back. The speedup is the geometric mean ratio
``exp(mean log-ratio)`` with a Student-t interval on the mean.

**Optional stopping.** The protocol looks at the data more than once and stops as
soon as every bound is decided. To keep the reported interval valid under that,
it uses *Bonferroni alpha spending over a fixed schedule of looks*: the looks are
planned up front (:func:`look_schedule`: ``min_trials``, then about x1.5 each time,
ending at ``max_trials``) and each look spends ``α / K`` of the error budget. By the
union bound the K intervals hold simultaneously with probability ≥ 1 − α, so the
interval at whichever look the run stops at has coverage ≥ 1 − α. It is
conservative compared with a group-sequential design, but exact, simple to audit
and independent of how the stopping decision is made.
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


def look_schedule(min_trials: int, max_trials: int, growth: float = 1.5) -> tuple[int, ...]:
    """Planned interim looks: ``min_trials``, then ×``growth`` (rounded up), then ``max_trials``."""
    if min_trials < 2 or max_trials < min_trials:
        raise ValueError(f"need 2 <= min_trials <= max_trials, got {min_trials}, {max_trials}")
    looks = [min_trials]
    while looks[-1] < max_trials:
        looks.append(min(max_trials, max(looks[-1] + 1, math.ceil(looks[-1] * growth))))
    return tuple(looks)


def per_look_confidence(confidence: float, looks: int) -> float:
    """The confidence each look must have so that all ``looks`` hold jointly."""
    return 1.0 - (1.0 - confidence) / looks


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


def speedup_interval(log_ratios: Sequence[float], confidence: float, looks: int = 1) -> Interval:
    """Geometric-mean speedup of paired log-ratios, with a simultaneous interval."""
    level = per_look_confidence(confidence, looks)
    mean, low, high = mean_interval(log_ratios, level)
    return Interval(math.exp(mean), math.exp(low), math.exp(high), confidence, len(log_ratios))


def proportion_interval(values: Sequence[float], confidence: float, looks: int = 1) -> Interval:
    """Mean of per-trial proportions (e.g. acceptance) with a t interval clipped to [0, 1]."""
    level = per_look_confidence(confidence, looks)
    mean, low, high = mean_interval(values, level)
    return Interval(mean, max(0.0, low), min(1.0, high), confidence, len(values))


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


def drift_test(new: Sequence[float], old: Sequence[float], alpha: float, min_effect: float) -> DriftTest:
    """Welch's two-sample t-test on log-ratios plus a minimum relative effect."""
    ratio = math.exp(math.fsum(new) / len(new) - math.fsum(old) / len(old))
    if len(new) < 2 or len(old) < 2:
        return DriftTest(ratio, math.nan, False)
    from scipy import stats as scipy_stats

    result = scipy_stats.ttest_ind(new, old, equal_var=False)
    p_value = float(result.pvalue)
    if math.isnan(p_value):  # both samples constant
        p_value = 0.0 if ratio != 1.0 else 1.0
    significant = p_value < alpha and abs(math.log(ratio)) >= math.log1p(min_effect)
    return DriftTest(ratio, p_value, significant)
