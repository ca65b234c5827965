"""Which γ pays best, and the break-even α at each: a sweep on the draft-model backends.

Not a claim of the document: it explains the others. Each γ is a full paired
comparison; the summary names the best γ and the α below which SD loses at each γ.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import only_for
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.sweep
def test_gamma_sweep_on_code(specdec: SpecdecFixture) -> None:
    only_for(specdec, ["mlx", "llama-cpp"])
    specdec.sweep(num_draft=[1, 2, 3, 4, 6], category="code", max_trials=8)
