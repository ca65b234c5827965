"""What every claim file shares: its ``claim`` marker's arguments, and the skip for a claim that does not apply
(by what the backend does: ``only_where``).

``CLAIMS`` holds each claim's quote and section (``pytest_specdec.seed.document``), so the
markers and ``pytest-specdec claims`` say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from pytest_specdec.fixture import SpecdecFixture
from pytest_specdec.seed.document import CLAIMS


def claim_marker_kwargs(claim_id: str) -> dict[str, object]:
    """``id``, ``source``, ``quote`` and ``applies_to`` for ``@pytest.mark.claim``."""
    claim = CLAIMS[claim_id]
    return {"id": claim.id, "source": claim.source, "quote": claim.quote, "applies_to": "seed"}


def only_where(specdec: SpecdecFixture, claim_id: str, *, profiles: Iterable[str] | None = None) -> None:
    """Skip a claim that is not about what this run's backend does: its runtime family, or the kind of SD its arm
    runs (``SeedClaim.applies``), so a third party's backend that declares a draft model runs claim d unchanged.

    Example::

        def test_mlx_draft_model_gives_at_most_1_3x(specdec, category):
            only_where(specdec, "d")  # any backend whose SD arm drafts with a draft model
            specdec.compare(category=category)
    """
    claim, spec = CLAIMS[claim_id], specdec.backend_spec
    # The backend is loaded to ask its arm's kind only when it declares one the claim is about.
    run_kind = specdec.speculation_kind if claim.kinds & set(spec.kinds) else None
    applies = claim.applies(spec.evidence_family, run_kind)
    _skip_unless(specdec, applies and (profiles is None or specdec.profile in profiles))


def only_for(specdec: SpecdecFixture, backends: Iterable[str], *, profiles: Iterable[str] | None = None) -> None:
    """Skip a study that needs named backends' own options or models (claim e's flash-attention switch, claim f's
    seed models): the names are data of the test, not a kind of SD."""
    _skip_unless(specdec, specdec.backend_name in backends and (profiles is None or specdec.profile in profiles))


def _skip_unless(specdec: SpecdecFixture, applies: bool) -> None:
    """One reason and one place for every claim that does not apply, so pytest folds them into one summary line
    (``SKIPPED [13] …: does not apply to …``), not 13."""
    if not applies:
        pytest.skip(
            f"does not apply to --backend={specdec.backend_name} --specdec-profile={specdec.profile} "
            "(pytest-specdec claims says where each claim applies)"
        )
