"""The group-sequential design: the pair order, when to look, how much error each look may spend, and the estimate.

A comparison is a series of paired trials, each running both arms back to back on
one prompt. The design (simulated under realistic noise in
``studies/error_rates.py``; figures in docs/measurements.md):

* **The speedup it reports** is what a user who runs these prompts feels: total
  plain decode time ÷ total SD decode time, one generation of each prompt
  (:func:`total_time_ratio`). A generation in which one arm stalled 2–3x (a
  *hiccup*) is left out and listed, not averaged in (:func:`hiccups`).
* **Blocks.** One block runs every prompt twice: in order, then in reverse order
  (the last prompt moved to the end, so no prompt runs twice in a row); of each
  prompt's two pairs one runs SD first, the other plain first, which one by a seeded
  coin drawn for each comparison (:func:`pair_schedule`). Balanced per prompt and block, so steady drift
  cancels; coin-flipped, so a machine's carried-over slowness (AR(1) noise) does not
  line up with the arm order and correlate the pairs.
* **Looks** only after whole blocks: the first at the first block with at least 16
  pairs and 12 residual degrees of freedom, then after every block, up to
  ``max_trials`` rounded down to whole blocks (:func:`look_schedule`).
* **Error spending.** Each stated bound gets an equal share of the per-direction error
  budget; at each look the share spent so far follows the Hwang–Shih–DeCani function
  with γ = −4 (an O'Brien–Fleming-like member of the Lan–DeMets family: little early,
  most kept for late looks). The one-sided critical values come from the exact
  recursive integration of the Brownian motion the looks sample (:func:`boundaries`).
* **Error of the estimate.** The delta method on per-pair influence values, prompts
  as strata, Student-t with half the ``n − P`` residual degrees of freedom.
* **Two readings.** "These prompts" (the default) is a statement about the prompts
  measured; "prompts like these" is one about the prompts they were drawn from: the
  same ratio, its error from the spread between prompts (P − 1 degrees of freedom),
  so it needs many prompts (:func:`prompts_to_decide` says how many).
* **Futility** (non-binding, so it cannot raise an error rate): from a third of the
  budget on, a bound whose chance of being decided by ``max_trials`` — if the current
  estimate were the truth — is under 5 % stops being waited for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

HSD_GAMMA = -4.0
MIN_FIRST_LOOK_PAIRS = 16
MIN_FIRST_LOOK_DF = 12
FUTILITY_POWER = 0.05
FUTILITY_FROM = 1 / 3
HICCUP_RATIO = 1.8
HICCUP_SDS = 3.0
DF_SHARE = 0.5
MAX_PROMPTS_TO_SUGGEST = 500
_GRID = 401


def pair_schedule(prompts: int, pairs: int, seed: str) -> tuple[tuple[int, bool], ...]:
    """``(prompt index, SD arm first)`` for ``pairs`` pairs, in blocks of 2·P.

    A block runs every prompt twice, in order and then in reverse order with the last
    prompt moved to the end (so no prompt runs twice in a row); of a prompt's two
    pairs in a block one runs SD first and one plain first, which of the two is a coin
    flip (seeded by ``seed``: each comparison draws its own, recorded with its result,
    so no pattern of the machine meets the same order run after run). The balance cancels a
    machine's steady drift within each prompt and block; the coin breaks the lockstep
    with which a fixed alternation would turn a machine's carried-over slowness (one
    slow generation making the next slow too) into correlated pairs.
    """
    import random

    coin = random.Random(seed)
    schedule: list[tuple[int, bool]] = []
    while len(schedule) < pairs:
        sd_first = [coin.random() < 0.5 for _ in range(prompts)]
        back = [*reversed(range(prompts - 1)), prompts - 1]  # no prompt twice in a row
        schedule += [(index, sd_first[index]) for index in range(prompts)]
        schedule += [(index, not sd_first[index]) for index in back]
    return tuple(schedule[:pairs])


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


@cache
def t_critical(z: float, df: float) -> float:
    """The Student-t value with the same one-sided tail as ``z``."""
    from scipy import stats as scipy_stats

    return float(scipy_stats.t.isf(scipy_stats.norm.sf(z), df))


@dataclass(frozen=True)
class Estimate:
    """A log speedup with its standard error and degrees of freedom.

    ``totals`` holds, per prompt, the plain and the SD arm's mean decode seconds of one
    generation: what the "prompts like these" reading is built from.
    """

    value: float
    se: float
    df: float
    totals: tuple[tuple[float, float], ...] = ()
    left_out: tuple[int, ...] = ()  # positions of the pairs left out as hiccups

    @property
    def locations(self) -> tuple[float, ...]:
        """Each prompt's own log speedup (its plain seconds over its SD seconds)."""
        return tuple(math.log(plain / sd) for plain, sd in self.totals)


def _strata(strata: Sequence[str], keys: Sequence[str]) -> tuple[list[int], int]:
    """Each pair's prompt index among ``keys``, and the prompt count.

    All pairs form one stratum when a prompt has no pair or too few pairs remain
    beyond one per prompt for an error estimate.
    """
    index = [list(keys).index(key) for key in strata]
    if len(set(index)) < len(keys) or len(strata) - len(keys) < 2:
        return [0] * len(strata), 1
    return index, len(keys)


def hiccups(plain_s: Sequence[float], sd_s: Sequence[float], strata: Sequence[str]) -> tuple[int, ...]:
    """Pairs in which one arm stalled: a log ratio far off its prompt's typical one.

    A prompt's typical ratio is the median of its pairs' and of the median over all
    pairs (the extra value makes a median of two pairs pick the one that agrees with
    the rest). Far means beyond both ``log`` :data:`HICCUP_RATIO` and
    :data:`HICCUP_SDS` robust standard deviations (1.4826 × the median absolute
    deviation from those medians): a 2–3x stall of one arm, rarely ordinary noise.
    """
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):  # a zero time makes no ratio, and no stall
        ratios = np.log(np.asarray(plain_s, dtype=float) / np.asarray(sd_s, dtype=float))
    if len(ratios) < 4 or not np.all(np.isfinite(ratios)):
        return ()
    keys = sorted(set(strata))
    index = np.array([keys.index(key) for key in strata])
    overall = float(np.median(ratios))
    typical = np.array([np.median([*ratios[index == k], overall]) for k in range(len(keys))])
    residual = np.abs(ratios - typical[index])
    scale = 1.4826 * float(np.median(residual)) * math.sqrt(len(ratios) / max(len(ratios) - len(keys), 1))
    limit = max(math.log(HICCUP_RATIO), HICCUP_SDS * scale)
    return tuple(int(i) for i in np.flatnonzero(residual > limit))


def total_time_ratio(plain_s: Sequence[float], sd_s: Sequence[float], strata: Sequence[str]) -> Estimate:
    """log(total plain decode time ÷ total SD decode time) over one generation of each prompt.

    ``plain_s`` and ``sd_s`` are each pair's decode seconds, in run order; prompts are
    weighted equally (each prompt's mean generation counts once), as a user who runs
    these prompts would feel it. Pairs in which one arm stalled (:func:`hiccups`) are
    left out and listed. The standard error is the delta method's on per-pair
    influence values (the coin-flipped arm order of :func:`pair_schedule` keeps a
    machine's carried-over slowness from correlating them), with
    :data:`DF_SHARE` of the ``n − P`` degrees of freedom: the screening and the
    estimated prompt weights cost some. When a prompt has no pair left, all pairs
    form one stratum.
    """
    left_out = hiccups(plain_s, sd_s, strata)
    parts = _RatioParts.of(plain_s, sd_s, strata, left_out)
    return parts.estimate(parts.influence)


def ratio_change(old: tuple[Sequence[float], Sequence[float]], new: tuple[Sequence[float], Sequence[float]],
                 strata: Sequence[str]) -> Estimate:  # fmt: skip
    """log(new total-time ratio ÷ old one), both measured in the same pairs (a pair either stalled in is left out)."""
    left_out = tuple(sorted(set(hiccups(*old, strata)) | set(hiccups(*new, strata))))
    before = _RatioParts.of(*old, strata, left_out)
    after = _RatioParts.of(*new, strata, left_out)
    change = after.estimate(after.influence - before.influence)
    return Estimate(after.value - before.value, change.se, change.df, (), left_out)


@dataclass(frozen=True)
class _RatioParts:
    """A total-time ratio's value and per-pair influence values, pairs left out already."""

    value: float
    influence: Any  # numpy array, one value per kept pair in run order
    prompts: int
    totals: tuple[tuple[float, float], ...]
    left_out: tuple[int, ...]

    @classmethod
    def of(
        cls, plain_s: Sequence[float], sd_s: Sequence[float], strata: Sequence[str], left_out: tuple[int, ...]
    ) -> _RatioParts:
        import numpy as np

        kept = [i for i in range(len(plain_s)) if i not in left_out]
        plain = np.asarray([plain_s[i] for i in kept], dtype=float)
        sd = np.asarray([sd_s[i] for i in kept], dtype=float)
        keys = sorted(set(strata))
        stratum, prompts = _strata([strata[i] for i in kept], keys)
        index = np.asarray(stratum, dtype=int)
        counts = np.bincount(index, minlength=prompts)
        plain_mean = np.bincount(index, plain, minlength=prompts) / counts
        sd_mean = np.bincount(index, sd, minlength=prompts) / counts
        plain_total, sd_total = float(plain_mean.sum()), float(sd_mean.sum())
        if not (0.0 < plain_total < math.inf and 0.0 < sd_total < math.inf):  # no time measured: no ratio
            return cls(math.nan, np.zeros(len(plain)), prompts, (), left_out)
        influence = ((plain - plain_mean[index]) / plain_total - (sd - sd_mean[index]) / sd_total) / counts[index]
        totals = tuple(zip(plain_mean.tolist(), sd_mean.tolist(), strict=True)) if prompts == len(keys) > 1 else ()
        return cls(math.log(plain_total / sd_total), influence, prompts, totals, left_out)

    def estimate(self, influence: Any) -> Estimate:
        """The value with the standard error of these influence values."""
        n = len(influence)
        if n - self.prompts < 1 or not math.isfinite(self.value):
            return Estimate(self.value, math.inf, 1.0, self.totals, self.left_out)
        variance = float(influence @ influence) * n / (n - self.prompts)  # each prompt's mean used one df
        # Half the residual df where prompts are strata (the screening and the per-prompt means cost some,
        # studies/error_rates.py); a pooled handful of pairs keeps its n - 1.
        df = DF_SHARE * (n - self.prompts) if self.prompts > 1 else float(n - 1)
        return Estimate(self.value, math.sqrt(variance), df, self.totals, self.left_out)


def random_effects(estimate: Estimate) -> Estimate | None:
    """ "Prompts like these": the same ratio, its error from the spread between prompts (P − 1 df)."""
    totals = estimate.totals
    if len(totals) < 2:
        return None
    plain_total = math.fsum(p for p, _ in totals)
    sd_total = math.fsum(s for _, s in totals)
    influence = [p / plain_total - s / sd_total for p, s in totals]
    prompts = len(totals)
    variance = prompts / (prompts - 1) * math.fsum(v * v for v in influence)
    return Estimate(estimate.value, math.sqrt(variance), float(prompts - 1), totals, estimate.left_out)


def prompts_to_decide(estimate: Estimate, bound: float, z: float) -> int | None:
    """How many prompts like these (more than measured) would decide ``bound`` (log scale) at critical value ``z``.

    The spread between prompts stays what it is now; ``None`` when the estimate sits on
    the bound or more than :data:`MAX_PROMPTS_TO_SUGGEST` prompts would be needed.
    """
    population = random_effects(estimate)
    if population is None or population.value == bound:
        return None
    spread = population.se * math.sqrt(len(population.totals))  # per prompt
    distance = abs(population.value - bound)
    for prompts in range(len(population.totals) + 1, MAX_PROMPTS_TO_SUGGEST + 1):  # more than were measured
        if t_critical(z, prompts - 1) * spread / math.sqrt(prompts) < distance:
            return prompts
    return None


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
