"""The session: specs become plans, results are judged, checked and kept; backends load once."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from pytest_specdec.axes import Conditions
from pytest_specdec.backends.base import Arm, Backend, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds
from pytest_specdec.config import Settings
from pytest_specdec.session import ComparisonSpec, SpecdecSession
from pytest_specdec.store.records import Change, Conclusion


def session(tmp_path: Path, **options: str) -> tuple[SpecdecSession, list[ModelPair]]:
    loaded: list[ModelPair] = []

    def loader(name: str, pair: ModelPair, backend_options: Mapping[str, str]) -> Backend:
        loaded.append(pair)
        return SimulatedBackend(pair, backend_options)

    settings = Settings(
        backend="simulated",
        pair=ModelPair("t", "d"),
        profile="embedded",
        max_tokens=8,
        backend_options={"noise": "0.01", **options},
    )
    made = SpecdecSession.create(settings, "M", tmp_path / "baselines")
    made.pool.loader = loader
    return made, loaded


def test_a_spec_falls_back_to_the_settings(tmp_path: Path) -> None:
    made, _ = session(tmp_path)
    plan = made.plan(ComparisonSpec("prose", conditions=Conditions({"num_draft": 5})), Expectations())
    assert (plan.category, plan.max_tokens, plan.treatment.num_draft) == ("prose", 8, 5)
    assert plan.baseline == Arm("plain")
    assert plan.treatment.speculative
    assert plan.require_identical_output
    assert plan.stop_when is None


def test_arms_that_differ_in_more_than_sd_need_no_identical_output(tmp_path: Path) -> None:
    made, _ = session(tmp_path)
    spec = ComparisonSpec(
        "code", baseline=Arm("7b", options={"model": "a"}), treatment=Arm("30b", options={"model": "b"})
    )
    assert not made.plan(spec, Expectations()).require_identical_output


def test_compare_judges_checks_and_keeps_the_result(tmp_path: Path) -> None:
    made, loaded = session(tmp_path, speedup="1.6")
    expect = Expectations(speedup=SpeedupBounds(max=1.3))
    first = made.compare("t.py::test", ComparisonSpec("code"), expect)
    second = made.compare("t.py::test", ComparisonSpec("prose"), expect)
    assert first.record.judgement.conclusion is Conclusion.REFUTED
    assert first.failure is not None
    assert first.record.check is not None
    assert first.record.check.change is Change.NEW
    assert made.records == [first.record, second.record]
    assert loaded == [ModelPair("t", "d")], "one backend per pair and options, loaded once"
    assert first.record.scope["max_tokens"] == "8"
    assert first.record.theory is not None
    assert first.record.theory.c is None


def test_two_model_arms_load_a_backend_each_through_the_pool(tmp_path: Path) -> None:
    made, loaded = session(tmp_path)
    spec = ComparisonSpec("code", baseline=Arm("a", options={"model": "a"}), treatment=Arm("b", options={"model": "b"}))
    result = made.compare("t.py::test", spec, Expectations())
    assert loaded == [ModelPair("a", None), ModelPair("b", None)]
    assert result.record.judgement.conclusion is Conclusion.MEASURED
    assert result.record.baseline_arm == "a"
    assert result.record.treatment_arm == "b"


def test_run_record_carries_every_result_and_close_releases_backends(tmp_path: Path) -> None:
    made, loaded = session(tmp_path)
    made.compare("t.py::test", ComparisonSpec("code"), Expectations())
    run = made.run_record()
    assert run.machine_class == "M"
    assert len(run.comparisons) == 1
    assert run.started <= run.finished
    made.close()
    made.compare("t.py::test", ComparisonSpec("code"), Expectations())
    assert len(loaded) == 2, "a closed pool loads afresh"


def test_a_comparison_during_which_the_machine_swapped_is_not_measurable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The document's memory argument: a run against the disk is not a measurement of SD."""
    import pytest_specdec.session as session_module

    readings = iter([1200, 1460])  # pswpin before and after the comparison
    monkeypatch.setattr(session_module, "swap_ins", lambda: next(readings))
    made, _ = session(tmp_path, speedup="1.6")
    result = made.compare("t.py::test", ComparisonSpec("code"), Expectations(speedup=SpeedupBounds(max=1.3)))
    judgement = result.record.judgement
    assert judgement.conclusion is Conclusion.NOT_MEASURABLE
    assert judgement.failure is not None
    assert judgement.failure.startswith("not measurable: the machine swapped (260 pages swapped in")
    assert result.failure == judgement.failure
    assert result.record.check is None, "never compared with a baseline, never a candidate"


def test_a_machine_that_did_not_swap_measures_as_usual(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_specdec.session as session_module

    monkeypatch.setattr(session_module, "swap_ins", lambda: 1200)
    made, _ = session(tmp_path, speedup="1.6")
    result = made.compare("t.py::test", ComparisonSpec("code"), Expectations(speedup=SpeedupBounds(max=1.3)))
    assert result.record.judgement.conclusion is Conclusion.REFUTED


def test_swap_ins_are_read_from_the_kernel_where_it_says_them() -> None:
    from pytest_specdec.hardware import swap_ins

    if not Path("/proc/vmstat").exists():
        pytest.skip("no /proc/vmstat on this machine")
    count = swap_ins()
    assert isinstance(count, int)
    assert count >= 0
