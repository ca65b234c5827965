"""Error rates, power and coverage of the protocol under realistic conditions (README: "Statistics").

Run: ``python benchmarks/error_rates.py [--runs 2000]``. Not collected by pytest.

Every run is the plugin's own :func:`~pytest_specdec.measure.run_comparison` with its
default design (blocks of the four ``code`` prompts, looks after whole blocks, the
Hwang–Shih–DeCani spending, the stratified Huber estimate, futility, ``max_trials`` 72)
on the simulated backend with realistic trouble: a machine that slows by 15 % over the
run (throttling, shared by both arms), a random walk of its speed, per-generation
noise with CV 10 %, one generation in fifty running 2–3x slow, and in the last rows
per-prompt speedups that differ (then "these prompts" have a truth of their own: the
coverage columns count it). Each figure comes with a Wilson 95 % interval.
"""

from __future__ import annotations

import argparse
import math
import statistics
from dataclasses import dataclass

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict, wilson_interval

REALISTIC = {"noise": "0.1", "drift": "0.0011", "wander": "0.01", "outliers": "0.02"}


@dataclass(frozen=True)
class Scenario:
    """A true speedup and the bounds a test states about it."""

    name: str
    truth: float
    bounds: SpeedupBounds
    wrong: Verdict  # the verdict that would be an error here
    prompt_spread: float = 0.0  # log-sd of per-prompt speedups around the truth


SCENARIOS = (
    Scenario("A/A vs max=1.0", 1.0, SpeedupBounds(max=1.0), Verdict.REFUTED),
    Scenario("A/A vs min=1.0", 1.0, SpeedupBounds(min=1.0), Verdict.REFUTED),
    Scenario("1.3x vs min=1.2", 1.3, SpeedupBounds(min=1.2), Verdict.REFUTED),
    Scenario("1.3x vs max=1.0", 1.3, SpeedupBounds(max=1.0), Verdict.HOLDS),
    Scenario("0.9x vs min=1.0", 0.9, SpeedupBounds(min=1.0), Verdict.HOLDS),
    Scenario("1.1x vs min=1.0", 1.1, SpeedupBounds(min=1.0), Verdict.REFUTED),
    Scenario("1.3x vs min=1.2, prompts differ (log-sd 0.1)", 1.3, SpeedupBounds(min=1.2), Verdict.REFUTED, 0.1),
    Scenario("0.9x vs min=1.0, prompts differ (log-sd 0.2)", 0.9, SpeedupBounds(min=1.0), Verdict.HOLDS, 0.2),
)


def one_run(scenario: Scenario, seed: int, settings: Settings) -> tuple[Verdict, int, bool, bool]:
    """One comparison: its verdict, pairs used, and whether each reading's interval covered its truth."""
    options = {
        **REALISTIC,
        "speedup": str(scenario.truth),
        "seed": str(seed),
        "prompt_spread": str(scenario.prompt_spread),
    }
    backend = SimulatedBackend(ModelPair("t", "d"), options)
    expect = Expectations(speedup=scenario.bounds)
    plan = ComparisonPlan(
        "code",
        prompts_for("code"),
        Arm("plain"),
        Arm("sd", speculative=True, num_draft=3),
        max_tokens=16,
        min_trials=settings.min_trials,
        max_trials=settings.max_trials,
        confidence=1.0 - (1.0 - settings.confidence) / expect.bound_count,
        stop_when=stop_rule(expect),
        bounds=tuple(b for b in (scenario.bounds.min, scenario.bounds.max) if b is not None),
    )
    comparison = run_comparison(backend, plan)
    (bound,) = judge(expect, comparison.speedup, comparison.acceptance)
    these = scenario.truth * math.exp(statistics.fmean(math.log(backend._prompt_effect(p.text)) for p in plan.prompts))
    covered = comparison.speedup.low <= these <= comparison.speedup.high
    other = comparison.other_reading
    covered_like = other is not None and other.low <= scenario.truth <= other.high
    return bound.verdict, len(comparison.pairs), covered, covered_like


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    settings = Settings(backend="simulated")
    print(
        f"{args.runs} runs per scenario; realistic conditions: {REALISTIC}; defaults: max_trials {settings.max_trials}"
    )
    print(
        "| scenario | holds | refuted | decided | wrong | mean / median pairs | coverage (these prompts) | coverage (prompts like these) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        results = [one_run(scenario, seed, settings) for seed in range(args.runs)]
        n = len(results)
        holds = sum(r[0] is Verdict.HOLDS for r in results)
        refuted = sum(r[0] is Verdict.REFUTED for r in results)
        decided = holds + refuted
        wrong = sum(r[0] is scenario.wrong for r in results)
        pairs = [r[1] for r in results]
        cover = sum(r[2] for r in results)
        cover_like = sum(r[3] for r in results)

        def shown(hits: int, n: int = n) -> str:
            low, high = wilson_interval(hits, n)
            return f"{hits / n:.1%} [{low:.1%}, {high:.1%}]"

        print(
            f"| {scenario.name} | {shown(holds)} | {shown(refuted)} | {shown(decided)} | {shown(wrong)} | "
            f"{statistics.fmean(pairs):.1f} / {statistics.median(pairs):.0f} | {shown(cover)} | {shown(cover_like)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
