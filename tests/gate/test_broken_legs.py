"""A leg whose backend fails mid-run, or whose run is cut short: red in its own word, with its own issue.

The steps of the night that decide this run as the workflow runs them (``specdec gate
measure``, ``night``, ``verdict``; ``confirm`` has nothing to re-run when no comparison
finished, ``lock`` records the environment), on the simulated backend with the fault injected into the library, so the
benchmarks really crash or are really interrupted under pytest. The workflow itself, with
its claim-level red states, runs under act in tests/test_gate_act.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import write_pyproject
from .test_night import GH, gh_calls, specdec

MACHINE = "Broken-Leg-Runner"
GATE = """[tool.specdec.gate.legs.simulated]
required = true
targets = ["bench/"]
pytest-args = "--specdec-model=sim-target --specdec-draft=sim-draft --specdec-max-tokens=16 --specdec-backend-option {option}"
"""
CLAIM = """import pytest


@pytest.mark.claim(id="r", source="test", quote="SD does not pay off with this backend")
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off(specdec):
    specdec.compare(category="copy")
"""


@pytest.mark.parametrize(
    ("option", "state", "said"),
    [
        (
            "crash_after=5",
            "backend failed",
            "1 test(s) could not measure (first: test_sd_does_not_pay_off: Failed: backend 'simulated' failed while "
            "measuring: RuntimeError: simulated library failure (crash_after) — no result was kept)",
        ),
        ("interrupt_after=5", "run cut short", "the run was cut short (interrupted): not every claim measured"),
    ],
)
def test_a_leg_broken_mid_run_is_red_in_its_own_word_with_its_own_issue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, state: str, said: str
) -> None:
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    write_pyproject(tmp_path, GATE.format(option=option))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    out = tmp_path / "artifacts" / "specdec-simulated"
    measured = specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(out))
    assert measured.returncode == 0, "the measure step reports; the night decides"
    assert json.loads((out / "status.json").read_text())["broken"]
    night = specdec(tmp_path, "night", "--backend", "simulated", "--out", str(out))
    assert night.returncode == 1, night.stdout + night.stderr
    assert f"simulated: {state} — leg: {said}" in night.stdout
    verdict = specdec(tmp_path, "verdict", "--artifacts", str(out.parent), "--gh", str(GH))
    assert verdict.returncode == 1
    assert f"::error title=specdec gate::simulated: {state} — leg" in verdict.stdout
    calls = gh_calls(tmp_path)
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    assert calls[1][calls[1].index("--title") + 1] == f"specdec: {state} — leg on {MACHINE} (simulated)"
