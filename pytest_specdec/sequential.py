"""The group-sequential design: when to look, how much error each look may spend, and the estimate.

A comparison is a series of paired trials, each giving ``y = log(tok/s SD ÷ tok/s
plain)`` on one prompt. The design (simulated under realistic conditions in
``benchmarks/error_rates.py``; figures in the README):

* **Blocks.** One block runs every prompt twice: in order, then in reverse order, with
  the arm that goes first alternating and flipped on the way back — every prompt
  equally often and its arm order balanced, for any prompt count (:func:`block_schedule`).
* **Looks** only after whole blocks: the first at the first block with at least 16
  pairs and 12 residual degrees of freedom, then after every block, up to
  ``max_trials`` rounded down to whole blocks (:func:`look_schedule`).
* **Error spending.** Each stated bound gets an equal share of the per-direction error
  budget; at each look the share spent so far follows the Hwang–Shih–DeCani function
  with γ = −4 (an O'Brien–Fleming-like member of the Lan–DeMets family: little early,
  most kept for late looks). The one-sided critical values come from the exact
  recursive integration of the Brownian motion the looks sample (:func:`boundaries`).
* **Estimate.** A stratified Huber location (prompt = stratum, one pooled MAD scale,
  sandwich standard error): one generation in fifty running 2–3x slow does not move it.
  Its degrees of freedom are halved (``(n − P)·min(½, 2/P)``), which keeps the t
  interval at its level from 16 pairs on.
* **Two readings.** "These prompts" is the stratified interval (the default);
  "prompts like these" is a random-effects t interval on the per-prompt locations
  (P − 1 degrees of freedom), which widens with the spread between prompts.
* **Futility** (non-binding, so it cannot raise an error rate): from a third of the
  budget on, a bound whose chance of being decided by ``max_trials`` — if the current
  estimate were the truth — is under 5 % stops being waited for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

HSD_GAMMA = -4.0
MIN_FIRST_LOOK_PAIRS = 16
MIN_FIRST_LOOK_DF = 12
FUTILITY_POWER = 0.05
FUTILITY_FROM = 1 / 3
HUBER_K = 1.345
_GRID = 401


def block_schedule(prompts: int) -> tuple[tuple[int, bool], ...]:
    """One block: ``(prompt index, SD arm first)`` for 2·P pairs, balanced for any P."""
    forward = [(index, index % 2 == 1) for index in range(prompts)]
    back = [(index, not first) for index, first in reversed(forward)]
    return tuple(forward + back)


def look_schedule(prompts: int, min_trials: int, max_trials: int) -> tuple[int, ...]:
    """Looks in pairs, after whole blocks; one look at ``max_trials`` when the budget holds less than a block."""
    block = 2 * prompts
    first = 1
    while block * first < max(MIN_FIRST_LOOK_PAIRS, min_trials) or block * first - prompts < MIN_FIRST_LOOK_DF:
        first += 1
    last = max_trials // block
    if last < first:
        return (max_trials,)
    return tuple(block * k for k in range(first, last + 1))


def spent(fraction: float, alpha: float) -> float:
    """Cumulative one-sided error spent by information ``fraction`` (Hwang–Shih–DeCani, γ = −4)."""
    return alpha * (1.0 - math.exp(-HSD_GAMMA * fraction)) / (1.0 - math.exp(-HSD_GAMMA))


@cache
def boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    """One-sided z critical values at looks ``fractions`` spending ``alpha`` in all (Lan–DeMets).

    Works on the score scale ``S = Z·√t``, a Brownian motion: the sub-density of "not
    crossed yet" is carried from look to look on a grid, and each look's boundary is
    the level the process crosses with exactly the error spent at that look.
    """
    import numpy as np
    from scipy import optimize
    from scipy import stats as scipy_stats

    t = np.asarray(fractions, dtype=float)
    increments = np.diff(np.concatenate([[0.0], [spent(float(f), alpha) for f in t]]))
    critical = [float(scipy_stats.norm.isf(increments[0]))]
    top = critical[0] * math.sqrt(t[0])
    x = np.linspace(-12.0 * math.sqrt(t[0]), top, _GRID)
    density = scipy_stats.norm.pdf(x, scale=math.sqrt(t[0]))
    for k in range(1, len(t)):
        step = math.sqrt(t[k] - t[k - 1])
        weights = _trapezoid(x) * density
        ceiling = 40.0 * math.sqrt(t[k])

        def crossing(level: float, weights: np.ndarray = weights, x: np.ndarray = x, step: float = step) -> float:
            return float(np.sum(weights * scipy_stats.norm.sf((level - x) / step)))

        if increments[k] <= 1e-300 or crossing(ceiling) >= increments[k]:
            level = ceiling
        else:
            target = float(increments[k])
            level = optimize.brentq(lambda v, target=target: crossing(v) - target, float(x[0]), ceiling, xtol=1e-10)
        critical.append(level / math.sqrt(t[k]))
        grid = np.linspace(-12.0 * math.sqrt(t[k]), level, _GRID)
        density = (scipy_stats.norm.pdf((grid[:, None] - x[None, :]) / step) / step) @ weights
        x = grid
    return tuple(critical)


def _trapezoid(x: object) -> object:
    import numpy as np

    points = np.asarray(x)
    widths = np.diff(points)
    weights = np.zeros_like(points)
    weights[:-1] += widths / 2
    weights[1:] += widths / 2
    return weights


def t_critical(z: float, df: float) -> float:
    """The Student-t value with the same one-sided tail as ``z``."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.isf(scipy_stats.norm.sf(z), df))


@dataclass(frozen=True)
class Estimate:
    """A location on the log scale with its standard error and degrees of freedom."""

    value: float
    se: float
    df: float
    locations: tuple[float, ...] = ()  # per prompt, for the random-effects reading


def stratified_huber(values: Sequence[float], strata: Sequence[str]) -> Estimate:
    """The equal-weight mean of per-prompt Huber locations (one pooled MAD scale, sandwich SE).

    Needs at least two pairs per prompt and equal counts; otherwise it falls back to
    the plain mean with ``n − 1`` degrees of freedom.
    """
    import numpy as np

    groups: dict[str, list[float]] = {}
    for value, stratum in zip(values, strata, strict=True):
        groups.setdefault(stratum, []).append(value)
    sizes = {len(v) for v in groups.values()}
    n, prompts = len(values), len(groups)
    if len(sizes) != 1 or min(sizes) < 2:
        return _plain_mean(values)
    ys = np.array([groups[key] for key in sorted(groups)], dtype=float)
    location = np.median(ys, axis=1)
    scale = 1.4826 * float(np.median(np.abs(ys - location[:, None]))) * math.sqrt(n / (n - prompts))
    scale = max(scale, 1e-12)
    for _ in range(20):
        residual = ys - location[:, None]
        weight = np.minimum(1.0, HUBER_K * scale / np.maximum(np.abs(residual), 1e-300))
        location = np.sum(weight * ys, axis=1) / np.sum(weight, axis=1)
    scaled = (ys - location[:, None]) / scale
    psi = np.clip(scaled, -HUBER_K, HUBER_K)
    slope = max(float(np.mean(np.abs(scaled) < HUBER_K)), 1.0 / n)
    se = scale * math.sqrt(float(np.sum(psi**2)) / (n - prompts)) / slope / math.sqrt(n)
    df = min(0.5, 2.0 / prompts) * (n - prompts)
    return Estimate(float(np.mean(location)), se, df, tuple(float(v) for v in location))


def _plain_mean(values: Sequence[float]) -> Estimate:
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return Estimate(mean, math.inf, 1.0)
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return Estimate(mean, math.sqrt(variance / n), float(n - 1))


def random_effects(estimate: Estimate) -> Estimate | None:
    """ "Prompts like these": a t interval's ingredients on the per-prompt locations (P − 1 df)."""
    locations = estimate.locations
    if len(locations) < 2:
        return None
    mean = math.fsum(locations) / len(locations)
    spread = math.sqrt(math.fsum((v - mean) ** 2 for v in locations) / (len(locations) - 1))
    return Estimate(mean, spread / math.sqrt(len(locations)), float(len(locations) - 1), locations)


def futile(estimate: Estimate, n: int, n_max: int, bound: float, final_critical: float) -> bool:
    """Whether deciding ``bound`` (log scale) by ``n_max`` pairs has under a 5 % chance, if the estimate were true."""
    from scipy import stats as scipy_stats

    if n >= n_max or n / n_max < FUTILITY_FROM or not math.isfinite(estimate.se):
        return False
    sigma = estimate.se * math.sqrt(n)
    half = final_critical * sigma / math.sqrt(n_max)
    spread = max(sigma * math.sqrt(n_max - n) / n_max, 1e-12)
    power = scipy_stats.norm.cdf((estimate.value - half - bound) / spread) + scipy_stats.norm.cdf(
        (bound - half - estimate.value) / spread
    )
    return float(power) < FUTILITY_POWER
