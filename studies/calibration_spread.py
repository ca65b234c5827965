"""How well ``specdec calibrate`` knows its own false-decision figure (docs/measurements.md: "Statistics").

Run: ``python -m studies.calibration_spread [--machines 20] [--pairs 32 64]``. Not collected by pytest.

Each simulated machine has the same noise (Student-t(5), CV 10 %, a slow wander and
throttling: the conditions of ``error_rates.py``, whose design makes under 1 % wrong
decisive verdicts at the bound). On each, ``specdec calibrate``'s own steps run: A/A
pairs measured with :func:`~pytest_specdec.calibration.measure_aa`, then
:func:`~pytest_specdec.calibration.calibrate`'s replays (its default count). The
spread of what it reads across machines is what one run of the command can be trusted
to: it is printed per pair count with the share of machines that read above 2 %.
"""

from __future__ import annotations

import argparse
import statistics

from pytest_specdec.backends.base import ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.calibration import calibrate, measure_aa

NOISE = {"noise": "0.1", "noise_df": "5", "wander": "0.01", "throttle": "0.15"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--pairs", type=int, nargs="+", default=[32, 64])
    args = parser.parse_args()
    print(f"{args.machines} simulated machines, noise {NOISE}")
    print("| A/A pairs | false decisions read: min / median / max | machines reading above 2 % |")
    print("|---|---|---|")
    for pairs in args.pairs:
        readings = []
        for seed in range(args.machines):
            backend = SimulatedBackend(ModelPair("t", "d"), {**NOISE, "seed": str(seed)})
            noise = measure_aa(backend, "code", pairs, 16, lambda _: None)
            readings.append(calibrate(noise, 72, power_replays=0).false_decisions)
        above = sum(r > 0.02 for r in readings)
        print(
            f"| {pairs} | {min(readings):.2%} / {statistics.median(readings):.2%} / {max(readings):.2%} | "
            f"{above} of {len(readings)} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
