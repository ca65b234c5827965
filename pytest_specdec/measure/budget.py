"""A run's time budget (``--specdec-time-budget 10m``): each comparison's share, and when its pairs must stop.

The budget is shared in turns: a comparison gets what is left divided by the measuring tests not yet
run, so a fast first test leaves more to the later ones. A comparison always reaches its first look
(an interval needs its pairs); after that it stops at a look once the pairs to the next look, and the
distribution check that follows them where one runs, would end past its share. Both are estimated from
the pairs measured so far, never assumed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class TimeBudget:
    """The run's budget in seconds, and the measuring tests it is shared among."""

    total_s: float
    tests: int = 1
    started: float = field(default_factory=time.monotonic)
    seen: set[str] = field(default_factory=set)

    def share(self, nodeid: str, now: float | None = None) -> float:
        """Seconds for the next comparison of ``nodeid``: what is left over the tests not yet begun (this one too)."""
        now = time.monotonic() if now is None else now
        self.seen.add(nodeid)
        left = self.total_s - (now - self.started)
        return max(0.0, left) / max(1, self.tests - len(self.seen) + 1)


def distribution_seconds(per_pair_s: float, generations: int, prompts: int, tokens: int, max_tokens: int) -> float:
    """The distribution check's expected seconds: ``generations`` continuations of ``tokens`` per arm and
    prompt, at the rate a pair (one generation of ``max_tokens`` per arm) ran."""
    return per_pair_s * generations * prompts * tokens / max(1, max_tokens)


def stop_for_time(
    elapsed_s: float, budget_s: float, per_pair_s: float, pairs_to_next_look: int, after_s: float
) -> bool:
    """Whether the pairs to the next look and what follows them (``after_s``) would end past ``budget_s``."""
    return elapsed_s + per_pair_s * pairs_to_next_look + after_s > budget_s
