"""An undecided result is measured again that night with more pairs, through the gate's measure step.

The simulated backend holds a claim ``speedup(max=1.3)`` decisively on an accepted night (0.8x, quiet); later
nights sit on the bound (1.3x, noisy), so four pairs cannot decide it: the leg measures it again with twice the
pairs, and a second undecided night in a row with four times as many, as the doubling rule says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import write_pyproject
from .test_findings import specdec

MACHINE = "More-Pairs-Runner"
GATE = """[tool.specdec.gate.legs.simulated]
required = true
targets = ["bench/"]
pytest-args = "--specdec-model=sim-target --specdec-draft=sim-draft --specdec-max-tokens=16 --specdec-max-trials=4 \
--specdec-backend-option speedup={speedup} --specdec-backend-option noise={noise} --specdec-backend-option seed=7"
"""
CLAIM = """import pytest


@pytest.mark.speedup(max=1.3)
def test_sd_stays_under_1_3x(specdec):
    specdec.compare(category="copy")


def test_plain_unit_test():
    assert True
"""


def night(root: Path, name: str) -> tuple[str, dict[str, object]]:
    out = root / name / "specdec-simulated"
    measured = specdec(root, "measure", "--backend", "simulated", "--out", str(out))
    assert measured.returncode == 0, measured.stdout + measured.stderr
    (result,) = json.loads((out / "results.json").read_text(encoding="utf-8"))["comparisons"]
    return measured.stdout, result


def test_an_undecided_result_is_measured_again_with_doubled_pairs_and_more_on_the_next_night(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claims.py").write_text(CLAIM, encoding="utf-8")
    write_pyproject(tmp_path, GATE.format(speedup=0.8, noise=0.01))
    said, accepted = night(tmp_path, "accepted")
    assert "measured again" not in said, "a result without a baseline is new, never undecided"
    accept = specdec(tmp_path, "accept-candidates", "--artifacts", str(tmp_path / "accepted"))
    assert accept.returncode == 0, accept.stdout + accept.stderr
    assert accepted["judgement"]["conclusion"] == "holds"
    said, agrees = night(tmp_path, "agrees")
    assert agrees["check"]["change"] == "unchanged"
    assert "measured again" not in said, "a night that decides is never measured again"
    assert not (tmp_path / "agrees" / "specdec-simulated" / "more-pairs").exists()

    write_pyproject(tmp_path, GATE.format(speedup=1.3, noise=0.3))
    said, first = night(tmp_path, "first")
    subject = "bench/test_claims.py::test_sd_stays_under_1_3x [copy]"
    assert f"specdec gate: {subject}: undecided; measured again with up to 8 pairs" in said, said[-3000:]
    assert first["scope"]["max_trials"] == "8", "the night's result is the second reading, at the doubled cap"
    assert first["trials"] > 4
    assert "test_plain_unit_test" not in (tmp_path / "first" / "specdec-simulated" / "more-pairs" / "8" /
                                          "pytest.log").read_text(encoding="utf-8")  # fmt: skip
    assert first["check"]["change"] == "undecided", "at the bound (seed 7), eight pairs cannot decide either"
    said, second = night(tmp_path, "second")  # the second undecided night in a row doubles again
    assert f"specdec gate: {subject}: undecided; measured again with up to 16 pairs" in said, said[-3000:]
    assert second["scope"]["max_trials"] == "16"
