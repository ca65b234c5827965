"""Speedup and acceptance by temperature: a sweep on the backends whose sampling is exact per seed.

Not a claim of the document: the seed write-up measured greedy decoding only, and SD's
acceptance falls as the draws spread. Each temperature is a full paired comparison with
its own lossless check (docs/method.md, "Sampling"); the summary line gives the speedup
and acceptance at each temperature and where SD still pays off. Runs on llama-cpp and
llama-server, where one seed gives both arms one text and the exact check can settle it;
where pairs part (on Gemma about half do) and on mlx, each temperature needs the
distribution check's 128 generations per arm and prompt (1024 on the 4 ``code`` prompts).
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import only_for
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.sweep
def test_temperature_sweep_on_code(specdec: SpecdecFixture) -> None:
    only_for(specdec, ["llama-cpp", "llama-server"])
    specdec.sweep(temperature=[0.0, 0.3, 0.7, 1.0], category="code", max_trials=16)
