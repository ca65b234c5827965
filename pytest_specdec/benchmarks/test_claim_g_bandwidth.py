"""Seed claim g: "Apple silicon bottleneck is memory bandwidth (200–400 GB/s depending on chip)".

Two parts: the quoted range against the chip table (the lineup spans 68–819 GB/s), and
on this machine, the plain arm's decode rate as a fraction of its bandwidth roofline:
a bandwidth-bound decoder runs at a large fraction of it (here: at least 0.5).
"""

from __future__ import annotations

import math

import pytest

from pytest_specdec.backends.base import KnowsWeightBytes
from pytest_specdec.benchmarks.kit import claim_marker_kwargs
from pytest_specdec.fixture import SpecdecFixture
from pytest_specdec.hardware import peak_bandwidths
from pytest_specdec.roofline import roofline_tps
from pytest_specdec.stats import speedup_interval

# Only the plain arm is read, and no speedup bound is stated, so nothing would stop the pairs early: 24 pairs
# give the plain arm's fraction of the roofline an interval (a whole 72-pair run took 146 s of make bench's 325).
PLAIN_PAIRS = 24


@pytest.mark.claim(**claim_marker_kwargs("g"))
def test_apple_bandwidth_range(specdec: SpecdecFixture) -> None:
    apple = {name: gbs for name, gbs in peak_bandwidths().items() if name.startswith("Apple")}
    outside = sorted(name for name, gbs in apple.items() if not 200 <= gbs <= 400)
    specdec.note(
        f"Apple chips outside 200–400 GB/s: {', '.join(outside)} (range {min(apple.values()):g}–{max(apple.values()):g})"
    )
    assert outside, "the table shows the quoted range is too narrow"


@pytest.mark.claim(**claim_marker_kwargs("g"))
def test_plain_decode_is_bandwidth_bound(specdec: SpecdecFixture) -> None:
    backend = specdec.backend
    bandwidth = specdec.machine.bandwidth_gbs
    if not isinstance(backend, KnowsWeightBytes) or not bandwidth:
        pytest.skip("could not run here: this backend does not report its weights' size (or the bandwidth is unknown)")
    result = specdec.compare(category="prose", max_trials=PLAIN_PAIRS)
    ceiling = roofline_tps(bandwidth, backend.weight_bytes())
    fractions = [math.log(s.baseline_tps / ceiling) for s in result.record.samples]
    specdec.judge("plain arm / roofline", speedup_interval(fractions, 0.95), min=0.5)
