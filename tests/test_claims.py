"""Claims: marker parsing, the three-valued judgement, and the record a judged outcome becomes."""

from __future__ import annotations

import pytest

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import (
    ClaimInfo,
    Expectations,
    SpeedupBounds,
    judge,
    judge_outcome,
    judge_quantity,
    parse_acceptance,
    parse_claim,
    parse_speedup,
    record_outcome,
)
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Interval, Verdict
from pytest_specdec.store.records import ComparisonRecord, Conclusion, Judgement, Role, migrate_comparison


def interval(estimate: float, low: float, high: float) -> Interval:
    return Interval(estimate, low, high, 0.95, 10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs min=, max= or both"),
        ({"min": 1.5, "max": 1.2}, "max is below min"),
        ({"min": "fast"}, "min must be a number"),
        ({"mni": 1.0}, "has no argument 'mni'"),
    ],
)
def test_bad_speedup_markers_are_one_line_usage_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecdecUsageError, match=message):
        parse_speedup((), kwargs)


def test_markers_parse_into_frozen_data() -> None:
    assert parse_speedup((), {"min": 1, "max": 2}) == SpeedupBounds(1.0, 2.0)
    assert parse_acceptance((), {"min": 0.5}).min == 0.5
    claim = parse_claim(("a", "doc §1", "quote"), {"applies_to": "seed"})
    assert claim == ClaimInfo("a", "doc §1", "quote", ("seed",))
    assert claim.gates("seed")
    assert not claim.gates("embedded")
    with pytest.raises(SpecdecUsageError, match="got 'id' twice"):
        parse_claim(("a",), {"id": "b", "source": "s", "quote": "q"})


@pytest.mark.parametrize(
    ("speedup", "expected"),
    [
        (interval(1.5, 1.35, 1.7), Verdict.REFUTED),  # wholly above max=1.3
        (interval(1.0, 0.9, 1.1), Verdict.HOLDS),  # wholly below
        (interval(1.3, 1.2, 1.4), Verdict.INCONCLUSIVE),  # straddles
    ],
)
def test_a_max_bound_is_judged_by_where_the_interval_lies(speedup: Interval, expected: Verdict) -> None:
    (bound,) = judge(Expectations(speedup=SpeedupBounds(max=1.3)), speedup, None)
    assert bound.verdict is expected


def test_an_acceptance_bound_without_acceptance_data_is_inconclusive() -> None:
    expect = Expectations(acceptance=parse_acceptance((), {"min": 0.5}))
    (bound,) = judge(expect, interval(1.0, 0.9, 1.1), None)
    assert bound.verdict is Verdict.INCONCLUSIVE


def test_a_quantity_outside_a_gating_bound_fails_and_a_reference_one_only_shows() -> None:
    refuted = judge_quantity("r_v", interval(1.5, 1.4, 1.6), SpeedupBounds(max=1.2), gating=True, strict=False)
    assert refuted.failure is not None
    assert "outside the claimed max=1.2" in refuted.failure
    shown = judge_quantity("r_v", interval(1.5, 1.4, 1.6), SpeedupBounds(max=1.2), gating=False, strict=False)
    assert shown.failure is None
    assert shown.line.endswith("reference: refuted")


def judged(speedup: str, expect: Expectations, *, unmeasurable: str | None = None, **options: str) -> ComparisonRecord:
    """A simulated comparison judged and recorded: the one shape from the judge to the gate."""
    backend = SimulatedBackend(ModelPair("t", "d"), {"speedup": speedup, "noise": "0.01", **options})
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("sd", speculative=True, num_draft=3), 16, 6, 6, 0.95
    )
    comparison = run_comparison(backend, plan)
    settings = Settings(backend="simulated", pair=backend.pair, profile="embedded")
    found = backend.fingerprint()
    judgement = judge_outcome(settings, found, comparison, expect, unmeasurable=unmeasurable)
    return record_outcome(
        "t.py::test", settings, found, comparison, expect, judgement=judgement, pair=backend.pair, model_digest="digest",
        notes=["a note"],
    )  # fmt: skip


def test_a_refuted_gating_bound_fails_with_the_release_and_records_refuted() -> None:
    record = judged("1.6", Expectations(speedup=SpeedupBounds(max=1.3)), release="9.9")
    assert record.judgement.failure is not None
    assert "SD now pays off (simulated 9.9)" in record.judgement.failure
    assert record.judgement.conclusion is Conclusion.REFUTED
    assert record.judgement.bounds[0].verdict is Verdict.REFUTED
    assert record.notes == ("a note",)
    assert record.trials == 6
    assert len(record.samples) == 6
    assert record.num_draft == 3


def test_a_claim_for_another_profile_is_reference_only() -> None:
    expect = Expectations(speedup=SpeedupBounds(max=1.3), claim=ClaimInfo("d", "doc", "q", ("seed",)))
    record = judged("1.6", expect)
    assert record.judgement.failure is None
    assert record.judgement.role is Role.OTHER_PROFILE
    assert record.judgement.shown == "reference: refuted"


def test_a_lossy_sd_arm_fails_whatever_the_speed_says() -> None:
    record = judged("1.6", Expectations(speedup=SpeedupBounds(min=1.0)), lossless="false")
    assert record.judgement.failure is not None
    assert "SD changed the output" in record.judgement.failure
    assert record.judgement.conclusion is Conclusion.FAILED


def test_arms_that_cannot_differ_get_no_verdict_and_say_why() -> None:
    reason = "not measurable: SD not engaged (the sd arm drafted 0 tokens)"
    record = judged("1.6", Expectations(speedup=SpeedupBounds(max=1.3)), unmeasurable=reason)
    assert record.judgement.failure == reason
    assert record.judgement.conclusion is Conclusion.NOT_MEASURABLE
    assert record.judgement.bounds == (), "no verdict word on any bound"


def test_a_lossy_sd_arm_gets_no_verdict_even_when_the_bound_is_refuted() -> None:
    record = judged("1.6", Expectations(speedup=SpeedupBounds(max=1.3)), lossless="false")
    assert record.judgement.conclusion is Conclusion.FAILED
    assert record.judgement.failure is not None
    assert "differs from plain decoding at token 8" in record.judgement.failure
    assert record.judgement.bounds == ()


def test_conclusion_keeps_its_verdict_and_reference_is_said_by_the_role_alone() -> None:
    assert Conclusion.of(Verdict.HOLDS) is Conclusion.HOLDS
    assert Conclusion.HOLDS.verdict is Verdict.HOLDS
    assert Conclusion.FAILED.verdict is None
    assert Judgement(Conclusion.HOLDS, Role.OTHER_PROFILE).shown == "reference: holds"
    assert Judgement(Conclusion.HOLDS, Role.REFERENCE_ROW).shown == "reference: holds"
    assert Judgement(Conclusion.FAILED, Role.OTHER_PROFILE).shown == "failed"
    assert Judgement(Conclusion.HOLDS).shown == "holds"


def test_a_schema_1_comparison_is_migrated_to_one_judgement() -> None:
    flat = {"verdict": "reference: refuted", "gating": False, "bounds": [], "failure": None, "warning": None,
            "scope": {"profile": "embedded"}}  # fmt: skip
    moved = migrate_comparison(flat)
    assert moved["judgement"] == {
        "conclusion": "refuted", "role": "other-profile", "bounds": [], "failure": None, "warning": None
    }  # fmt: skip
    row = migrate_comparison({"verdict": "holds", "gating": False, "scope": {"role": "reference"}})
    assert row["judgement"]["role"] == "reference-row"
    assert "role" not in row["scope"]
    assert migrate_comparison(moved) == moved
