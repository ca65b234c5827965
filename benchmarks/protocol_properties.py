"""Properties of the protocol itself, measured on the simulated backend (README: P3, P4, R1, R2).

Run: ``python benchmarks/protocol_properties.py [--runs 200]``. The simulated
backend has a known true speedup, log-normal noise per generation and a drift
per generation (a machine that slows as it heats), so error rates are counted
against the truth. Not collected by pytest: it is a study, not a test.
"""

from __future__ import annotations

import argparse
import math
import statistics

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, overall, stop_rule
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import Comparison, ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict

NOISE, DRIFT, WANDER = "0.05", "0.003", "0.01"  # log-sd per generation; slowdown per generation; random walk


def measure(speedup: float, bounds: SpeedupBounds, seed: int, order: str = "interleaved", **budget: int) -> Comparison:
    options = {"speedup": str(speedup), "noise": NOISE, "drift": DRIFT, "wander": WANDER, "seed": str(seed)}
    backend = SimulatedBackend(ModelPair("t", "d"), options)
    expect = Expectations(speedup=bounds)
    plan = ComparisonPlan(
        category="code",
        prompts=prompts_for("code"),
        baseline=Arm("plain"),
        treatment=Arm("sd", speculative=True, num_draft=3),
        max_tokens=32,
        min_trials=budget.get("min_trials", 6),
        max_trials=budget.get("max_trials", 30),
        confidence=0.95,
        stop_when=stop_rule(expect) if order == "interleaved" else None,
        precision=1e-9,
        order=order,
    )
    return run_comparison(backend, plan)


def verdict(c: Comparison, bounds: SpeedupBounds) -> Verdict | None:
    return overall(judge(Expectations(speedup=bounds), c.speedup, c.acceptance))


def rate(runs: int, speedup: float, bounds: SpeedupBounds, wanted: Verdict) -> float:
    hits = sum(verdict(measure(speedup, bounds, seed), bounds) is wanted for seed in range(runs))
    return hits / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=200)
    runs = parser.parse_args().runs
    print(
        f"simulated noise {NOISE} (log-sd per generation), drift {DRIFT} and random walk {WANDER} per generation, {runs} runs each"
    )

    neutral = SpeedupBounds(min=0.95, max=1.05)
    false_refuted = rate(runs, 1.0, neutral, Verdict.REFUTED)
    print(f"R1 false 'refuted' rate, SD == plain, bounds min=0.95 max=1.05: {false_refuted:.1%} (target <= 1 %)")

    holds = rate(runs, 1.3, SpeedupBounds(min=1.1), Verdict.HOLDS)
    refuted = rate(runs, 1.3, SpeedupBounds(max=1.1), Verdict.REFUTED)
    print(f"R2 true 1.3x: 'holds' for min=1.1 in {holds:.1%}; 'refuted' for max=1.1 in {refuted:.1%} (target >= 95 %)")

    fixed = {"min_trials": 20, "max_trials": 20}
    none = SpeedupBounds(min=1e-6)
    widths, biases, coverage = {}, {}, {}
    for order in ("interleaved", "block"):
        results = [measure(1.2, none, seed, order, **fixed) for seed in range(runs // 4)]
        widths[order] = statistics.mean(c.speedup.high / c.speedup.low for c in results)
        biases[order] = statistics.mean(c.speedup.estimate for c in results) / 1.2 - 1
        coverage[order] = statistics.mean(c.speedup.low <= 1.2 <= c.speedup.high for c in results)
    factor = (math.log(widths["block"]) / math.log(widths["interleaved"])) ** 2
    print(
        f"P3 same drift, 20 pairs: interval width ratio high/low interleaved {widths['interleaved']:.3f} vs block "
        f"{widths['block']:.3f}; block needs {factor:.1f}x the tokens for the same width; "
        f"bias interleaved {biases['interleaved']:+.1%}, block {biases['block']:+.1%}; "
        f"95 % interval covers the truth: interleaved {coverage['interleaved']:.0%}, block {coverage['block']:.0%}"
    )

    for truth in (0.9, 1.1):
        bounds = SpeedupBounds(min=1.0)
        done = [measure(truth, bounds, seed) for seed in range(runs // 2)]
        decisive = [len(c.pairs) for c in done if verdict(c, bounds) is not Verdict.INCONCLUSIVE]
        print(
            f"P4 true {truth}x vs min=1.0: decisive in {len(decisive) / len(done):.0%} of runs, "
            f"median {statistics.median(decisive) if decisive else float('nan'):.0f} pairs"
        )


if __name__ == "__main__":
    main()
