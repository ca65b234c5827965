"""How a generation chooses its tokens: greedy, or sampled at a temperature within a top-p.

``@pytest.mark.sampling(temperature=0.7, top_p=0.95)``, ``compare(temperature=0.7, top_p=0.95)``
(over the marker), ``sweep(temperature=[0, 0.7, 1.0])`` (each temperature above 0 with the
marker's top-p). :class:`Sampling` travels in every generation request; a backend that honours
it says so by :class:`~pytest_specdec.backends.sampling.Samples`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pytest_specdec.axes import Axis, MarkerLookup, marker_keywords, real_number
from pytest_specdec.errors import SpecdecUsageError


@dataclass(frozen=True)
class Sampling:
    """How tokens are chosen: greedy (``temperature`` 0) or sampled at ``temperature`` within ``top_p``."""

    temperature: float = 0.0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.temperature <= 5.0:
            raise SpecdecUsageError(f"temperature={self.temperature:g} is outside 0-5 — give 0 for greedy or e.g. 0.7")
        if not 0.0 < self.top_p <= 1.0:
            raise SpecdecUsageError(f"top_p={self.top_p:g} must be in (0, 1] — e.g. 0.95, or 1 for no cut")
        if self.temperature == 0.0 and self.top_p < 1.0:
            raise SpecdecUsageError(
                f"top_p={self.top_p:g} cuts nothing at temperature 0 (greedy decoding takes the most likely token) "
                "— give a temperature above 0 with it, or drop top_p"
            )

    @property
    def greedy(self) -> bool:
        """Whether this is greedy decoding (every token the most likely one)."""
        return self.temperature == 0.0

    def label(self) -> str:
        """``greedy`` or ``T=0.7, top_p=0.95`` (as in results and reports)."""
        if self.greedy:
            return "greedy"
        return f"T={self.temperature:g}" + (f", top_p={self.top_p:g}" if self.top_p < 1.0 else "")


GREEDY = Sampling()
LABEL = re.compile(r"^T=(?P<t>[0-9.eE+-]+)(?:, top_p=(?P<p>[0-9.eE+-]+))?$")


class SamplingAxis(Axis[Sampling]):
    """Greedy or sampled decoding, both arms alike."""

    name = "sampling"
    keyword = "temperature"
    title = "temperature"
    order = 10
    axis_label = "temperature (0: greedy)"
    default = GREEDY
    marker = "sampling"
    marker_help = "sampling(temperature=0.0, top_p=1.0): both arms sample at this temperature and top-p (0: greedy)"

    @property
    def keywords(self) -> tuple[str, ...]:
        return ("temperature", "top_p")

    def parse(self, value: object) -> Sampling:
        """A :class:`Sampling`, a temperature, or ``{"temperature", "top_p"}``."""
        if isinstance(value, Sampling):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - {"temperature", "top_p"})
            if unknown:
                raise SpecdecUsageError(f"sampling has no {unknown[0]!r} — give temperature and top_p")
            return self._checked(value.get("temperature", 0.0), value.get("top_p", 1.0))
        return self._checked(value, 1.0)

    @staticmethod
    def _checked(temperature: object, top_p: object) -> Sampling:
        return Sampling(real_number("temperature", temperature), real_number("top_p", top_p))

    def from_keywords(self, given: Mapping[str, object], current: Sampling) -> Sampling:
        """``temperature=`` / ``top_p=`` over the marker's; greedy over a marker drops its top-p (no cut)."""
        heat = current.temperature if given.get("temperature") is None else given["temperature"]
        heat = real_number("temperature", heat)
        cut = (current.top_p if heat else 1.0) if given.get("top_p") is None else given["top_p"]
        return self._checked(heat, cut)

    def from_marker(self, lookup: MarkerLookup) -> Sampling | None:
        """``@pytest.mark.sampling(temperature=0.7, top_p=1.0)``."""
        found = lookup("sampling")
        if found is None:
            return None
        args, kwargs = found
        marker_keywords("sampling", args, kwargs, ("temperature", "top_p"))
        values = {key: kwargs.get(key, default) for key, default in (("temperature", 0.0), ("top_p", 1.0))}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SpecdecUsageError(f"@pytest.mark.sampling({key}={value!r}): {key} must be a number")
        try:
            return self._checked(values["temperature"], values["top_p"])
        except SpecdecUsageError as error:
            given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            raise SpecdecUsageError(f"@pytest.mark.sampling({given}): {error}") from None

    def example(self) -> object:
        return 0.7

    def dump(self, value: Sampling) -> object:
        return {"temperature": value.temperature, "top_p": value.top_p}

    def label(self, value: Sampling) -> str:
        """``T=0.7, top_p=0.95``; greedy is ``T=0`` (a sweep's first point)."""
        return "T=0" if value.greedy else value.label()

    def statement(self, value: Sampling) -> str:
        return "" if value.greedy else f" at {value.label()}"

    def position(self, value: Sampling) -> float:
        return value.temperature

    def legacy(self, comparison: Mapping[str, Any]) -> Sampling | None:
        said = (comparison.get("scope") or {}).get("sampling")
        found = LABEL.match(said) if isinstance(said, str) else None
        return Sampling(float(found["t"]), float(found["p"] or 1.0)) if found else None


AXIS = SAMPLING = SamplingAxis()
