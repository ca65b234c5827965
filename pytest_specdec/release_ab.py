"""Old release against new, the same night, paired and interleaved: did the release change SD's speedup?

Each pair runs four generations on one prompt — the old release plain and with SD, the
new release plain and with SD — in an order balanced over the run (which release goes
first alternates from pair to pair; plain or SD first follows the prompt block's
schedule). A machine that moves (heat, background load, an OS update) moves both
releases alike and cancels in the change, the ratio of the new release's speedup to
the old one's. Where servers time themselves, the ratio of their own decode rate to this
process's clock is compared between releases too: a release that changes what its
counters cover moves that ratio, not the speed.

Intervals are Student-t intervals of the total-time ratio every comparison reports
(:func:`~pytest_specdec.sequential.total_time_ratio`): each release's speedup at
one-sided error ``plan.alpha``; the change (what blames a release) from the pairs'
paired influence values (:func:`~pytest_specdec.sequential.ratio_change`) at a tenth
of it, so that a machine that moved both releases is blamed on a release well under
1 % of nights.

**Measuring more when it cannot tell.** With ``plan.min_trials`` below ``plan.max_trials``
the run looks at ``min_trials`` pairs and at each doubling up to ``max_trials`` (as
Pinpoint adds repeats to an "unknown" comparison), and stops at the first look the
caller's ``settled`` accepts. Each look's intervals spend their error by the
comparison's own Lan–DeMets rule (:func:`~pytest_specdec.sequential.boundaries`), so a
run that stops at any look keeps the error rates above.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytest_specdec.backends.base import Arm, Backend
from pytest_specdec.measure import END_TO_END, ComparisonPlan, Trial, run_trial
from pytest_specdec.measure.looks import ratio_interval
from pytest_specdec.measure.sampled import pair_seed
from pytest_specdec.sequential import Estimate, boundaries, pair_schedule, ratio_change, total_time_ratio
from pytest_specdec.stats import Interval, mean_interval

Clock = Callable[[], float]


@dataclass(frozen=True)
class ReleaseAB:
    """Both releases' speedups measured together, and what changed between them."""

    old: Interval
    new: Interval
    change: Interval  # new speedup ÷ old speedup
    metric_change: Interval | None  # (server rate ÷ client rate of SD over plain), new ÷ old; None: no server timing
    pairs: int


def _arm(base: Arm, release: str) -> Arm:
    return replace(base, label=f"{release} {base.label}", options={**base.options, "release": release})


def interval(estimate: Estimate, n: int, alpha: float, z: float | None = None) -> Interval:
    """exp of an estimate's two-sided interval, at one-sided error ``alpha`` per side (critical value ``z`` if given)."""
    from scipy import stats as scipy_stats

    return ratio_interval(estimate, float(scipy_stats.norm.isf(alpha)) if z is None else z, 1.0 - 2.0 * alpha, n)


def ab_looks(first: int, last: int, block: int) -> tuple[int, ...]:
    """Pairs at each look: ``first`` and each doubling of it up to ``last``, in whole blocks (at least one)."""
    whole = max(block, last - last % block)
    looks = [min(whole, max(block, -(-first // block) * block))]
    while looks[-1] < whole:
        looks.append(min(whole, 2 * looks[-1] - (2 * looks[-1]) % block))
    return tuple(looks)


def _log_interval(values: Sequence[float], alpha: float) -> Interval:
    mean, low, high = mean_interval(values, 1.0 - 2.0 * alpha)
    return Interval(
        math.exp(mean), math.exp(low), math.exp(high) if high < 700 else math.inf, 1.0 - 2.0 * alpha, len(values)
    )


def _metric(plain: Trial, sd: Trial) -> float | None:
    if plain.client_tps is None or sd.client_tps is None:
        return None
    return math.log(sd.decode_tps / sd.client_tps) - math.log(plain.decode_tps / plain.client_tps)


Settled = Callable[["ReleaseAB"], bool]
"""Given the figures at a look, whether they decide what the caller asks (then the run stops)."""


def run_release_ab(
    backend: Backend, plan: ComparisonPlan, clock: Clock = time.perf_counter, settled: Settled | None = None
) -> ReleaseAB:
    """Warm up the four arms, then paired quadruples in whole blocks, under the plan's conditions.

    One look at ``plan.max_trials`` pairs when ``plan.min_trials`` is as large; otherwise looks at
    :func:`ab_looks` from ``min_trials``, stopping at the first one ``settled`` accepts (the last look
    is returned whatever it says). Sampled, the four generations of a quadruple draw with one seed;
    end to end, each arm's seconds include its time to first token (as the comparison that flipped
    read them).
    """
    plan = plan.with_order()
    arms = {(release, kind): _arm(base, release) for release in ("old", "new")
            for kind, base in (("plain", plan.baseline), ("sd", plan.treatment))}  # fmt: skip
    greedy = plan.sampling.greedy
    for arm in arms.values():
        run_trial(backend, plan.prompts[0], arm, plan, clock, seed=None if greedy else pair_seed(plan.order, -1))
    block = 2 * len(plan.prompts)
    looks = ab_looks(min(plan.min_trials, plan.max_trials), plan.max_trials, block)
    fractions = tuple(n / looks[-1] for n in looks)
    speed_z, change_z = boundaries(fractions, plan.alpha), boundaries(fractions, plan.alpha / 10)
    schedule = pair_schedule(len(plan.prompts), looks[-1], plan.order)
    seconds: dict[tuple[str, str], list[float]] = {key: [] for key in arms}
    metric: list[float | None] = []
    prompts: list[str] = []
    for look, count in enumerate(looks):
        for index in range(len(prompts), count):
            prompt_index, sd_first = schedule[index]
            prompt = plan.prompts[prompt_index]
            kinds = ("sd", "plain") if sd_first else ("plain", "sd")
            releases = ("new", "old") if index % 2 else ("old", "new")
            seed = None if greedy else pair_seed(plan.order, index)
            trials = {(r, k): run_trial(backend, prompt, arms[(r, k)], plan, clock, seed=seed)
                      for r in releases for k in kinds}  # fmt: skip
            tokens = trials[("old", "plain")].decode_tokens  # every arm's seconds for the same tokens
            for key, trial in trials.items():
                first = trial.ttft_s if plan.speedup_of == END_TO_END else 0.0
                seconds[key].append(first + tokens / trial.decode_tps)
            before, after = (_metric(trials[(r, "plain")], trials[(r, "sd")]) for r in ("old", "new"))
            metric.append(None if before is None or after is None else after - before)
            prompts.append(prompt.id)
        timed = [m for m in metric if m is not None]
        old, new = ((seconds[(r, "plain")], seconds[(r, "sd")]) for r in ("old", "new"))
        found = ReleaseAB(
            old=interval(total_time_ratio(*old, prompts), count, plan.alpha, speed_z[look]),
            new=interval(total_time_ratio(*new, prompts), count, plan.alpha, speed_z[look]),
            change=interval(ratio_change(old, new, prompts), count, plan.alpha / 10, change_z[look]),
            # the server-timing check looks as often: its error split evenly over the looks
            metric_change=_log_interval(timed, plan.alpha / 10 / len(looks)) if len(timed) == len(metric) else None,
            pairs=count,
        )
        if settled is not None and settled(found):
            break
    return found
