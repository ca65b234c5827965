"""The document's premise: "verifying K tokens costs about the same as generating 1 token".

r_v = target time for γ+1 tokens ÷ for 1 token, timed directly on the backend; "about
the same" is taken as r_v ≤ 1.2. Theorem 3.8 of Leviathan et al. assumes r_v = 1.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import claim_marker_kwargs
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.claim(**claim_marker_kwargs("premise"))
@pytest.mark.parametrize("num_draft", [3])
def test_verifying_k_tokens_costs_about_one_step(specdec: SpecdecFixture, num_draft: int) -> None:
    r_v = specdec.verify_cost(num_draft=num_draft)
    specdec.judge(f"r_v at γ={num_draft}", r_v, max=1.2)
