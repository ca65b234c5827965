"""How a generation chooses its tokens: greedy, or sampled at a temperature within a top-p.

:class:`~pytest_specdec.axes.sampling.Sampling` (the sampling axis's value) travels in every
:class:`~pytest_specdec.backends.base.GenerationRequest`;
a backend that honours it says so by :class:`Samples`, and says whether SD and plain
decoding draw the very same tokens for one seed (docs/method.md, "Sampling").
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pytest_specdec.axes.sampling import GREEDY, Sampling


@runtime_checkable
class Samples(Protocol):
    """A backend that honours a request's temperature, top-p and seed (the others decode greedily only)."""

    def sampled_draws_per_seed(self) -> str:
        """``same``: with one seed, SD and plain draw the very same tokens (SD accepts a draft token only
        where it equals the target's own draw, one draw per emitted token), so the exact check applies;
        ``distribution``: only the distribution is the same (the draft consumes draws), so it is tested."""
        ...


__all__ = ["GREEDY", "Samples", "Sampling"]
