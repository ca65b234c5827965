"""Does the same-night old-versus-new comparison blame the release, and only the release?

Run: ``python benchmarks/release_change.py --runs 2000`` (not collected by pytest).

Each run is one night of :func:`pytest_specdec.release_ab.run_release_ab` on two
simulated releases interleaved in one process, judged by
:func:`pytest_specdec.gate.change.blame` against ``max=1.2`` whose accepted verdict was
*holds*, on a machine that is noisy (a CV of 10 % per generation, and 15 % in the
second table), drifts (throttling 10–20 % over the run), wanders (a random walk), has
rare 2–3x slow generations, and steps (−25 % from a random generation on, for both
releases alike). Rows:

* **release 1.0x → 1.3x**: red (release changed) on one night, and within three nights;
  targets ≥ 90 % and ≥ 99 %.
* **no release change, machine slowed**: both releases at 1.0x, the step on: a release
  issue opened (release changed) ≤ 1 % of nights.
* **no release change, machine made SD faster**: both releases at 1.3x tonight (the
  baseline night was at 1.0x): the old protocol would confirm a flip on the upgraded
  machine; this one must say "machine moved" (re-baseline needed), release changed ≤ 1 %.
* **release only 1.18x → 1.28x**: only the release moved, across the bound; "machine moved"
  (which needs the old release, tonight, to contradict the accepted verdict too) ≤ 2 %.
* **release +8 % across the bound, 1.15x → 1.24x**: a real flip, small: red within two nights
  ≥ 90 % (as for the +30 % step, 1.0x → 1.3x). "Within two nights" is carried over as the gate
  does: a night whose flip is not confirmed is followed by one with the pairs
  :func:`~pytest_specdec.gate.blame.ab_pairs` gives a second night (twice as many).

A night where nothing changed (the "machine slowed" row) opens an issue when it is called
"release changed" or "machine moved": ≤ 1 %. "Flip not confirmed" opens none on its own night.
Printed with 95 % Wilson intervals.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.release_pair import InProcessReleases
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.gate.blame import AB_PAIRS, ab_pairs
from pytest_specdec.gate.change import Call, blame
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.release_ab import run_release_ab
from pytest_specdec.stats import Verdict, wilson_interval

BOUND = 1.2


def night(old_speedup: float, new_speedup: float, rng: np.random.Generator, pairs: int, cv: float) -> Call:
    """One night on a machine that misbehaves the way real ones do; the call on max=1.2."""
    generations = 4 * (pairs + 1)
    machine = {
        "noise": f"{cv:.4f}",
        "drift": f"{rng.uniform(0.10, 0.20) / generations:.6f}",  # 10-20 % throttling over the night
        "wander": "0.01",
        "outliers": "0.01",
        "prompt_spread": "0.05",
        "step_at": str(int(rng.integers(generations // 4, 3 * generations // 4))),
        "step": "-0.25",
    }
    seed = int(rng.integers(1 << 30))

    def release(speedup: float, offset: int) -> SimulatedBackend:
        options = {**machine, "speedup": str(speedup), "seed": str(seed + offset), "prompt_seed": str(seed)}
        return SimulatedBackend(ModelPair("t", "d"), options)

    pair = InProcessReleases(release(old_speedup, 0), release(new_speedup, 1))
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3),
        max_tokens=32, min_trials=pairs, max_trials=pairs, confidence=0.98,
    )  # fmt: skip
    # The simulated releases time themselves; a clock that stands still leaves this process's clock out
    # of the study (no metric cross-check: it is tested where a server's counters really change).
    return blame(run_release_ab(pair, plan, clock=lambda: 0.0), "max", BOUND, Verdict.HOLDS).call


def share(hits: int, runs: int) -> str:
    low, high = wilson_interval(hits, runs)
    return f"{hits / runs:.2%} [{low:.2%}, {high:.2%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--pairs", type=int, default=AB_PAIRS, help="pairs of quadruples per night (the gate's)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.monotonic()
    print(f"{args.runs} nights per row, {args.pairs} pairs each, max={BOUND:g} (accepted: holds)")
    print(
        "| CV | row | release changed | within two nights | within three nights | machine moved (re-baseline) "
        "| flip not confirmed | metric changed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for cv, label, old, new in (
        (0.10, "release 1.0x → 1.3x", 1.0, 1.3),
        (0.10, "no release change, machine slowed", 1.0, 1.0),
        (0.10, "no release change, machine made SD faster", 1.3, 1.3),
        (0.15, "release 1.0x → 1.3x", 1.0, 1.3),
        (0.15, "no release change, machine made SD faster", 1.3, 1.3),
        (0.10, "release only 1.18x → 1.28x", 1.18, 1.28),
        (0.15, "release only 1.18x → 1.28x", 1.18, 1.28),
        (0.10, "release +8 % across the bound, 1.15x → 1.24x", 1.15, 1.242),
        (0.15, "release +8 % across the bound, 1.15x → 1.24x", 1.15, 1.242),
    ):
        calls = [night(old, new, rng, args.pairs, cv) for _ in range(args.runs)]
        red = [c is Call.RELEASE_CHANGED for c in calls]
        doubles, triples = len(red) // 2, len(red) // 3
        # Carried over as the gate does: a flip not confirmed is re-measured the next night with the pairs
        # ab_pairs gives its second night (double); red within two nights is either night red.
        second, _ = ab_pairs(1, 0.0, None)
        two = sum(
            red[i] or (calls[i] is Call.NOT_CONFIRMED and night(old, new, rng, second, cv) is Call.RELEASE_CHANGED)
            for i in range(doubles)
        )
        within = sum(any(red[3 * i : 3 * i + 3]) for i in range(triples))
        counts = [
            sum(c is call for c in calls) for call in (Call.MACHINE_MOVED, Call.NOT_CONFIRMED, Call.METRIC_CHANGED)
        ]
        print(f"| {cv:.0%} | {label} | {share(sum(red), len(red))} | {share(two, doubles)} | {share(within, triples)} | "
              + " | ".join(share(n, len(calls)) for n in counts) + " |")  # fmt: skip
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
