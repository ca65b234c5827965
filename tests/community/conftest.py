"""Shared by the community tests: a real run on the simulated backend, as its results file keeps it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_specdec.store.files import load_run
from pytest_specdec.store.records import RunRecord

CLAIM = """
import pytest


@pytest.mark.speedup(min=1.0)
def test_sd_pays_off(specdec):
    specdec.compare(category="copy")
"""


@pytest.fixture(scope="module")
def run_record(tmp_path_factory: pytest.TempPathFactory) -> RunRecord:
    """A real run of a claim on the simulated backend (counts, looks and all), as its results file keeps it: SD
    1.3x faster, so the claim holds however the arm order falls (at the default 1.0x it sat on its bound, and a
    run was refuted about once in a hundred, as the protocol's error rate at a bound says it should be)."""
    root = tmp_path_factory.mktemp("run")
    (root / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "test_claim.py", "--backend=simulated", "--specdec-model=sim-target",
         "--specdec-draft=sim-draft", "--specdec-max-tokens=16", "--specdec-backend-option=speedup=1.3",
         f"--specdec-baselines={root / 'baselines'}",
         f"--specdec-json={root / 'run.json'}", "-p", "no:cacheprovider"],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    return load_run(root / "run.json")
