"""pytest-specdec: does speculative decoding pay off on this machine, with this release, yet?

Public names only; nothing here imports a backend runtime or matplotlib.
"""

from __future__ import annotations

from pytest_specdec.axes import Conditions
from pytest_specdec.backends.base import Arm, Backend, BackendSpec, Fingerprint, GenerationRequest, ModelPair
from pytest_specdec.claims import Expectations, SpeedupBounds
from pytest_specdec.measure import Comparison, ComparisonPlan
from pytest_specdec.stats import Interval, Verdict

__all__ = [
    "Arm",
    "Backend",
    "BackendSpec",
    "Comparison",
    "ComparisonPlan",
    "Conditions",
    "Expectations",
    "Fingerprint",
    "GenerationRequest",
    "Interval",
    "ModelPair",
    "SpeedupBounds",
    "Verdict",
]
