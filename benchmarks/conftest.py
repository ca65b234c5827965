"""Benchmarks are the seed document's claims; see each file's docstring.

``CLAIMS`` holds each claim's quote and section (``pytest_specdec.seed.document``), so the
markers below and ``specdec claims`` say the same thing.
"""

from __future__ import annotations

from pytest_specdec.seed.document import CLAIMS


def claim_marker_kwargs(claim_id: str) -> dict[str, object]:
    """``id``, ``source``, ``quote`` and ``applies_to`` for ``@pytest.mark.claim``."""
    claim = CLAIMS[claim_id]
    return {"id": claim.id, "source": claim.source, "quote": claim.quote, "applies_to": "seed"}
