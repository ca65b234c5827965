"""Is speculation live? The predictable-vs-unpredictable probe, for backends that
report no drafted or accepted counts (Ollama).

Drafting pays off only when the drafter guesses right, and guessing is easy on text
the prompt already contains. So with SD live, decode on a copy-this prompt is faster
than on a random-words prompt of equal length; with SD off, decode speed does not
depend on content and the ratio is ≈ 1. The probe runs both arms on equal-length
pairs and compares the two ratios: the SD arm's content dependence over the plain
arm's, as a paired geometric mean with an interval.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from pytest_specdec.backends.base import Arm, Backend
from pytest_specdec.measure import Clock, ComparisonPlan, run_trial
from pytest_specdec.prompts import probe_prompts
from pytest_specdec.stats import Interval, speedup_interval


@dataclass(frozen=True)
class EngagementProbe:
    """Content dependence of decode speed in each arm, and their contrast."""

    sd_ratio: Interval  # predictable tok/s ÷ unpredictable tok/s, SD arm
    plain_ratio: Interval  # the same for the plain arm (≈ 1)
    contrast: Interval  # sd_ratio ÷ plain_ratio, paired

    @property
    def live(self) -> bool | None:
        """True when SD is shown live, False when shown absent, None when unclear."""
        if self.contrast.low > 1.0:
            return True
        if self.contrast.high < 1.05:
            return False
        return None

    def describe(self) -> str:
        """One line for the report."""
        s, p = self.sd_ratio, self.plain_ratio
        verdict = {True: "SD is live", False: "no sign of SD (content does not change its speed)", None: "unclear"}[
            self.live
        ]
        return (
            f"engagement probe: predictable/unpredictable decode ratio {s.estimate:.2f} [{s.low:.2f}, {s.high:.2f}] "
            f"with SD vs {p.estimate:.2f} [{p.low:.2f}, {p.high:.2f}] without → {verdict}"
        )


def probe_engagement(
    backend: Backend,
    *,
    baseline: Arm,
    treatment: Arm,
    max_tokens: int,
    confidence: float,
    rounds: int = 2,
    clock: Clock = time.perf_counter,
) -> EngagementProbe:
    """Run both arms on every probe pair ``rounds`` times, interleaved."""
    pairs = probe_prompts() * rounds
    plan = ComparisonPlan(
        "probe", tuple(p for pair in pairs for p in pair), baseline, treatment, max_tokens, 2, 2, confidence
    )
    sd_logs: list[float] = []
    plain_logs: list[float] = []
    for predictable, unpredictable in pairs:
        ratios = {}
        for arm in (baseline, treatment):
            fast = run_trial(backend, predictable, arm, plan, clock)
            slow = run_trial(backend, unpredictable, arm, plan, clock)
            ratios[arm.label] = math.log(fast.decode_tps / slow.decode_tps)
        plain_logs.append(ratios[baseline.label])
        sd_logs.append(ratios[treatment.label])
    contrast = [s - p for s, p in zip(sd_logs, plain_logs, strict=True)]
    return EngagementProbe(
        speedup_interval(sd_logs, confidence),
        speedup_interval(plain_logs, confidence),
        speedup_interval(contrast, confidence),
    )
