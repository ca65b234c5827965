"""Does drift stay quiet when only the night changed, and catch a real move, once nights differ in level?

Run: ``python benchmarks/run_spread.py --machines 1000 --jobs 16`` (not collected by pytest).

Each simulated machine is the night model of ``benchmarks/release_change.py`` (CV 10 % per
generation, throttling, a random walk, rare 2–3x slow generations, per-prompt effects) with
one more thing real machines do: each night starts at its own level, SD's speedup that night
``× exp(N(0, τ))`` (a level shift between nights). A machine runs :data:`HISTORY` nights of
one release (the plugin's default comparison, 16–72 pairs, at 98 %), the last of them accepted
as the baseline; then three more nights on which either nothing changed or SD got 10 % faster.
Each night is read against the baseline by the shipped functions: the run-to-run spread from
the history lines' intervals (:func:`pytest_specdec.store.spread.run_spread`) and drift read
across nights with it (:meth:`pytest_specdec.store.spread.Nights.drift`, α = 2 %, at least a 5 %
move — the defaults; the nights since the acceptance pooled). Rows per τ, each also read as before
the spread, within-run only (:func:`pytest_specdec.stats.drift_test`, tonight's pairs against the
baseline's):

* **nothing changed**: the share of machines whose first night after the baseline reads drift
  (target ≤ 1 %);
* **SD 10 % faster**: the share caught (drift upward) on night 1, and within 3 nights (target ≥ 90 %).

Printed with 95 % Wilson intervals.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import Comparison, ComparisonPlan, run_comparison
from pytest_specdec.stats import drift_test, wilson_interval
from pytest_specdec.store.spread import Nights, log_se

START = datetime(2026, 1, 1, 3, tzinfo=UTC)
HISTORY = 8  # nights of one release before the three read nights (the spread needs 5)
SPEEDUP = 1.1
ALPHA, MIN_EFFECT = 0.02, 0.05  # 1 - the default confidence; --specdec-drift-min-effect's default
PLAN = ComparisonPlan(
    "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3),
    max_tokens=32, min_trials=16, max_trials=72, confidence=0.98,
)  # fmt: skip


def one_night(rng: np.random.Generator, speedup: float, tau: float) -> Comparison:
    """One night's comparison on a machine that misbehaves the way real ones do, at tonight's level."""
    first = 4 * 73
    options = {
        "noise": "0.10",
        "drift": f"{rng.uniform(0.10, 0.20) / first:.6f}",
        "wander": "0.01",
        "outliers": "0.01",
        "prompt_spread": "0.05",
        "speedup": f"{speedup * math.exp(rng.normal(0.0, tau)):.6f}",
        "seed": str(int(rng.integers(1 << 30))),
    }
    return run_comparison(SimulatedBackend(ModelPair("t", "d"), options), PLAN, clock=lambda: 0.0)


def history_line(night: int, comparison: Comparison) -> dict[str, object]:
    """What the history keeps of a night (``store.history.history_line``'s fields the spread reads)."""
    s = comparison.speedup
    return {"key": "k", "release": "r 1", "time": (START + timedelta(days=night)).isoformat(), "protocol": 1,
            "speedup": {"estimate": s.estimate, "low": s.low, "high": s.high, "confidence": s.confidence},
            "log_se": log_se(comparison.log_ratios)}  # fmt: skip


def machine(
    seed: int, tau: float, nights: int = HISTORY, alpha: float = ALPHA
) -> tuple[bool, bool, bool, bool, bool, bool]:
    """Drift read across nights / within-run only: on the quiet night, the first moved night, any of three."""
    rng = np.random.default_rng(seed)
    runs = [one_night(rng, SPEEDUP, tau) for _ in range(nights)]
    history = [history_line(n, c) for n, c in enumerate(runs)]
    accepted_at, accepted = str(history[-1]["time"]), list(runs[-1].log_ratios)  # the last night is the baseline

    def across(comparison: Comparison, since: list[dict[str, object]], upward: bool | None) -> bool:
        found = Nights(tuple(history + since)).drift(comparison.speedup, "r 1", "r 1", accepted_at)
        assert found is not None, "eight nights: the spread is known"
        ratio, p_value = found
        moved = p_value < alpha and abs(math.log(ratio)) >= math.log1p(MIN_EFFECT)
        return moved and (upward is None or (ratio > 1) == upward)

    def within(comparison: Comparison, upward: bool | None) -> bool:
        test = drift_test(list(comparison.log_ratios), accepted, alpha, MIN_EFFECT)
        return test.significant and (upward is None or (test.ratio > 1) == upward)

    quiet = one_night(rng, SPEEDUP, tau)
    moved = [one_night(rng, SPEEDUP * 1.10, tau) for _ in range(3)]
    since = [history_line(nights + n, c) for n, c in enumerate(moved)]
    caught = [across(m, since[:n], True) for n, m in enumerate(moved)]
    return (
        across(quiet, [], None), within(quiet, None),
        caught[0], within(moved[0], True),
        any(caught), any(within(m, True) for m in moved),
    )  # fmt: skip


def share(hits: int, runs: int) -> str:
    low, high = wilson_interval(hits, runs)
    return f"{hits / runs:.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--taus", default="0,0.03,0.06", help="between-night level shifts (sd of log speedup)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=ALPHA, help="1 - --specdec-confidence (the run's α)")
    parser.add_argument("--history", type=int, default=HISTORY, help="nights before the read ones (≥ 5)")
    args = parser.parse_args()
    started = time.monotonic()
    print(
        f"{args.machines} machines per row, {args.history} history nights, SD {SPEEDUP}x, α={args.alpha}, move ≥ {MIN_EFFECT:.0%}"
    )
    print("| τ between nights | drift read | nothing changed: drift | +10 %: caught night 1 | +10 %: within 3 nights |")
    print("|---|---|---|---|---|")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for tau in (float(t) for t in args.taus.split(",")):
            seeds = [args.seed * 1_000_003 + i + int(tau * 1e6) for i in range(args.machines)]
            found = np.array(
                list(
                    pool.map(
                        machine,
                        seeds,
                        [tau] * len(seeds),
                        [args.history] * len(seeds),
                        [args.alpha] * len(seeds),
                        chunksize=8,
                    )
                )
            )
            for column, label in ((0, "across nights"), (1, "within-run only (before)")):
                hits = found[:, column::2].sum(axis=0)
                print(f"| {tau:.0%} | {label} | {share(int(hits[0]), args.machines)} | "
                      f"{share(int(hits[1]), args.machines)} | {share(int(hits[2]), args.machines)} |", flush=True)  # fmt: skip
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
