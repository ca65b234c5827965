"""Seed claim f: "a 7B model at 100+ tok/s beats a 30B model at 38 tok/s".

Both figures against the M1 Max roofline (a dense 7B at Q4 cannot reach 100 tok/s at
400 GB/s; 38 tok/s fits a 30B only as a mixture of experts), and — on the ``seed``
profile — the two models measured against each other through the paired protocol.
"""

from __future__ import annotations

import pytest

from pytest_specdec import Arm
from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_for
from pytest_specdec.fixture import SpecdecFixture
from pytest_specdec.roofline import check_plausibility
from pytest_specdec.seed.document import CLAIMS, SEED_BANDWIDTH_GBS

SEED_MODELS = {
    "mlx": ("mlx-community/Qwen2.5-7B-Instruct-4bit", "mlx-community/Qwen2.5-32B-Instruct-4bit"),
    "ollama": ("qwen2.5:7b", "qwen2.5:32b"),
}


@pytest.mark.claim(**claim_marker_kwargs("f"))
def test_published_figures_against_the_roofline(specdec: SpecdecFixture) -> None:
    checks = [check_plausibility(f.label, f.tps, f.model, SEED_BANDWIDTH_GBS) for f in CLAIMS["f"].figures]
    for check in checks:
        specdec.note(f"M1 Max roofline: {check.describe()}")
    assert not checks[0].plausible, "100 tok/s for a dense 7B Q4 is above the M1 Max roofline"


@pytest.mark.claim(**claim_marker_kwargs("f"))
@pytest.mark.speedup(min=1.0)
def test_7b_decodes_faster_than_30b(specdec: SpecdecFixture) -> None:
    only_for(specdec, SEED_MODELS, profiles=["seed"])
    models = SEED_MODELS[specdec.backend_name]
    small, large = models
    specdec.compare(
        category="prose", baseline=Arm("30b", options={"model": large}), treatment=Arm("7b", options={"model": small})
    )
