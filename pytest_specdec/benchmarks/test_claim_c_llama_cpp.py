"""Seed claim c: "llama.cpp Metal MTP: overhead exceeds the benefit".

The document's bound is ``speedup(max=1.0)``: SD never pays off. Measured through
llama-cpp-python (``--backend=llama-cpp``: a draft GGUF, or prompt lookup when the
profile has no draft, e.g. ``--specdec-profile gemma``) and through a running
``llama-server`` with MTP (``--backend=llama-server``), which is the document's own
setting. On other profiles than ``seed`` the verdict is for reference.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_where
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.claim(**claim_marker_kwargs("c"))
@pytest.mark.speedup(max=1.0)
@pytest.mark.parametrize("category", ["code", "copy", "prose", "unpredictable"])
def test_llama_cpp_sd_overhead_exceeds_benefit(specdec: SpecdecFixture, category: str) -> None:
    only_where(specdec, "c")
    specdec.compare(category=category)
