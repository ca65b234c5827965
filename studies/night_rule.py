"""Does the gate's whole night — first reading, more pairs when undecided, old-versus-new run — meet its alert targets?

Run: ``python -m studies.night_rule --stretches 400 --jobs 16`` (not collected by pytest).

Each stretch is consecutive nights of one claim ``speedup(max=bound)`` whose accepted verdict is *holds*. A night:

1. **First reading**: the plugin's :func:`~pytest_specdec.measure.run_comparison` with the gate's default
   design (16 to 72 pairs of the four ``code`` prompts, 32 tokens, looks after whole blocks, futility) on
   the simulated backend, judged by :func:`~pytest_specdec.claims.judge`, on a machine that misbehaves as
   ``studies/release_change.py``'s does (CV 10 % per generation, throttling, wander, outliers, a −25 % step);
   its level moves from night to night as AR(1) (ρ 0.3) with a 3 % shift.
2. **More pairs**: a reading inconclusive against the decisive accepted verdict (undecided) is measured again
   at once with the cap :func:`~pytest_specdec.gate.more_pairs.more_pairs` gives (its window assumed to allow
   it); ``--no-more-pairs`` leaves it undecided, as the gate did before.
3. **Flip**: a reading refuted against the accepted *holds* is a flip, called by the old-versus-new run
   (``studies/release_change.py``'s night, at :func:`~pytest_specdec.gate.ab_run.ab_pairs`' cap for the flip's
   nights in a row): "release changed" is red; "machine moved" opens a re-baseline issue.
4. **Issues**: undecided (or flip not confirmed) on ``undecided-nights`` (3) nights in a row opens "undecided for
   nights", as :func:`~pytest_specdec.gate.findings.claim_findings` counts them.

Rows: a release that moves the truth +8 % across the bound (1.15x → 1.24x against max=1.2: red within three
nights, goal ≥ 80 % at CV 10 %), and quiet ten-night stretches at 1.2x against max=1.3 (goal: "undecided for
nights" issues ≤ 5 % of stretches). Shares with 95 % Wilson intervals; pairs a night, mean.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.gate.ab_call import Call
from pytest_specdec.gate.ab_run import ab_pairs
from pytest_specdec.gate.more_pairs import more_pairs
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict
from studies.release_change import machine, night, share

UNDECIDED_NIGHTS = 3  # [tool.specdec.gate] undecided-nights' default
RHO, SHIFT = 0.3, 0.03  # nights' levels: AR(1) on the log speedup


@dataclass(frozen=True)
class Row:
    label: str
    old: float  # the accepted night's release
    new: float  # tonight's release, from the first night on
    bound: float
    nights: int
    cv: float = 0.10


ROWS = (
    Row("release +8 % across the bound, 1.15x → 1.24x (max=1.2)", 1.15, 1.242, 1.2, 3),
    Row("quiet, 1.2x against max=1.3, ten nights", 1.2, 1.2, 1.3, 10),
    Row("release +8 % across the bound, 1.15x → 1.24x (max=1.2)", 1.15, 1.242, 1.2, 3, 0.15),
    Row("quiet, 1.2x against max=1.3, ten nights", 1.2, 1.2, 1.3, 10, 0.15),
)


def reading(truth: float, row: Row, rng: np.random.Generator, cap: int) -> tuple[Verdict, int]:
    """One reading of the claim at up to ``cap`` pairs on tonight's machine: its verdict and the pairs it took."""
    settings = Settings()
    expect = Expectations(speedup=SpeedupBounds(max=row.bound))
    seed = int(rng.integers(1 << 30))
    options = {**machine(rng, row.cv, 2 * (cap + 1)), "speedup": repr(truth), "seed": str(seed),
               "prompt_seed": str(seed)}  # fmt: skip
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3), max_tokens=32,
        min_trials=min(settings.min_trials, cap), max_trials=cap, confidence=settings.confidence,
        stop_when=stop_rule(expect), bounds=(row.bound,), order=str(seed),
    )  # fmt: skip
    comparison = run_comparison(SimulatedBackend(ModelPair("t", "d"), options), plan)
    (judged,) = judge(expect, comparison.speedup, comparison.acceptance)
    return judged.verdict, len(comparison.pairs)


def stretch(row: Row, seed: int, more: bool) -> tuple[bool, bool, bool, int]:
    """One stretch of nights: whether it went red (release changed), opened "undecided for nights", opened a
    re-baseline issue (machine moved), and the pairs its nights took."""
    rng = np.random.default_rng(seed)
    log_level, undecided, flipped, pairs = 0.0, 0, 0, 0
    red = stuck = moved = False
    design = Settings().max_trials
    for _ in range(row.nights):
        log_level = RHO * log_level + float(rng.normal(0.0, SHIFT))
        level = float(np.exp(log_level))
        verdict, taken = reading(row.new * level, row, rng, design)
        pairs += taken
        if verdict is Verdict.INCONCLUSIVE and more:
            cap, _ = more_pairs(design, undecided, 0.0, None)
            verdict, taken = reading(row.new * level, row, rng, cap)
            pairs += taken
        if verdict is Verdict.REFUTED:  # against the accepted holds: a flip, called by the old-versus-new run
            cap, _ = ab_pairs(flipped, 0.0, None)
            call, taken, _ = night(row.old, row.new, rng, cap, row.cv, shift=SHIFT, level=level, bound=row.bound)
            pairs += taken
            red |= call is Call.RELEASE_CHANGED
            moved |= call is Call.MACHINE_MOVED
            flipped, undecided = (flipped + 1, 0) if call is Call.NOT_CONFIRMED else (0, 0)
        elif verdict is Verdict.INCONCLUSIVE:
            undecided, flipped = undecided + 1, 0
        else:
            undecided = flipped = 0
        stuck |= max(undecided, flipped) >= UNDECIDED_NIGHTS
        if red:
            break
    return red, stuck, moved, pairs


def counts(job: tuple[int, int, int, bool]) -> tuple[int, int, int, int, int]:
    """One block of a row's stretches: how many, and how many went red, stuck, moved; the pairs they took."""
    index, stretches, seed, more = job
    found = [stretch(ROWS[index], seed * 1_000_003 + index * 10_007 + k, more) for k in range(stretches)]
    red, stuck, moved = (sum(f[i] for f in found) for i in range(3))
    return stretches, red, stuck, moved, sum(f[3] for f in found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stretches", type=int, default=400)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--no-more-pairs", action="store_true", help="only the rule before: undecided waits")
    args = parser.parse_args()
    started = time.monotonic()
    rows = [(index, more) for more in ([False] if args.no_more_pairs else [True, False]) for index in range(len(ROWS))]
    blocks = max(1, -(-args.jobs * 4 // len(rows)))  # each row in blocks, so every process stays busy
    size = -(-args.stretches // blocks)
    jobs = [(index, size, args.seed * 101 + block, more) for index, more in rows for block in range(blocks)]
    print(f"{size * blocks} stretches a row, nights' levels AR(1) ρ={RHO} with a {SHIFT:.0%} shift, "
          f"undecided-nights {UNDECIDED_NIGHTS}, the old-versus-new run as studies/release_change.py's")  # fmt: skip
    print("| CV | row | more pairs | red (release changed) | undecided for nights | machine moved | pairs a night |")
    print("|---|---|---|---|---|---|---|")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        found = list(pool.map(counts, jobs))
    for at, (index, more) in enumerate(rows):
        n, red, stuck, moved, pairs = (sum(c[i] for c in found[at * blocks : (at + 1) * blocks]) for i in range(5))
        row = ROWS[index]
        print(f"| {row.cv:.0%} | {row.label} | {'yes' if more else 'no'} | {share(red, n)} | {share(stuck, n)} | "
              f"{share(moved, n)} | {pairs / (n * row.nights):.0f} |")  # fmt: skip
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
