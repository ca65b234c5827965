"""The confirm step re-measures a flip only as it ran (greedy decode speedups at short prompts); others keep their flip,
and so does any flip the old-versus-new run cannot finish."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_specdec.backends.base import OldRelease
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate import blame as blame_module
from pytest_specdec.gate.blame import _plan, ab_flips
from pytest_specdec.gate.change import Call
from pytest_specdec.gate.legs import LegConfig
from pytest_specdec.stats import Verdict
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
from pytest_specdec.store.records import BoundRecord, ComparisonRecord, Provenance


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


def _with_acceptance(record: ComparisonRecord, verdict: str) -> ComparisonRecord:
    bounds = (*record.judgement.bounds, BoundRecord("acceptance", "min", 0.6, Verdict(verdict)))
    return replace(record, judgement=replace(record.judgement, bounds=bounds))


def test_an_acceptance_flip_stands_without_an_old_versus_new_run(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    """Acceptance does not move with the machine's speed: the A/B (speedup only) cannot clear it, and is not run."""
    accepted = _with_acceptance(make_record("code", 1.1, "holds", None), "holds")
    store = BaselineStore(tmp_path, "Apple-M1-Max-64GB")
    store.write("mlx", {baseline_key(accepted): BaselineEntry(accepted, Provenance.MEASURED, "2026-11-01")})
    tonight = _with_acceptance(make_record("code", 1.1, "holds", None), "refuted")
    never = OldRelease("mlx-lm 0.32.2", python="/nonexistent/python")  # a worker started here would fail
    calls = ab_flips([tonight], LegConfig("mlx"), never, new_python="/nonexistent/python", arguments=[],
                     out=tmp_path, baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert (
        call.line
        == "acceptance min=0.6 flipped, and the old-versus-new run measures the speedup only — the flip stands"
    )


def test_an_old_versus_new_run_that_breaks_in_any_way_leaves_the_flip_standing(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_pipe(*_: object, **__: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")  # the old release's worker died between two requests

    monkeypatch.setattr(blame_module, "run_release_ab", broken_pipe)
    monkeypatch.setattr(blame_module, "ReleasePair", lambda *_, **__: SimpleNamespace(close=lambda: None))
    record = make_record("code", 1.41, "refuted", None)
    old = OldRelease("mlx-lm 0.32.2")
    calls = ab_flips([record], LegConfig("mlx"), old, new_python=sys.executable, arguments=[], out=tmp_path,
                     baselines=tmp_path, machine_class="Apple-M1-Max-64GB")  # fmt: skip
    (call,) = calls.values()
    assert call.call is Call.RELEASE_CHANGED
    assert call.line == "the old-versus-new run failed (BrokenPipeError: [Errno 32] Broken pipe) — the flip stands"
