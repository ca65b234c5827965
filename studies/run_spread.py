"""Does drift stay quiet when only the night changed, and catch a real move, once nights differ in level?

Run: ``python -m studies.run_spread --machines 1000 --jobs 16`` (not collected by pytest).

Each simulated machine is the night model of ``studies/release_change.py`` (CV 10 % per
generation, throttling, a random walk, rare 2–3x slow generations, per-prompt effects drawn per
night) with one more thing real machines do: each night starts at its own level, SD's speedup
that night ``× exp(N(0, τ))`` (a level shift between nights). A machine runs ``--history``
nights of one release (the plugin's default comparison, 16–72 pairs, at 98 %), the last of them
accepted as the baseline; then three nights where nothing changed, and three where SD got 10 %
faster — read once as if they came right after the acceptance, once after the three quiet
nights. Each night is read against the baseline by the shipped functions: drift across nights
(:func:`pytest_specdec.store.night_statistics.drift`, at ``--specdec-drift-alpha`` and
``--specdec-drift-min-effect``'s defaults, 1 % and 5 %). Two more readings of the same nights:
within-run only (the same function given no nights: tonight's pairs against the baseline's, Welch's t:
drift before the spread, and still while it is not known), and the best possible — a test that
knows the night model's level and scatter (from every machine's history nights of the row),
which no reading of one machine's own nights can beat; and Student's two-sample t, the window
against the history nights with both samples' scatter pooled, which counts two more degrees of
freedom than the shipped reading but is not shipped (a move entering the window hides in the
window's own scatter; :func:`pooled_t`):

* **nothing changed**: the share of machines that read drift on the first night after the
  baseline, and on the third (tonight pooled with the two before it) (target ≤ 1 %);
* **SD 10 % faster**: the share caught (drift upward) on night 1, and within 3 nights (target ≥ 90 %);
  after the three quiet nights also on the move's first night, when the window holds two quiet
  nights and the moved one (where a scatter pooled with the window's nights would hide it).

Printed with 95 % Wilson intervals.
"""

from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
from scipy.stats import binomtest, norm
from scipy.stats import t as student_t

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import Comparison, ComparisonPlan, run_comparison
from pytest_specdec.store.night_statistics import drift, log_se
from pytest_specdec.store.nights import Night

START = datetime(2026, 1, 1, 3, tzinfo=UTC)
HISTORY = 8  # nights of one release before the read ones (the spread needs 5)
SPEEDUP = 1.1
ALPHA, MIN_EFFECT = Settings().drift_alpha, Settings().drift_min_effect  # the shipped defaults
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
    plan = replace(PLAN, order=options["seed"])  # its coin-flipped arm order from the seed too: repeatable
    return run_comparison(SimulatedBackend(ModelPair("t", "d"), options), plan, clock=lambda: 0.0)


def history_line(night: int, comparison: Comparison) -> Night:
    """What the history keeps of a night (the fields the spread reads)."""
    when = (START + timedelta(days=night)).isoformat()
    return Night(when, "b", "r 1", "k", comparison.speedup, log_se=log_se(comparison.log_ratios))


def machine(seed: int, tau: float, nights: int = HISTORY, alpha: float = ALPHA) -> list[float]:
    """One machine's readings, as :data:`COLUMNS` per reading (shipped, within-run only), then its nights' log
    speedups (history, three quiet, three moved) for the best-possible reading."""
    rng = np.random.default_rng(seed)
    runs = [one_night(rng, SPEEDUP, tau) for _ in range(nights)]
    history = [history_line(n, c) for n, c in enumerate(runs)]
    accepted_at, accepted = history[-1].time, list(runs[-1].log_ratios)  # the last night is the baseline

    def read(found: tuple[float, float] | None, upward: bool | None) -> bool:
        assert found is not None, "five nights or more, or pairs on both sides: the test reads"
        ratio, p_value = found
        moved = p_value < alpha and abs(math.log(ratio)) >= math.log1p(MIN_EFFECT)
        return moved and (upward is None or (ratio > 1) == upward)

    def across(comparison: Comparison, since: list[Night], upward: bool | None) -> bool:
        pairs = comparison.log_ratios
        return read(drift((*history, *since), comparison.speedup, "r 1", "r 1", accepted_at, tonight_pairs=pairs),
                    upward)  # fmt: skip

    def within(comparison: Comparison, upward: bool | None) -> bool:
        found = drift((), comparison.speedup, "r 1", "r 1", accepted_at, tonight_pairs=comparison.log_ratios,
                      accepted_pairs=accepted)  # fmt: skip
        return read(found, upward)

    quiet = [one_night(rng, SPEEDUP, tau) for _ in range(3)]
    moved = [one_night(rng, SPEEDUP * 1.10, tau) for _ in range(3)]
    quiet_lines = [history_line(nights + n, c) for n, c in enumerate(quiet)]
    moved_lines = [history_line(nights + n, c) for n, c in enumerate(moved)]
    later_lines = [history_line(nights + 3 + n, c) for n, c in enumerate(moved)]
    caught = [across(m, moved_lines[:n], True) for n, m in enumerate(moved)]
    later = [across(m, quiet_lines + later_lines[:n], True) for n, m in enumerate(moved)]
    alone = [within(m, True) for m in moved]  # the within-run test reads no history: after quiet nights alike
    readings = [
        across(quiet[0], [], None), across(quiet[2], quiet_lines[:2], None), caught[0], any(caught), any(later),
        later[0],
        within(quiet[0], None), within(quiet[2], None), alone[0], any(alone), any(alone), alone[0],
    ]  # fmt: skip
    logs = [math.log(c.speedup.estimate) for c in (*runs, *quiet, *moved)]
    return [float(r) for r in readings] + logs


COLUMNS = 6  # quiet night 1, quiet night 3, moved night 1, moved within 3, moved after quiet nights within 3,
# and on its first night (the window: two quiet nights and the moved one)


def best_possible(logs: np.ndarray, nights: int, alpha: float) -> np.ndarray:
    """The same readings by a test that knows the night model's level and scatter (from every machine's history
    nights of the row): what no test on a machine's own nights can beat."""
    history = logs[:, :nights]
    return _raised_by(logs, nights, alpha, float(history.mean()), float(history.std(ddof=1)), own=False)


def pooled_t(logs: np.ndarray, nights: int, alpha: float) -> np.ndarray:
    """The same readings by Student's two-sample t of the window against the history nights, both samples'
    scatter pooled (for a shift every window night shares, on normal nights of equal scatter, the most powerful
    unbiased test when level and scatter are unknown). Not shipped: a move that enters the window (quiet nights
    before it in the window) adds to the window's scatter as much as to its mean, so its t levels off whatever
    the move (``tests/store/test_spread.py``); the shipped reading reads the scatter from the history alone."""
    history = logs[:, :nights]
    return _raised_by(logs, nights, alpha, history.mean(axis=1), history.std(axis=1, ddof=1), own=True)


def _raised_by(
    logs: np.ndarray, nights: int, alpha: float, level: float | np.ndarray, scatter: float | np.ndarray, *, own: bool
) -> np.ndarray:
    """:data:`COLUMNS` readings per machine against ``level`` with ``scatter`` a night: known (``own`` False, a
    normal test) or estimated from the history nights (``own`` True, pooled with the window's on a t)."""
    quiet, moved = logs[:, nights : nights + 3], logs[:, nights + 3 :]

    def raised(window: np.ndarray, upward: bool | None) -> np.ndarray:
        k = window.shape[1]
        shift = window.mean(axis=1) - level
        if own:
            freedom = nights + k - 2
            squares = np.square(window - window.mean(axis=1, keepdims=True)).sum(axis=1)
            pooled = ((nights - 1) * np.square(scatter) + squares) / freedom
            p_value = 2 * student_t.sf(np.abs(shift) / np.sqrt(pooled * (1 / k + 1 / nights)), freedom)
        else:
            p_value = 2 * norm.sf(np.abs(shift) / (scatter / math.sqrt(k)))
        hit: np.ndarray = (p_value < alpha) & (np.abs(shift) >= math.log1p(MIN_EFFECT))
        return hit if upward is None else hit & ((shift > 0) == upward)

    after = [raised(moved[:, :k], True) for k in (1, 2, 3)]
    mixed = np.concatenate([quiet, moved], axis=1)
    later = [raised(mixed[:, k : k + 3], True) for k in (1, 2, 3)]
    return np.stack(
        [raised(quiet[:, :1], None), raised(quiet, None), after[0], np.any(after, axis=0), np.any(later, axis=0),
         later[0]],
        axis=1,
    )  # fmt: skip


def share(hits: int, runs: int) -> str:
    low, high = binomtest(hits, runs).proportion_ci(method="wilson")
    return f"{hits / runs:.1%} [{low:.1%}, {high:.1%}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machines", type=int, default=1000)
    parser.add_argument("--taus", default="0,0.03,0.06", help="between-night level shifts (sd of log speedup)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--alpha", type=float, default=ALPHA, help="--specdec-drift-alpha")
    parser.add_argument("--history", type=int, default=HISTORY, help="nights before the read ones (≥ 5)")
    args = parser.parse_args()
    started = time.monotonic()
    print(
        f"{args.machines} machines per row, {args.history} history nights, SD {SPEEDUP}x, drift α={args.alpha}, "
        f"move ≥ {MIN_EFFECT:.0%}"
    )
    print("| τ between nights | drift read | nothing changed: night 1 | nothing changed: night 3 | "
          "+10 % after the acceptance: night 1 | within 3 nights | +10 % after 3 quiet nights: within 3 nights | "
          "its first night |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for tau in (float(t) for t in args.taus.split(",")):
            seeds = [args.seed * 1_000_003 + i + int(tau * 1e6) for i in range(args.machines)]
            rows = np.array(
                list(pool.map(machine, seeds, [tau] * len(seeds), [args.history] * len(seeds),
                              [args.alpha] * len(seeds), chunksize=8))
            )  # fmt: skip
            readings = rows[:, : 2 * COLUMNS].reshape(len(seeds), 2, COLUMNS)
            found = {
                "across nights (shipped)": readings[:, 0],
                "within-run only (before the spread)": readings[:, 1],
                "best possible (level and scatter known)": best_possible(rows[:, 2 * COLUMNS :], args.history,
                                                                         args.alpha),
                "pooled two-sample t (reference, not shipped)": pooled_t(rows[:, 2 * COLUMNS :], args.history,
                                                                         args.alpha),
            }  # fmt: skip
            for label, hits in found.items():
                cells = " | ".join(share(int(h), args.machines) for h in hits.sum(axis=0))
                print(f"| {tau:.0%} | {label} | {cells} |", flush=True)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
