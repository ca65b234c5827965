"""A plan's conditions put into effect on its backend, before the first pair runs.

Most axes need nothing beyond their value in the plan and its requests (γ is the SD arm's,
sampling travels in every request, the metric picks the seconds read). A context puts its
prefix before every prompt, once the length is known to fit the window and the memory
(:mod:`~pytest_specdec.measure.context`); a length that does not is *not measurable here*.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_specdec.backends.base import Backend
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.measure.context import prefixed_prompts


@dataclass(frozen=True)
class Room:
    """What this machine holds for a comparison: the target's weights and the memory it may use."""

    weight_bytes: float
    usable_bytes: float


def realise(plan: ComparisonPlan, backend: Backend, room: Room) -> ComparisonPlan:
    """``plan`` as it runs on ``backend``: its prompts behind the context it asks for."""
    if not plan.context:
        return plan
    prompts = prefixed_prompts(
        backend, plan.prompts, plan.context, generated=plan.max_tokens,
        look_ahead=max(plan.treatment.num_draft, 0), weight_bytes=room.weight_bytes, usable_bytes=room.usable_bytes,
    )  # fmt: skip
    return replace(plan, prompts=prompts)
