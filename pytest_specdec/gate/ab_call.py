"""Blame the release, not the machine: what a same-night old-versus-new comparison says about a flip.

A flip is confirmed only when the new release's interval decides the claim the other
way from its accepted baseline **and** the change interval (new speedup ÷ old speedup,
both measured tonight, paired) excludes 1. The machine moved only when that is shown: the
change interval contains 1 **and the old release's own interval contradicts the accepted
verdict too** (both releases, tonight, on the other side of the bound; the old release's interval
widened by the machine's run-to-run spread once that is known, since the accepted verdict was read on
another night: :mod:`pytest_specdec.store.night_statistics`) — then the baseline
no longer describes this machine: "re-baseline needed". Where neither is shown (the old
release undecided, or on the accepted side, and the change interval containing 1) the flip
is *not confirmed*: said in its own word, never as agreement. When the servers' own decode
rates moved against this process's clock between releases, a counter changed its meaning:
"metric changed", never a flip.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pytest_specdec.release_ab import ReleaseAB
from pytest_specdec.stats import Interval, Verdict, verdict_on
from pytest_specdec.store.night_statistics import UNKNOWN, RunSpread, widened

METRIC_TOLERANCE = 0.05  # a server-vs-client rate ratio that moves less than 5 % is noise in the timers


class Call(StrEnum):
    """The verdict on one flip."""

    RELEASE_CHANGED = "the release changed the conclusion"
    MACHINE_MOVED = "the machine moved, not the release"  # shown: both releases contradict the accepted verdict
    NOT_CONFIRMED = "flip not confirmed"  # neither the release nor the machine shown to have moved
    METRIC_CHANGED = "metric changed, not speed"
    NO_FLIP = "no flip tonight"


@dataclass(frozen=True)
class Blame:
    """The call and the figures it rests on, in one line."""

    call: Call
    line: str


def _shown(interval: Interval) -> str:
    return f"{interval.estimate:.2f}x [{interval.low:.2f}, {interval.high:.2f}]"


def settles(ab: ReleaseAB, kind: str, bound: float, baseline: Verdict, spread: RunSpread = UNKNOWN) -> bool:
    """Whether tonight's figures settle the flip either way, so the old-versus-new run may stop measuring.

    Settled: the release changed the conclusion, the machine moved, a counter changed its meaning, or the
    new release is back on the accepted side. Not settled: the new release undecided, or against the accepted
    verdict while neither the change interval nor the old release shows who moved it.

    >>> from pytest_specdec.stats import Interval
    >>> wide = Interval(1.0, 0.8, 1.3, 0.98, 96)
    >>> settles(ReleaseAB(old=wide, new=Interval(1.22, 1.1, 1.35, 0.98, 96), change=wide, metric_change=None, pairs=96),
    ...         "max", 1.2, Verdict.HOLDS)
    False
    """
    if blame(ab, kind, bound, baseline, spread).call is not Call.NOT_CONFIRMED:
        return True
    return verdict_on(ab.new, kind, bound) is baseline


def blame(ab: ReleaseAB, kind: str, bound: float, baseline: Verdict, spread: RunSpread = UNKNOWN) -> Blame:
    """The call on one bound (``kind`` ``min`` or ``max``) whose accepted verdict was ``baseline``; ``spread``:
    the machine's run-to-run spread, which the old release's reading against that verdict must stand beyond."""
    figures = (
        f"old release {_shown(ab.old)}, new release {_shown(ab.new)}, change {_shown(ab.change)} ({ab.pairs} pairs)"
    )
    metric = ab.metric_change
    if metric is not None and (metric.low > 1.0 + METRIC_TOLERANCE or metric.high < 1.0 - METRIC_TOLERANCE):
        return Blame(
            Call.METRIC_CHANGED,
            f"{Call.METRIC_CHANGED.value}: the server's decode rate against this process's clock moved "
            f"{_shown(metric)} between releases — {figures}",
        )
    new = verdict_on(ab.new, kind, bound)
    flipped = {new, baseline} == {Verdict.HOLDS, Verdict.REFUTED}
    if not flipped:  # the night's comparison flipped; tonight's run of both releases does not repeat it
        return Blame(
            Call.NOT_CONFIRMED,
            f"{Call.NOT_CONFIRMED.value}: the old-versus-new run finds the new release {new.value} against "
            f"{kind}={bound:g}, where the night's comparison flipped — {figures}",
        )
    if ab.change.low > 1.0 or ab.change.high < 1.0:
        return Blame(
            Call.RELEASE_CHANGED, f"{Call.RELEASE_CHANGED.value} ({kind}={bound:g} now {new.value}) — {figures}"
        )
    old = verdict_on(widened(ab.old, spread), kind, bound)
    if old is new:  # the old release, tonight, contradicts the accepted verdict as well: shown
        return Blame(
            Call.MACHINE_MOVED,
            f"{Call.MACHINE_MOVED.value}: both releases are {new.value} against {kind}={bound:g} tonight and the "
            f"change interval contains 1 — {figures}",
        )
    return Blame(
        Call.NOT_CONFIRMED,
        f"{Call.NOT_CONFIRMED.value}: the new release is {new.value} against {kind}={bound:g}, the old release is "
        f"{old.value} and the change interval contains 1 — neither the release nor the machine is shown to have "
        f"moved; {figures}",
    )
