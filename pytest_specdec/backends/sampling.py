"""How a generation chooses its tokens: greedy, or sampled at a temperature within a top-p.

:class:`Sampling` travels in every :class:`~pytest_specdec.backends.base.GenerationRequest`;
a backend that honours it says so by :class:`Samples`, and says whether SD and plain
decoding draw the very same tokens for one seed (docs/method.md, "Sampling").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

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


@runtime_checkable
class Samples(Protocol):
    """A backend that honours a request's temperature, top-p and seed (the others decode greedily only)."""

    def sampled_draws_per_seed(self) -> str:
        """``same``: with one seed, SD and plain draw the very same tokens (SD accepts a draft token only
        where it equals the target's own draw, one draw per emitted token), so the exact check applies;
        ``distribution``: only the distribution is the same (the draft consumes draws), so it is tested."""
        ...
