"""``pytest-specdec calibrate``: A/A pairs give the noise; replays of the design give error and power."""

from __future__ import annotations

import math
import random

import pytest

from pytest_specdec.calibration import calibrate
from pytest_specdec.cli import main


def aa_pairs(cv: float, seed: int, *, slower_second: float = 1.0) -> list[tuple[str, float, float]]:
    rng = random.Random(seed)
    return [
        (f"code-{i % 4 + 1}", math.exp(rng.gauss(0.0, cv)), slower_second * math.exp(rng.gauss(0.0, cv)))
        for i in range(32)
    ]


def test_replays_of_quiet_noise_decide_small_effects_and_loud_noise_only_large_ones() -> None:
    quiet, loud = aa_pairs(0.03 / math.sqrt(2), 1), aa_pairs(0.4 / math.sqrt(2), 1)
    calm = calibrate(quiet, 72, replays=60, power_replays=40)
    noisy = calibrate(loud, 72, replays=60, power_replays=40)
    assert calm.log_sd == pytest.approx(0.03, rel=0.4)
    calm_needed, noisy_needed = dict(calm.needed), dict(noisy.needed)
    assert calm_needed["min=1.2"] is not None
    assert calm_needed["min=1.2"] <= 1.3
    assert noisy_needed["min=1.2"] is None or noisy_needed["min=1.2"] > calm_needed["min=1.2"]
    assert calm.false_decisions <= 0.05


def test_the_replayed_world_is_a_a_even_when_the_measured_pairs_lean_one_way() -> None:
    """Arms swapped by a coin: a sample whose second arm ran 5 % fast by chance still replays a truth of exactly 1."""
    leaning = aa_pairs(0.02, 4, slower_second=0.95)
    calibration = calibrate(leaning, 72, replays=200, power_replays=10)
    assert calibration.false_decisions <= 0.03
    assert "over 200 replays of these 32 pairs" in calibration.lines(72)[1]


def test_the_command_measures_a_a_pairs_on_the_configured_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--backend", "simulated", "--option", "noise=0.05", "--pairs", "16"]) == 0
    shown = capsys.readouterr().out
    assert "A/A pairs measured: 16" in shown
    assert "(target ≤ 1 %)" in shown
    assert "wrong decisive verdict in" in shown
    assert "with this noise, min=1.2 needs a true" in shown or "min=1.2 is not decided" in shown
