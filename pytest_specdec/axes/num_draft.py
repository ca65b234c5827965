"""The draft length γ: how many tokens the SD arm drafts per step (``0``: the engine picks it each round).

``compare(num_draft=4)``, ``sweep(num_draft=[1, 2, 4])``; unset, the run's ``--specdec-num-draft``.
Every baseline key names it (``γ=3``), and the verdict table shows it in a column of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdec.axes import Axis, whole_number
from pytest_specdec.errors import SpecdecUsageError

ADAPTIVE = 0  # the γ of a backend whose engine picks the draft length each round (no γ was sent)
MAX_DRAFT = 256


class DraftLength(Axis[int | None]):
    """γ, the tokens drafted per step."""

    name = keyword = "num_draft"
    title = "γ"
    order = 0
    axis_label = "γ: tokens drafted per step"
    default = None  # the run's --specdec-num-draft
    always_in_key = True
    own_column = True
    knob = True

    def parse(self, value: object) -> int:
        """At least one drafted token."""
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise SpecdecUsageError(f"num_draft={value} is below 1 — draft at least one token")
        return whole_number("num_draft", value, low=1, high=MAX_DRAFT)

    def load(self, data: object) -> int:
        """A stored γ (``0``: the engine chose the length, or neither arm drafted)."""
        if data == ADAPTIVE and isinstance(data, int) and not isinstance(data, bool):
            return ADAPTIVE
        return self.parse(data)

    def example(self) -> object:
        return 3

    def label(self, value: int | None) -> str:
        """``γ=3``, or ``γ=upstream`` where the engine chose each draft's length (keys said ``γ=0`` before)."""
        return f"γ={draft_label(value or 0)}" if value is not None else "γ=None"

    def statement(self, value: int | None) -> str:
        return ""

    def position(self, value: int | None) -> float:
        return float(value or 0)

    def legacy(self, comparison: Mapping[str, Any]) -> int | None:
        found = comparison.get("num_draft")
        return int(found) if isinstance(found, int) else None


def draft_label(num_draft: int) -> str:
    """``3``, or ``upstream`` where the engine chose the length itself (the engine's own word for it, not ours)."""
    return "upstream" if num_draft == ADAPTIVE else str(num_draft)


AXIS = NUM_DRAFT = DraftLength()
