"""The confirm step re-measures a flip only as it ran: greedy decode speedups at short prompts; others keep their flip."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.blame import _plan
from pytest_specdec.store.records import ComparisonRecord


@pytest.mark.parametrize(
    ("scope", "named"),
    [
        ({"sampling": "T=0.7"}, "T=0.7"),
        ({"speedup_of": "end-to-end"}, "end-to-end"),
        ({"context": "8192"}, "ctx=8K"),
        ({"sampling": "T=0.7", "context": "1000"}, "T=0.7, ctx=1000"),
    ],
)
def test_a_sampled_end_to_end_or_long_context_flip_is_not_re_measured_as_greedy_decode(
    make_record: Callable[..., ComparisonRecord], scope: dict[str, str], named: str
) -> None:
    record = make_record("code", 1.5, "refuted", None)
    assert _plan(record).sampling.greedy  # a greedy decode result is re-measured
    with pytest.raises(SpecdecUsageError, match=f"at short prompts only, and this result is {named}$"):
        _plan(replace(record, scope={**record.scope, **scope}))
