"""What a speedup times: decode (first token to last) or end to end (prompt in, last token out).

Set by the claim itself, ``@pytest.mark.speedup(min=1.2, of="end-to-end")``, and kept with the
result: a decode speedup and an end-to-end one are other results, with other keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_specdec.axes import Axis, MarkerLookup
from pytest_specdec.errors import SpecdecUsageError

DECODE, END_TO_END = "decode", "end-to-end"


class Metric(Axis[str]):
    """Which seconds the speedup, its verdicts and its stopping read."""

    name = keyword = "metric"
    title = "metric"
    order = 20
    axis_label = "what the speedup times"
    default = DECODE

    def parse(self, value: object) -> str:
        if value not in (DECODE, END_TO_END):
            raise SpecdecUsageError(f"of={value!r}: a speedup is of {DECODE!r} or {END_TO_END!r}")
        return str(value)

    def from_marker(self, lookup: MarkerLookup) -> str | None:
        """The claim's ``speedup(of=...)``."""
        found = lookup("speedup")
        if found is None or "of" not in found[1]:
            return None
        of = found[1]["of"]
        if of not in (DECODE, END_TO_END):
            raise SpecdecUsageError(f"@pytest.mark.speedup(of={of!r}): of is {DECODE!r} or {END_TO_END!r}")
        return str(of)

    def example(self) -> object:
        return END_TO_END

    def label(self, value: str) -> str:
        return value

    def statement(self, value: str) -> str:
        return ", end to end" if value == END_TO_END else ""

    def position(self, value: str) -> float:
        return 1.0 if value == END_TO_END else 0.0

    def legacy(self, comparison: Mapping[str, Any]) -> str | None:
        said = (comparison.get("scope") or {}).get("speedup_of")
        return said if isinstance(said, str) else None


AXIS = METRIC = Metric()
