"""Blame the release, not the machine: the call on one flip from a same-night old-versus-new run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdec.gate.ab_call import Call, blame, settles
from pytest_specdec.gate.ab_run import ab_pairs
from pytest_specdec.gate.legs import GateConfig, LegConfig
from pytest_specdec.gate.runs import flip_pairs
from pytest_specdec.release_ab import ReleaseAB
from pytest_specdec.stats import Interval, Verdict
from pytest_specdec.store.baselines import BaselineStore, baseline_key
from pytest_specdec.store.night_statistics import RunSpread
from pytest_specdec.store.nights import Night
from pytest_specdec.store.records import ComparisonRecord


def around(value: float, half: float = 0.05) -> Interval:
    return Interval(value, value * (1 - half), value * (1 + half), 0.98, 96)


@pytest.mark.parametrize(
    ("old", "new", "change", "metric", "call"),
    [
        (0.8, 1.3, 1.6, None, Call.RELEASE_CHANGED),  # the new release decides the other way, and moved alone
        (1.3, 1.3, 1.0, None, Call.MACHINE_MOVED),  # both releases contradict the accepted verdict tonight
        (1.2, 1.3, 1.0, None, Call.NOT_CONFIRMED),  # the old release undecided: the machine is not shown to move
        (1.1, 1.3, 1.0, None, Call.NOT_CONFIRMED),  # the old release holds: neither is shown
        (0.8, 0.85, 1.06, None, Call.NOT_CONFIRMED),  # tonight's A/B finds the new release still holding
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


def test_the_machine_moved_only_when_the_old_release_stands_beyond_the_spread_between_nights() -> None:
    """1.3x [1.235, 1.365] refutes max=1.2 tonight; on a machine whose nights wander 4 % it does not show that the
    accepted verdict, read on another night, no longer holds."""
    ab = ReleaseAB(around(1.3), around(1.3), around(1.0, 0.03), None, 96)
    assert blame(ab, "max", 1.2, Verdict.HOLDS, RunSpread(None, 3)).call is Call.MACHINE_MOVED, "not yet known"
    assert blame(ab, "max", 1.2, Verdict.HOLDS, RunSpread(0.01, 9)).call is Call.MACHINE_MOVED
    wandering = blame(ab, "max", 1.2, Verdict.HOLDS, RunSpread(0.04, 9))
    assert wandering.call is Call.NOT_CONFIRMED
    assert "the old release is inconclusive" in wandering.line
    assert settles(ab, "max", 1.2, Verdict.HOLDS, RunSpread(0.04, 9)) is False, "measured on, carried to the next night"


@pytest.mark.parametrize(
    ("old", "new", "change", "settled"),
    [
        (0.8, 1.3, 1.6, True),  # the release changed the conclusion
        (1.3, 1.3, 1.0, True),  # the machine moved: shown by the old release
        (0.8, 0.85, 1.06, True),  # the new release is back on the accepted side: the flip was the night's
        (1.1, 1.3, 1.0, False),  # who moved it is not shown: measure more
        (1.2, 1.2, 1.0, False),  # the new release undecided: measure more
    ],
)
def test_the_old_versus_new_run_measures_on_until_the_flip_is_settled_either_way(
    old: float, new: float, change: float, settled: bool
) -> None:
    ab = ReleaseAB(around(old), around(new), around(change, 0.03), None, 96)
    assert settles(ab, "max", 1.2, Verdict.HOLDS) is settled


def test_a_flip_undecided_night_after_night_may_take_twice_the_pairs_within_the_window() -> None:
    assert ab_pairs(0, 0.5, None) == (768, "up to 768 pairs"), "looks at 96, 192, 384 and 768 on the first night"
    assert ab_pairs(1, 0.5, None)[0] == 1536
    assert ab_pairs(9, 0.5, None)[0] == 3072, "doubling stops at 4 x the first night's cap"
    pairs, said = ab_pairs(2, 1.0, 2000.0)  # 3072 asked, 2000 s hold 2000 quadruples of a second each
    assert pairs == 2000
    assert said == (
        "up to 2000 pairs (the 3072 this flip's night 3 may take do not fit the leg's share of window-minutes tonight)"
    )
    assert ab_pairs(2, 10.0, 100.0)[0] == 96, "never fewer than one look's"


def test_the_nights_a_flip_has_stood_come_from_the_runners_history(
    runner_state: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    flip = make_record("code", 1.41, "refuted", None)
    line = {"machine_class": "M", "backend": "mlx", "release": "mlx-lm 0.33.0", "key": baseline_key(flip),
            "nodeid": flip.nodeid, "category": "code", "speedup": {"estimate": 1.41, "low": 1.3, "high": 1.5},
            "verdict": "refuted", "bounds": {}}  # fmt: skip
    store = BaselineStore(runner_state, "M")
    store.append_history([Night.of_line({**line, "time": "2026-11-01", "change": "flip"})])  # last night, tonight's
    store.append_history([Night.of_line({**line, "time": "2026-11-02", "change": "flip"})])
    config = GateConfig(window_minutes=300, legs={"mlx": LegConfig("mlx")})
    ((pairs, said),) = flip_pairs(config, [flip], "M").values()
    assert (pairs, said) == (1536, "up to 1536 pairs"), "the second night in a row doubles the first night's cap"


def test_the_old_versus_new_run_reads_the_spread_from_the_runners_nights(
    runner_state: Path, tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    from pytest_specdec.gate.ab_run import _judged_bound
    from pytest_specdec.store.baselines import BaselineEntry
    from pytest_specdec.store.records import Provenance

    accepted = make_record("code", 0.94, "holds", None)
    repository = BaselineStore(tmp_path / "baselines", "M")
    entry = BaselineEntry(accepted, Provenance.MEASURED, "2026-11-20T00:00:00+00:00")
    repository.write("mlx", {baseline_key(accepted): entry})
    line = {"machine_class": "M", "backend": "mlx", "release": "mlx-lm 0.33.0", "key": baseline_key(accepted),
            "nodeid": accepted.nodeid, "category": "code", "verdict": "holds", "bounds": {}}  # fmt: skip
    levels = [0.94, 1.02, 0.88, 0.99, 0.9, 1.0]
    BaselineStore(runner_state, "M").append_history([
        Night.of_line({**line, "time": f"2026-11-{day:02d}", "speedup": {"estimate": v, "low": v * 0.98, "high": v / 0.98}})
        for day, v in enumerate(levels, 1)
    ])  # fmt: skip
    BaselineStore(runner_state, "M").append_history(
        [Night.of_line({**line, "time": "2026-11-25", "speedup": {"estimate": 1.41, "low": 1.38, "high": 1.44}})]
    )  # a night since the acceptance counts too (tonight's is not yet kept)
    judged = _judged_bound(make_record("code", 1.41, "refuted", None), tmp_path / "baselines", "M")
    assert judged is not None
    kind, bound, verdict, spread = judged
    assert (kind, bound, verdict) == ("max", 1.3, Verdict.HOLDS)
    assert spread.nights == 7
    assert spread.tau == pytest.approx(0.152, abs=0.005)


def test_the_flip_benchmark_reads_a_nights_truth_as_its_comparison_reads_the_prompts() -> None:
    """``studies/release_change.py --by-level`` bands each night by its truth: the release's speedup times the
    night's shift and its prompts' factor. On a machine without noise the comparison measures exactly that."""
    from dataclasses import replace

    from pytest_specdec.backends.base import ModelPair
    from pytest_specdec.backends.simulated.adapter import SimulatedBackend
    from pytest_specdec.measure import run_comparison
    from studies.release_change import prompts_factor
    from studies.run_spread import PLAN

    backend = SimulatedBackend(ModelPair("t", "d"), {"speedup": "1.242", "noise": "0", "prompt_spread": "0.05",
                                                     "seed": "3"})  # fmt: skip
    plan = replace(PLAN, order="3")
    factor = prompts_factor(backend, plan)
    assert factor != pytest.approx(1.0, abs=0.005), "four prompts 5 % apart move the night's level"
    measured = run_comparison(backend, plan, clock=lambda: 0.0).speedup.estimate
    assert measured == pytest.approx(1.242 * factor, rel=1e-6)
