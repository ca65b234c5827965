"""Seed claim b: MTPLX with a separate draft: 30B bf16 (~60 GB) + 7B draft (~14 GB) exceeds 64 GB.

Checked three ways: the document's arithmetic against an M1 Max 64 GB working set; the
same pair against this machine; and, against a running ``mtplx serve``, what drafts
(MTPLX reports its drafter — the target's own MTP heads, not a separate model).
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_where
from pytest_specdec.fixture import SpecdecFixture
from pytest_specdec.roofline import memory_fit
from pytest_specdec.seed.document import MTPLX_DRAFT_BF16, MTPLX_TARGET_BF16, SEED_USABLE_BYTES

CONTEXT = 8192


@pytest.mark.claim(**claim_marker_kwargs("b"))
def test_document_pair_does_not_fit_an_m1_max(specdec: SpecdecFixture) -> None:
    fit = memory_fit(MTPLX_TARGET_BF16, MTPLX_DRAFT_BF16, CONTEXT, SEED_USABLE_BYTES)
    specdec.note(f"M1 Max 64 GB (Metal's reported working set): {fit.describe()}")
    here = memory_fit(MTPLX_TARGET_BF16, MTPLX_DRAFT_BF16, CONTEXT, specdec.machine.usable_bytes)
    specdec.note(f"this machine ({specdec.machine.usable_source}): {here.describe()}")
    assert not fit.fits, "the document's arithmetic: 74 GB cannot fit a 64 GB Mac's working set"


@pytest.mark.claim(**claim_marker_kwargs("b"))
def test_mtplx_drafts_with_a_separate_model(specdec: SpecdecFixture) -> None:
    only_where(specdec, "b")
    drafter = specdec.backend.fingerprint().details.get("drafter", "unknown")
    specdec.note(f"MTPLX reports its drafter: {drafter}")
    if "own MTP head" in drafter and specdec.gating:
        pytest.fail(f"premise refuted: MTPLX drafts with {drafter}, not a separate draft model", pytrace=False)


@pytest.mark.claim(**claim_marker_kwargs("b"))
@pytest.mark.speedup(max=1.3)
@pytest.mark.parametrize("category", ["code", "prose"])
def test_mtplx_gives_at_most_1_3x(specdec: SpecdecFixture, category: str) -> None:
    """The document's summary: MTPLX, like every approach it tried, gave at most 1.3x."""
    only_where(specdec, "b")
    specdec.compare(category=category)
