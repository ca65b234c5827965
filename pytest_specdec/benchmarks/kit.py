"""What every claim file shares: its ``claim`` marker's arguments, and the skip for a claim that does not apply.

``CLAIMS`` holds each claim's quote and section (``pytest_specdec.seed.document``), so the
markers and ``specdec claims`` say the same thing.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from pytest_specdec.seed.document import CLAIMS


def claim_marker_kwargs(claim_id: str) -> dict[str, object]:
    """``id``, ``source``, ``quote`` and ``applies_to`` for ``@pytest.mark.claim``."""
    claim = CLAIMS[claim_id]
    return {"id": claim.id, "source": claim.source, "quote": claim.quote, "applies_to": "seed"}


def only_for(specdec: object, backends: Iterable[str], *, profiles: Iterable[str] | None = None) -> None:
    """Skip a claim that does not apply to this run's backend (or profile): one reason, one line per run.

    pytest folds skips of the same place and reason into one summary line, so the claims
    that do not apply are said once (``SKIPPED [13] …: does not apply to …``), not 13 times.
    """
    backend, profile = specdec.backend_name, specdec.profile  # type: ignore[attr-defined]
    if backend not in backends or (profiles is not None and profile not in profiles):
        pytest.skip(
            f"does not apply to --backend={backend} --specdec-profile={profile} "
            "(specdec claims says where each claim applies)"
        )
