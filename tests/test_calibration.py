"""``specdec calibrate``: A/A pairs give the noise; replays of the design give error and power."""

from __future__ import annotations

import random

import pytest

from pytest_specdec.calibration import calibrate
from pytest_specdec.cli import main


def test_replays_of_quiet_noise_decide_small_effects_and_loud_noise_only_large_ones() -> None:
    rng = random.Random(1)
    quiet = [(f"code-{i % 4 + 1}", rng.gauss(0.0, 0.03)) for i in range(32)]
    loud = [(f"code-{i % 4 + 1}", rng.gauss(0.0, 0.4)) for i in range(32)]
    calm, noisy = calibrate(quiet, 72, replays=60), calibrate(loud, 72, replays=60)
    assert calm.log_sd == pytest.approx(0.03, rel=0.4)
    calm_needed, noisy_needed = dict(calm.needed), dict(noisy.needed)
    assert calm_needed["min=1.2"] is not None
    assert calm_needed["min=1.2"] <= 1.3
    assert noisy_needed["min=1.2"] is None or noisy_needed["min=1.2"] > calm_needed["min=1.2"]
    assert calm.false_decisions <= 0.05


def test_the_command_measures_a_a_pairs_on_the_configured_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--backend", "simulated", "--option", "noise=0.05", "--pairs", "16"]) == 0
    shown = capsys.readouterr().out
    assert "A/A pairs measured: 16" in shown
    assert "wrong decisive verdict in" in shown
    assert "with this noise, min=1.2 needs a true" in shown or "min=1.2 is not decided" in shown
