"""Seed claim d: "mlx-lm draft model ... 0.9x-1.3x speedup (at best)".

The document's own bound is ``speedup(max=1.3)``. It applies to any backend whose SD arm
drafts with a draft model (``SeedClaim.kinds``), not to mlx by name: llama-cpp with a draft
GGUF, llama-server's ``draft-simple``, a third party's engine. On the embedded synthetic pair
the verdict is for reference: that pair is built to give SD its best chance.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_where
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.claim(**claim_marker_kwargs("d"))
@pytest.mark.speedup(max=1.3)
@pytest.mark.parametrize("category", ["code", "copy", "unpredictable"])
def test_mlx_draft_model_gives_at_most_1_3x(specdec: SpecdecFixture, category: str) -> None:
    only_where(specdec, "d")
    specdec.compare(category=category)
