"""The confirm step re-measures a flip only as it ran: greedy decode speedups; others keep their flip."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.blame import _plan
from pytest_specdec.store.records import ComparisonRecord


@pytest.mark.parametrize(
    ("scope", "named"),
    [({"sampling": "T=0.7"}, "T=0.7, decode"), ({"speedup_of": "end-to-end"}, "greedy, end-to-end")],
)
def test_a_sampled_or_end_to_end_flip_is_not_re_measured_as_greedy_decode(
    make_record: Callable[..., ComparisonRecord], scope: dict[str, str], named: str
) -> None:
    record = make_record("code", 1.5, "refuted", None)
    assert _plan(record).sampling.greedy  # a greedy decode result is re-measured
    with pytest.raises(SpecdecUsageError, match=f"greedy decode speedups only, and this result is {named}"):
        _plan(replace(record, scope={**record.scope, **scope}))
