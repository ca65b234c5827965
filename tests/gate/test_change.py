"""Blame the release, not the machine: the call on one flip from a same-night old-versus-new run."""

from __future__ import annotations

import pytest

from pytest_specdec.gate.change import Call, blame
from pytest_specdec.release_ab import ReleaseAB
from pytest_specdec.stats import Interval, Verdict


def around(value: float, half: float = 0.05) -> Interval:
    return Interval(value, value * (1 - half), value * (1 + half), 0.98, 96)


@pytest.mark.parametrize(
    ("old", "new", "change", "metric", "call"),
    [
        (0.8, 1.3, 1.6, None, Call.RELEASE_CHANGED),  # the new release decides the other way, and moved alone
        (1.3, 1.3, 1.0, None, Call.MACHINE_MOVED),  # both releases contradict the accepted verdict tonight
        (1.2, 1.3, 1.0, None, Call.NOT_CONFIRMED),  # the old release undecided: the machine is not shown to move
        (1.1, 1.3, 1.0, None, Call.NOT_CONFIRMED),  # the old release holds: neither is shown
        (0.8, 0.85, 1.06, None, Call.NO_FLIP),  # tonight the new release still holds
        (0.8, 1.3, 1.6, 0.5, Call.METRIC_CHANGED),  # the server's counters moved against the clock
        (0.8, 1.3, 1.6, 1.02, Call.RELEASE_CHANGED),  # a timer difference within 5 % is noise
    ],
)
def test_the_call_on_a_flip_of_max_1_2(old: float, new: float, change: float, metric: float | None, call: Call) -> None:
    ab = ReleaseAB(around(old), around(new), around(change, 0.03), None if metric is None else around(metric, 0.02), 96)
    found = blame(ab, "max", 1.2, Verdict.HOLDS)
    assert found.call is call
    assert "old release" in found.line
    assert "96 pairs" in found.line
