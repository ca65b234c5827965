"""A/A on real hardware: the design's false-decision rate and coverage with this machine's own noise.

Run: ``python -m studies.real_aa [--runs 20] [--backend mlx]`` (README: "Statistics").
Not collected by pytest.

Each run is one full comparison with the default design (blocks of the ``code``
prompts, looks after whole blocks, HSD spending, the total-time ratio estimate,
``max_trials`` 72) where both arms are the *plain* arm of the embedded pair: the true
speedup is exactly 1, so a decisive verdict against ``max=1.0`` is a false decision and
an interval that misses 1.0 is a coverage failure. Wilson 95 % intervals.
"""

from __future__ import annotations

import argparse
import time

from scipy.stats import binomtest

from pytest_specdec.backends import load_backend, profile_pairs
from pytest_specdec.backends.base import Arm
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--backend", default="mlx")
    parser.add_argument("--max-tokens", type=int, default=16)
    args = parser.parse_args()
    settings = Settings(backend=args.backend)
    backend = load_backend(args.backend, profile_pairs("embedded")[args.backend], {})
    expect = Expectations(speedup=SpeedupBounds(max=1.0))
    wrong = covered = 0
    pairs = []
    started = time.monotonic()
    for run in range(args.runs):
        plan = ComparisonPlan(
            "code",
            prompts_for("code"),
            Arm("plain"),
            Arm("plain-again"),
            args.max_tokens,
            settings.min_trials,
            settings.max_trials,
            settings.confidence,
            stop_when=stop_rule(expect),
            bounds=(1.0,),
        )
        comparison = run_comparison(backend, plan)
        (bound,) = judge(expect, comparison.speedup, None)
        wrong += bound.verdict is Verdict.REFUTED
        covered += comparison.speedup.low <= 1.0 <= comparison.speedup.high
        pairs.append(len(comparison.pairs))
        s = comparison.speedup
        print(
            f"  run {run + 1}/{args.runs}: {s.estimate:.3f}x [{s.low:.3f}, {s.high:.3f}] {bound.verdict.value}, "
            f"{len(comparison.pairs)} pairs ({time.monotonic() - started:.0f} s)",
            flush=True,
        )
    backend.close()
    n = args.runs
    low, high = binomtest(wrong, n).proportion_ci(method="wilson")
    print(f"{args.backend}, embedded pair, A/A against max=1.0, {n} runs, {args.max_tokens} tokens:")
    print(f"  wrong decisive verdicts: {wrong}/{n} = {wrong / n:.1%} [{low:.1%}, {high:.1%}]")
    low, high = binomtest(covered, n).proportion_ci(method="wilson")
    print(f"  coverage of 1.0: {covered}/{n} = {covered / n:.1%} [{low:.1%}, {high:.1%}]")
    print(f"  pairs per run: mean {sum(pairs) / n:.1f}")


if __name__ == "__main__":
    main()
