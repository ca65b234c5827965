"""The intervals at one look of a comparison: the speedup in both readings and the acceptance rate.

At a look after ``pairs`` the repeated confidence interval uses that look's critical
value of the group-sequential design (:func:`~pytest_specdec.sequential.boundaries`);
a run stops when its stop rule is met (:func:`decided`) or when every bound it still
straddles can no longer be decided within the budget (:func:`futile_at`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pytest_specdec.sequential import Estimate, boundaries, futile, random_effects, t_critical, total_time_ratio
from pytest_specdec.stats import Interval

if TYPE_CHECKING:
    from pytest_specdec.measure import ComparisonPlan, Pair


def _acceptance(pairs: Sequence[Pair], critical: float) -> Interval | None:
    counts = [(p.treatment.drafted, p.treatment.accepted) for p in pairs]
    return acceptance_interval(counts, critical)


def acceptance_interval(counts: Sequence[tuple[int | None, int | None]], critical: float) -> Interval | None:
    """The acceptance rate's interval from each pair's SD (drafted, accepted) counts at one look's critical value
    (``None``: fewer than two pairs counted drafts).

    >>> round(acceptance_interval([(10, 8), (10, 9), (None, None)], 1.96).estimate, 3)
    0.85
    """
    rates = [accepted / drafted for drafted, accepted in counts if drafted and accepted is not None]
    if len(rates) < 2:
        return None
    n = len(rates)
    mean = math.fsum(rates) / n
    sd = math.sqrt(math.fsum((r - mean) ** 2 for r in rates) / (n - 1))
    half = t_critical(critical, n - 1) * sd / math.sqrt(n)
    return Interval(mean, max(0.0, mean - half), min(1.0, mean + half), 1.0 - 2.0 * _tail(critical), n)  # per look


def _tail(z: float) -> float:
    from scipy import stats as scipy_stats

    return float(scipy_stats.norm.sf(z))


@dataclass(frozen=True)
class Look:
    """The intervals at one look."""

    speedup: Interval
    other: Interval | None
    acceptance: Interval | None
    estimate: Estimate


def look_at(plan: ComparisonPlan, pairs: Sequence[Pair], looks: tuple[int, ...]) -> Look:
    """The repeated confidence intervals after ``pairs`` (at the current or next planned look)."""
    z = critical_value(len(pairs), looks, plan.confidence)
    plain_s, sd_s = zip(*(p.seconds_of(plan.speedup_of) for p in pairs), strict=True)
    estimate = total_time_ratio(plain_s, sd_s, [p.prompt_id for p in pairs])
    these, like = speedup_readings(estimate, z, plan.confidence, plan.reading, len(pairs))
    return Look(these, like, _acceptance(pairs, z), estimate)


def critical_value(pairs: int, looks: tuple[int, ...], confidence: float) -> float:
    """The one-sided critical value of the look after ``pairs`` (the current or next planned look) in a
    design of ``looks`` at two-sided ``confidence`` over all its looks.

    >>> round(critical_value(16, (16,), 0.95), 3)
    1.96
    """
    index = next((k for k, n in enumerate(looks) if n >= pairs), len(looks) - 1)
    return boundaries(tuple(n / looks[-1] for n in looks), (1.0 - confidence) / 2.0)[index]


def speedup_readings(
    estimate: Estimate, z: float, confidence: float, reading: str, pairs: int
) -> tuple[Interval, Interval | None]:
    """The interval the verdicts read (about ``reading``: these prompts, or prompts like these) and the other.

    The one computation :func:`look_at` makes and ``pytest-specdec validate`` repeats from a file's pairs alone.
    """
    these = ratio_interval(estimate, z, confidence, pairs)
    population = random_effects(estimate)
    like = ratio_interval(population, z, confidence, pairs) if population is not None else None
    if reading == "prompts-like-these" and like is not None:
        return like, these
    return these, like


def ratio_interval(estimate: Estimate, z: float, confidence: float, n: int) -> Interval:
    """exp of a log estimate's two-sided Student-t interval with one-sided critical value ``z`` (unbounded if unknown)."""
    if not math.isfinite(estimate.se) or estimate.df <= 0:
        return Interval(math.exp(estimate.value), 0.0, math.inf, confidence, n)
    half = t_critical(z, estimate.df) * estimate.se
    high = math.exp(estimate.value + half) if estimate.value + half < 700 else math.inf  # few pairs: unbounded
    return Interval(math.exp(estimate.value), math.exp(estimate.value - half), high, confidence, n)


def decided(plan: ComparisonPlan, look: Look) -> bool:
    if plan.stop_when is None:
        return look.speedup.half_width_ratio <= plan.precision
    return plan.stop_when(look.speedup, look.acceptance)


def futile_at(plan: ComparisonPlan, look: Look, looks: tuple[int, ...]) -> bool:
    """Every speedup bound the interval still straddles can no longer be decided in the budget."""
    open_bounds = [b for b in plan.bounds if look.speedup.low <= b <= look.speedup.high]
    if not open_bounds or len(looks) < 2:
        return False
    final = boundaries(tuple(n / looks[-1] for n in looks), plan.alpha)[-1]
    prompts = max(1, len(look.estimate.locations))
    final_df = look.estimate.df * (looks[-1] - prompts) / max(1, look.speedup.n - prompts)
    final_critical = t_critical(final, final_df)
    return all(futile(look.estimate, look.speedup.n, looks[-1], math.log(b), final_critical) for b in open_bounds)


def pairs_to_decide(speedup: Interval, bounds: Sequence[float]) -> int | None:
    """About how many more pairs would decide the nearest bound at this noise (``None``: cannot say).

    >>> pairs_to_decide(Interval(1.1, 0.9, 1.3, 0.98, 16), [1.2])
    56
    """
    s = speedup
    if not bounds or s.n < 2 or not (0.0 < s.low <= s.estimate <= s.high < math.inf):
        return None
    distance = min(abs(math.log(s.estimate / b)) for b in bounds)
    half = (math.log(s.high) - math.log(s.low)) / 2.0
    if distance <= 0.0:
        return None
    return max(1, math.ceil(s.n * (half / distance) ** 2 - s.n))


def undecided_because(done: int, more: int | None, allowed: int | None) -> str:
    """Why an interval still straddles a bound, naming the limit that stopped it, in the words every report uses.

    >>> undecided_because(8, 4, 8)
    'about 4 more pairs would decide it, beyond the 8 --specdec-max-trials allowed: raise it'
    >>> undecided_because(72, 500, 72)
    'about 500 more pairs would decide it, beyond the 72 --specdec-max-trials allowed: raise it, or measure more prompts'
    """
    if more is None:
        return "more pairs would narrow it: raise --specdec-max-trials"
    if allowed is not None and done + more > allowed:
        hint = ", or measure more prompts" if more > allowed else ""
        return f"about {more} more pairs would decide it, beyond the {allowed} --specdec-max-trials allowed: raise it{hint}"
    return f"about {more} more pairs would decide it"
