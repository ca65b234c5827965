"""``pytest-specdec calibrate``: this machine's noise, and what the default design can decide with it.

It runs A/A pairs on the configured backend — the plain arm twice, back to back, on
the category's prompts, in the design's pair order — so every pair's ratio is pure
measurement noise. From them it prints the noise (the log-sd per pair and the share
of stalls), then replays the group-sequential design on A/A pairs resampled per
prompt, each replayed pair's two arms swapped by a coin: a world whose true speedup
is exactly 1 by symmetry (no estimate of it is needed). The SD arm's seconds divided
by a chosen true speedup give the power curve, i.e. the smallest true speedup each
bound is decided against, in 90 % of replays, within the budget ("with this noise,
``min=1.2`` needs a true ≥ 1.34x within 72 pairs"). The false-decision rate comes
with its Wilson interval over the replays; the pairs measured bound how well it can
be known: across 40 simulated machines with the same noise (Student-t, CV 10 %), 32
A/A pairs read 0.35–1.95 % and the default 64 read 0.40–1.00 %
(``python -m studies.calibration_spread --machines 40``, docs/measurements.md).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from scipy.stats import binomtest

from pytest_specdec.backends.base import Arm, Backend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, Pair, run_trial
from pytest_specdec.measure.looks import futile_at, look_at
from pytest_specdec.sequential import hiccups, look_schedule, pair_schedule
from pytest_specdec.stats import Verdict

POWER = 0.90
FALSE_DECISION_REPLAYS = 2000
POWER_REPLAYS = 200
TRUTHS = (0.70, 0.80, 0.85, 0.90, 0.95, 1.05, 1.10, 1.15, 1.20, 1.25, 1.30, 1.35, 1.40, 1.50, 1.60, 1.80, 2.00)
BOUNDS = (SpeedupBounds(max=1.0), SpeedupBounds(min=1.0), SpeedupBounds(min=1.2), SpeedupBounds(max=1.3))


@dataclass(frozen=True)
class Calibration:
    """What the A/A pairs showed, and what the design does with that noise."""

    pairs: int
    log_sd: float
    outlier_share: float
    false_decisions: float  # A/A at the bound (max=1.0), share of replays that refuted it
    replays: int
    needed: tuple[tuple[str, float | None], ...]  # bound → smallest (or largest) truth decided in 90 %

    def lines(self, budget: int) -> list[str]:
        """The report."""
        low, high = binomtest(round(self.false_decisions * self.replays), self.replays).proportion_ci(method="wilson")
        shown = [
            f"A/A pairs measured: {self.pairs}; noise: log-sd {self.log_sd:.3f} per pair "
            f"(CV ≈ {self.log_sd / math.sqrt(2):.1%} per generation), stalls (hiccups) {self.outlier_share:.1%} of pairs",
            f"A/A replays at the bound max=1.0: wrong decisive verdict in {self.false_decisions:.1%} "
            f"[{low:.1%}, {high:.1%}] over {self.replays} replays of these {self.pairs} pairs (target ≤ 1 %); "
            "other A/A pairs can read differently: measure more pairs to narrow that",
        ]
        for label, truth in self.needed:
            shown.append(
                f"with this noise, {label} needs a true ≥ {truth:.2f}x to be decided within {budget} pairs "
                f"({POWER:.0%} of replays)"
                if truth is not None
                else f"with this noise, {label} is not decided within {budget} pairs for any true speedup up to "
                f"{TRUTHS[-1]:.2f}x"
            )
        return shown


Noise = Sequence[tuple[str, float, float]]  # (prompt id, plain seconds, plain-again seconds)


def measure_aa(backend: Backend, category: str, pairs: int, max_tokens: int, progress: Callable[[int], None]) -> Noise:
    """``pairs`` A/A pairs (the plain arm twice) in the protocol's pair order: prompt, and each one's seconds."""
    prompts = prompts_for(category)
    first, second = Arm("plain"), Arm("plain-again")
    plan = ComparisonPlan(category, prompts, first, second, max_tokens, 2, pairs, 0.98).with_order()
    run_trial(backend, prompts[0], first, plan, time.perf_counter)  # warm-up
    noise = []
    for index, (prompt_index, swap) in enumerate(pair_schedule(len(prompts), pairs, plan.order)):
        arms = (second, first) if swap else (first, second)
        a, b = (run_trial(backend, prompts[prompt_index], arm, plan, time.perf_counter) for arm in arms)
        plain, again = (b, a) if swap else (a, b)
        tokens = plain.decode_tokens
        noise.append((prompts[prompt_index].id, tokens / plain.decode_tps, tokens / again.decode_tps))
        progress(index + 1)
    return noise


def replay(noise: Noise, truth: float, bounds: SpeedupBounds, budget: int, *, seed: int, confidence: float) -> Verdict:
    """One run of the design users run (looks, spending, futility) on A/A pairs resampled per prompt.

    Each replayed pair's arms are swapped by a coin, so the world replayed has a true
    speedup of exactly 1; the SD arm's seconds divided by ``truth`` make it ``truth``.
    """
    import random

    rng = random.Random(seed)
    by_prompt: dict[str, list[tuple[float, float]]] = {}
    for prompt_id, plain, again in noise:
        by_prompt.setdefault(prompt_id, []).append((plain, again))
    expect = Expectations(speedup=bounds)
    prompts = [p for p in prompts_for("all") if p.id in by_prompt] or list(prompts_for("code"))
    plan = ComparisonPlan(
        "calibration",
        tuple(prompts),
        Arm("plain"),
        Arm("sd", speculative=True, num_draft=3),
        16,
        16,
        budget,
        1.0 - (1.0 - confidence) / expect.bound_count,
        stop_when=stop_rule(expect),
        bounds=tuple(b for b in (bounds.min, bounds.max) if b is not None),
    )
    looks = look_schedule(len(prompts), plan.min_trials, budget)
    pool = [(plain, again) for _, plain, again in noise]
    pairs: list[Pair] = []
    for index, (prompt_index, _) in enumerate(pair_schedule(len(prompts), looks[-1], str(seed))):
        prompt = prompts[prompt_index]
        a, b = rng.choice(by_prompt.get(prompt.id) or pool)
        plain, sd = (b, a) if rng.random() < 0.5 else (a, b)
        pairs.append(_pair(index, prompt.id, plain, sd / truth))
        if len(pairs) in looks:
            look = look_at(plan, pairs, looks)
            verdicts = judge(expect, look.speedup, None)
            decided = all(v.verdict is not Verdict.INCONCLUSIVE for v in verdicts)
            if decided or len(pairs) == looks[-1] or futile_at(plan, look, looks):
                return verdicts[0].verdict
    return Verdict.INCONCLUSIVE


def _pair(index: int, prompt_id: str, plain_s: float, sd_s: float) -> Pair:
    from pytest_specdec.measure import Trial

    plain = Trial("plain", prompt_id, (), 1, 0.0, plain_s, 10)
    treated = Trial("sd", prompt_id, (), 1, 0.0, sd_s, 10)
    return Pair(index, prompt_id, "plain", plain, treated)


def calibrate(
    noise: Noise,
    budget: int,
    confidence: float = 0.98,
    replays: int = FALSE_DECISION_REPLAYS,
    power_replays: int = POWER_REPLAYS,
) -> Calibration:
    """Noise figures, the A/A false-decision rate at the bound, and each bound's power threshold."""
    values = [math.log(plain / again) for _, plain, again in noise]
    stalls = hiccups([plain for _, plain, _ in noise], [again for _, _, again in noise], [p for p, _, _ in noise])
    wrong = sum(
        replay(noise, 1.0, SpeedupBounds(max=1.0), budget, seed=s, confidence=confidence) is Verdict.REFUTED
        for s in range(replays)
    )
    needed = []
    for bounds in BOUNDS:
        value = bounds.min if bounds.min is not None else bounds.max
        assert value is not None
        found = None
        for truth in (t for t in TRUTHS if t > value):  # how far above the bound SD must be to be told apart
            decided = sum(
                replay(noise, truth, bounds, budget, seed=s, confidence=confidence) is not Verdict.INCONCLUSIVE
                for s in range(power_replays)
            )
            if decided >= POWER * power_replays:
                found = truth
                break
        needed.append((bounds.describe(), found))
    return Calibration(
        pairs=len(values),
        log_sd=statistics.stdev(values),
        outlier_share=len(stalls) / len(values),
        false_decisions=wrong / replays,
        replays=replays,
        needed=tuple(needed),
    )
