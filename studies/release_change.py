"""Does the same-night old-versus-new comparison blame the release, and only the release?

Run: ``python -m studies.release_change --runs 2000 --jobs 9`` (not collected by pytest).

Each run is one night of :func:`pytest_specdec.release_ab.run_release_ab` on two
simulated releases interleaved in one process, as the gate runs it: looks at 96 pairs
and each doubling up to the night's cap (:func:`~pytest_specdec.gate.ab_run.ab_pairs`),
stopping at the first look that settles the flip
(:func:`~pytest_specdec.gate.ab_call.settles`), judged by
:func:`pytest_specdec.gate.ab_call.blame` against ``max=1.2`` whose accepted verdict was
*holds*, on a machine that is noisy (a CV of 10 % per generation, and 15 % in some
rows), drifts (throttling 10–20 % over 96 pairs, going on at that rate over longer nights), wanders (a random walk), has
rare 2–3x slow generations, and steps (−25 % from a random generation within the first
look on, for both releases alike). Each night draws its own per-prompt effects. Rows:

* **release 1.0x → 1.3x**: red (release changed) on one night, and within two nights.
* **no release change, machine slowed**: both releases at 1.0x, the step on: a release
  issue opened (release changed or machine moved) ≤ 1 % of nights.
* **no release change, machine made SD faster**: both releases at 1.3x tonight (the
  baseline night was at 1.0x): "machine moved" (re-baseline needed), release changed ≤ 1 %.
* **release only 1.18x → 1.28x**: only the release moved, across the bound; "machine moved"
  (which needs the old release, tonight, to contradict the accepted verdict too) ≤ 2 %.
* **release +8 % across the bound, 1.15x → 1.24x**: a real flip, small: red within two nights
  ≥ 90 % (as for the +30 % step). "Within two nights" is carried over as the gate does: a
  night whose flip is not confirmed is followed by one with the cap
  :func:`~pytest_specdec.gate.ab_run.ab_pairs` gives a second night in a row (twice the first's).

"Flip not confirmed" opens no issue on its own night (one after ``undecided-nights``).
Printed with 95 % Wilson intervals, and the pairs a night took (mean / median).

``--by-level`` prints instead the "+8 %" rows' first nights by where the night's own level (its
shift and its prompts' effects) put the new release: under the bound, or by how much over it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy.stats import binomtest

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.release_pair import InProcessReleases
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.gate.ab_call import Call, blame, settles
from pytest_specdec.gate.ab_run import AB_PAIRS, ab_pairs
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.release_ab import run_release_ab
from pytest_specdec.stats import Verdict
from pytest_specdec.store.night_statistics import UNKNOWN, RunSpread

BOUND = 1.2


def machine(rng: np.random.Generator, cv: float, first: int) -> dict[str, str]:
    """A night's machine, as real ones misbehave, for a run whose first look takes ``first`` generations."""
    return {
        "noise": f"{cv:.4f}",
        # 10-20 % throttling over one look's 96 pairs, as when a night was one look: a night that looks on
        # keeps throttling at that rate (the parameter unchanged per generation)
        "drift": f"{rng.uniform(0.10, 0.20) / first:.6f}",
        "wander": "0.01",
        "outliers": "0.01",
        "prompt_spread": "0.05",
        # the step falls inside the first look, as it did when a night was one look: every night meets it
        "step_at": str(int(rng.integers(first // 4, 3 * first // 4))),
        "step": "-0.25",
    }


def night(
    old_speedup: float,
    new_speedup: float,
    rng: np.random.Generator,
    cap: int,
    cv: float,
    *,
    shift: float = 0.0,
    level: float | None = None,
    bound: float = BOUND,
) -> tuple[Call, int, float]:
    """One night on a machine that misbehaves the way real ones do: the call on ``max=bound``, the pairs it took, and
    the night's level — what both releases' speedups were multiplied by, its shift and its prompts' effects
    (these prompts' total-time reading, as ``studies/error_rates.py`` reads them).

    ``shift``: the night's own level (``level``, where the caller's nights carry one), SD's speedup for both
    releases ``× exp(N(0, shift))`` (a level shift between nights, as real machines show; ``studies/run_spread.py``), read by the gate with that spread
    known (as from many nights): the old release's reading against the accepted verdict must stand beyond it.

    The old-versus-new run looks at :data:`AB_PAIRS` pairs and each doubling up to ``cap``, stopping
    when the figures settle the flip (:func:`~pytest_specdec.gate.ab_call.settles`), as the gate runs it.
    """
    options = machine(rng, cv, 4 * (min(AB_PAIRS, cap) + 1))
    seed = int(rng.integers(1 << 30))
    if level is None:  # the night's own level, drawn here unless the caller's nights carry one
        level = float(np.exp(rng.normal(0.0, shift))) if shift else 1.0

    def release(speedup: float, offset: int) -> SimulatedBackend:
        chosen = {**options, "speedup": str(speedup), "seed": str(seed + offset), "prompt_seed": str(seed)}
        return SimulatedBackend(ModelPair("t", "d"), chosen)

    new = release(new_speedup * level, 1)
    pair = InProcessReleases(release(old_speedup * level, 0), new)
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3),
        max_tokens=32, min_trials=min(AB_PAIRS, cap), max_trials=cap, confidence=0.98, order=str(seed),
    )  # fmt: skip
    # The simulated releases time themselves; a clock that stands still leaves this process's clock out
    # of the study (no metric cross-check: it is tested where a server's counters really change).
    spread = RunSpread(shift, 30, 29) if shift else UNKNOWN
    ab = run_release_ab(
        pair, plan, clock=lambda: 0.0, settled=lambda ab: settles(ab, "max", bound, Verdict.HOLDS, spread)
    )
    return blame(ab, "max", bound, Verdict.HOLDS, spread).call, ab.pairs, level * prompts_factor(new, plan)


def prompts_factor(backend: SimulatedBackend, plan: ComparisonPlan) -> float:
    """What a night's prompts multiply its measured speedup by: the comparison reads total time, each prompt's
    mean generation once, so the factor is the inverse of the mean of the prompts' inverse effects (as
    ``studies/error_rates.py`` reads "these prompts")."""
    return 1.0 / statistics.fmean(1.0 / backend.prompt_effect(prompt.text) for prompt in plan.prompts)


def share(hits: int, runs: int) -> str:
    low, high = binomtest(hits, runs).proportion_ci(method="wilson")
    return f"{hits / runs:.2%} [{low:.2%}, {high:.2%}]"


ROWS = (
    (0.10, "release 1.0x → 1.3x", 1.0, 1.3),
    (0.10, "no release change, machine slowed", 1.0, 1.0),
    (0.10, "no release change, machine made SD faster", 1.3, 1.3),
    (0.15, "release 1.0x → 1.3x", 1.0, 1.3),
    (0.15, "no release change, machine made SD faster", 1.3, 1.3),
    (0.10, "release only 1.18x → 1.28x", 1.18, 1.28),
    (0.15, "release only 1.18x → 1.28x", 1.18, 1.28),
    (0.10, "release +8 % across the bound, 1.15x → 1.24x", 1.15, 1.242),
    (0.15, "release +8 % across the bound, 1.15x → 1.24x", 1.15, 1.242),
)


def row(index: int, runs: int, seed: int, shift: float = 0.0) -> str:
    """One row of the table: ``runs`` first nights, each not-confirmed one carried into a second night."""
    cv, label, old, new = ROWS[index]
    rng = np.random.default_rng([seed, index])
    first, _ = ab_pairs(0, 0.0, None)
    second, _ = ab_pairs(1, 0.0, None)  # a flip not confirmed is re-measured the next night with a doubled cap
    nights = [night(old, new, rng, first, cv, shift=shift) for _ in range(runs)]
    calls = [call for call, _, _ in nights]
    red = [c is Call.RELEASE_CHANGED for c in calls]
    doubles, triples = len(red) // 2, len(red) // 3
    two = sum(
        red[i]
        or (calls[i] is Call.NOT_CONFIRMED and night(old, new, rng, second, cv, shift=shift)[0] is Call.RELEASE_CHANGED)
        for i in range(doubles)
    )
    within = sum(any(red[3 * i : 3 * i + 3]) for i in range(triples))
    counts = [sum(c is call for c in calls) for call in (Call.MACHINE_MOVED, Call.NOT_CONFIRMED, Call.METRIC_CHANGED)]
    pairs = sorted(p for _, p, _ in nights)
    return (
        f"| {cv:.0%} | {label} | {share(sum(red), len(red))} | {share(two, doubles)} | {share(within, triples)} | "
        + " | ".join(share(n, len(calls)) for n in counts)
        + f" | {np.mean(pairs):.0f} / {pairs[len(pairs) // 2]} |"
    )


BANDS = (  # where the night's level put the new release: its speedup over the bound, less one
    (-math.inf, 0.0, "under the bound"),
    (0.0, 0.02, "0–2 % over it"),
    (0.02, 0.04, "2–4 % over it"),
    (0.04, 0.06, "4–6 % over it"),
    (0.06, math.inf, "6 % or more over it"),
)


def by_level(index: int, runs: int, seed: int, shift: float) -> list[str]:
    """Rows of the first-night table by how far the night's own level (its shift and its prompts) put the new
    release over the bound: where nights wander, a small flip is not there on every night."""
    cv, label, old, new = ROWS[index]
    rng = np.random.default_rng([seed, index])
    first, _ = ab_pairs(0, 0.0, None)
    nights = [night(old, new, rng, first, cv, shift=shift) for _ in range(runs)]
    over = np.array([new * level / BOUND - 1 for _, _, level in nights])
    red = np.array([call is Call.RELEASE_CHANGED for call, _, _ in nights])
    pairs = np.array([taken for _, taken, _ in nights])
    lines = []
    for low, high, band in BANDS:
        inside = (over >= low) & (over < high)
        count = int(inside.sum())
        cells = f"{share(int(red[inside].sum()), count)} | {pairs[inside].mean():.0f}" if count else "- | -"
        lines.append(f"| {cv:.0%} | {label} | {band} | {count / runs:.1%} | {cells} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=1, help="rows measured in parallel processes")
    parser.add_argument("--night-shift", type=float, default=0.0, help="sd of each night's level (log speedup)")
    parser.add_argument(
        "--by-level", action="store_true", help="the +8 %% rows' first nights by where the night put the new release"
    )
    args = parser.parse_args()
    started = time.monotonic()
    if args.by_level:
        print(f"{args.runs} first nights per row, nights' levels ±{args.night_shift:.0%}, max={BOUND:g}")
        print("| CV | row | the night's new release | nights | release changed | pairs, mean |")
        print("|---|---|---|---|---|---|")
        small = [index for index, (_, label, _, _) in enumerate(ROWS) if label.startswith("release +8 %")]
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for lines in pool.map(by_level, small, [args.runs] * len(small), [args.seed] * len(small),
                                  [args.night_shift] * len(small)):  # fmt: skip
                print("\n".join(lines), flush=True)
        print(f"({time.monotonic() - started:.0f} s)")
        return
    first, _ = ab_pairs(0, 0.0, None)
    print(f"{args.runs} nights per row, looks at {AB_PAIRS} pairs up to {first}, max={BOUND:g} (accepted: holds), "
          f"nights' levels ±{args.night_shift:.0%}")  # fmt: skip
    print(
        "| CV | row | release changed | within two nights (carried) | within three nights "
        "| machine moved (re-baseline) | flip not confirmed | metric changed | pairs a night, mean / median |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = len(ROWS)
        for line in pool.map(row, range(rows), [args.runs] * rows, [args.seed] * rows, [args.night_shift] * rows):
            print(line, flush=True)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
