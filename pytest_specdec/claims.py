"""Markers as data: what a test claims, and how a measurement answers it.

``@pytest.mark.speedup(min=, max=, of=)``, ``@pytest.mark.acceptance(min=)`` and
``@pytest.mark.claim(id=, source=, quote=, applies_to=)`` are parsed here into frozen
dataclasses; the markers of conditions (``sampling``, the speedup's ``of=`` …) are the axes'
own (:mod:`pytest_specdec.axes`) and reach :class:`Expectations` as one
:class:`~pytest_specdec.axes.Conditions`. Unknown or malformed arguments are usage errors with one line. A
measured comparison is judged against them (:func:`judge_outcome`) and flattened into
the stored record (:func:`record_outcome`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pytest_specdec.axes import DEFAULT_CONDITIONS, Conditions, marker_keywords
from pytest_specdec.backends.base import Fingerprint, ModelPair, NotRun
from pytest_specdec.config import Settings
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.machine_load import MachineLoad
from pytest_specdec.measure import Comparison, StopRule
from pytest_specdec.measure.looks import pairs_to_decide, undecided_because
from pytest_specdec.measure.sampled import lossless_failure
from pytest_specdec.stats import Interval, Verdict, combine, verdict_at_least, verdict_at_most
from pytest_specdec.store.records import (
    MEASUREMENT_PROTOCOL,
    BoundRecord,
    ComparisonRecord,
    Conclusion,
    Judgement,
    Role,
    SampleRecord,
    TheoryRecord,
)


@dataclass(frozen=True)
class SpeedupBounds:
    """The claimed range of the speedup (SD tok/s ÷ plain tok/s)."""

    min: float | None = None
    max: float | None = None

    def describe(self) -> str:
        """``min=1.0``, ``max=1.3`` or both (what the speedup times, ``of=``, is a condition: the metric axis)."""
        parts = [f"min={self.min:g}"] if self.min is not None else []
        parts += [f"max={self.max:g}"] if self.max is not None else []
        return " ".join(parts) or "none"


@dataclass(frozen=True)
class AcceptanceBound:
    """The claimed minimum acceptance rate of draft tokens."""

    min: float | None = None


@dataclass(frozen=True)
class ClaimInfo:
    """Where a claim comes from, and which model profiles its bounds were made for."""

    id: str
    source: str
    quote: str
    applies_to: tuple[str, ...] = ()

    def gates(self, profile: str) -> bool:
        """Whether the claim's bounds decide pass/fail under ``profile``."""
        return not self.applies_to or profile in self.applies_to


@dataclass(frozen=True)
class Expectations:
    """Everything a test's markers claim."""

    speedup: SpeedupBounds = SpeedupBounds()
    acceptance: AcceptanceBound = AcceptanceBound()
    claim: ClaimInfo | None = None
    conditions: Conditions = DEFAULT_CONDITIONS  # what the markers set to run under (not a claim): sampling, metric …

    @property
    def bound_count(self) -> int:
        """How many bounds the test states (the error budget is split across them)."""
        return sum(b is not None for b in (self.speedup.min, self.speedup.max, self.acceptance.min))

    @property
    def has_bounds(self) -> bool:
        """Whether any bound was stated."""
        return self.bound_count > 0


def _number(marker: str, key: str, value: object, *, low: float = 0.0, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low < float(value) < high:
        raise SpecdecUsageError(
            f"@pytest.mark.{marker}({key}={value!r}): {key} must be a number in ({low:g}, {high:g})"
        )
    return float(value)


def parse_speedup(args: Sequence[object], kwargs: Mapping[str, object]) -> SpeedupBounds:
    """``speedup(min=None, max=None, of="decode")`` → bounds, with ``min ≤ max`` enforced (``of`` is the metric axis's)."""
    marker_keywords("speedup", args, kwargs, ("min", "max", "of"))
    low = kwargs.get("min")
    high = kwargs.get("max")
    bounds = SpeedupBounds(
        min=None if low is None else _number("speedup", "min", low),
        max=None if high is None else _number("speedup", "max", high),
    )
    if bounds.min is None and bounds.max is None:
        raise SpecdecUsageError("@pytest.mark.speedup needs min=, max= or both")
    if bounds.min is not None and bounds.max is not None and bounds.max < bounds.min:
        raise SpecdecUsageError(f"@pytest.mark.speedup(min={bounds.min:g}, max={bounds.max:g}): max is below min")
    return bounds


def parse_acceptance(args: Sequence[object], kwargs: Mapping[str, object]) -> AcceptanceBound:
    """``acceptance(min=None)`` → a bound on the acceptance rate in (0, 1]."""
    marker_keywords("acceptance", args, kwargs, ("min",))
    low = kwargs.get("min")
    return AcceptanceBound(min=None if low is None else _number("acceptance", "min", low, high=1.000001))


def parse_claim(args: Sequence[object], kwargs: Mapping[str, object]) -> ClaimInfo:
    """``claim(id, source, quote, applies_to=...)``; id/source/quote may be positional."""
    names = ("id", "source", "quote", "applies_to")
    if len(args) > 3:
        raise SpecdecUsageError("@pytest.mark.claim takes at most id, source, quote positionally")
    merged = dict(zip(names, args, strict=False))
    duplicated = set(merged) & set(kwargs)
    if duplicated:
        raise SpecdecUsageError(f"@pytest.mark.claim got {sorted(duplicated)[0]!r} twice")
    merged.update(kwargs)
    marker_keywords("claim", (), merged, names)
    for key in ("id", "source", "quote"):
        if not isinstance(merged.get(key), str) or not str(merged[key]).strip():
            raise SpecdecUsageError(f"@pytest.mark.claim needs {key}= as a non-empty string")
    applies = merged.get("applies_to", ())
    if isinstance(applies, str):
        applies = (applies,)
    if not isinstance(applies, (tuple, list)) or not all(isinstance(p, str) for p in applies):
        raise SpecdecUsageError("@pytest.mark.claim(applies_to=...) must be a profile name or a list of them")
    return ClaimInfo(str(merged["id"]), str(merged["source"]), str(merged["quote"]), tuple(applies))


def judge(expect: Expectations, speedup: Interval, acceptance: Interval | None) -> tuple[BoundRecord, ...]:
    """The verdict on every stated bound (acceptance bounds need acceptance data)."""
    verdicts: list[BoundRecord] = []
    if expect.speedup.min is not None:
        verdicts.append(
            BoundRecord("speedup", "min", expect.speedup.min, verdict_at_least(speedup, expect.speedup.min))
        )
    if expect.speedup.max is not None:
        verdicts.append(BoundRecord("speedup", "max", expect.speedup.max, verdict_at_most(speedup, expect.speedup.max)))
    if expect.acceptance.min is not None:
        result = Verdict.INCONCLUSIVE if acceptance is None else verdict_at_least(acceptance, expect.acceptance.min)
        verdicts.append(BoundRecord("acceptance", "min", expect.acceptance.min, result))
    return tuple(verdicts)


def overall(verdicts: Sequence[BoundRecord]) -> Verdict | None:
    """One verdict for the test, or ``None`` when it states no bound."""
    return combine([v.verdict for v in verdicts]) if verdicts else None


def refutation_message(
    bound: BoundRecord, speedup: Interval, acceptance: Interval | None, release: str, about: str = ""
) -> str:
    """The one line a refuted bound fails with; ``about`` says which prompts the speedup is a statement on."""
    if bound.metric == "acceptance" and acceptance is not None:
        return (
            f"acceptance {acceptance.estimate:.2f} [{acceptance.low:.2f}, {acceptance.high:.2f}] "
            f"< claimed min {bound.bound:g} ({release})"
        )
    shown = f"speedup {speedup.estimate:.2f}x [{speedup.low:.2f}, {speedup.high:.2f}]" + (
        f" on {about}" if about else ""
    )
    if bound.kind == "max":
        return f"{shown} > claimed max {bound.bound:g}x — SD now pays off ({release})"
    return f"{shown} < claimed min {bound.bound:g}x — SD does not pay off ({release})"


def stop_rule(expect: Expectations) -> StopRule:
    """Stop once every stated bound is decided (holds or refuted)."""

    def decided(speedup: Interval, acceptance: Interval | None) -> bool:
        return all(v.verdict is not Verdict.INCONCLUSIVE for v in judge(expect, speedup, acceptance))

    return decided


def _role(expect: Expectations, profile: str, reference: bool) -> Role:
    if reference:
        return Role.REFERENCE_ROW
    return Role.GATING if expect.claim is None or expect.claim.gates(profile) else Role.OTHER_PROFILE


def judge_outcome(
    settings: Settings,
    fingerprint: Fingerprint,
    comparison: Comparison,
    expect: Expectations,
    *,
    unmeasurable: str | None = None,
    not_run: NotRun | None = None,
    reference: bool = False,
) -> Judgement:
    """The lossless check, then whether the arms can differ, then the bounds: one :class:`Judgement`.

    A comparison whose output check fails, or whose arms cannot differ
    (``unmeasurable``: SD not engaged, or both arms speculate; ``not_run``: the class of the engine's own reason),
    gets no verdict at all.
    A ``reference`` comparison is judged and shown but never gates (e.g. SD against the
    server's own plain mode when the verdict is against a faster plain runtime).
    """
    role = _role(expect, settings.profile, reference)
    judged = _judgement(
        comparison, expect, role, strict=settings.strict, release=fingerprint.release, unmeasurable=unmeasurable
    )
    return replace(judged, not_run=not_run) if judged.conclusion is Conclusion.NOT_MEASURABLE else judged


def _judgement(
    comparison: Comparison,
    expect: Expectations,
    role: Role,
    *,
    strict: bool,
    release: str,
    unmeasurable: str | None,
) -> Judgement:
    output = comparison.output
    if comparison.plan.require_identical_output and not output.identical:
        return Judgement(Conclusion.FAILED, role, failure=lossless_failure(output, comparison.plan))
    if unmeasurable is not None:
        return Judgement(Conclusion.NOT_MEASURABLE, role, failure=unmeasurable)
    speedup, acceptance = comparison.speedup, comparison.acceptance
    verdicts = judge(expect, speedup, acceptance)
    verdict = overall(verdicts)
    bounds = verdicts
    if verdict is None:
        return Judgement(Conclusion.MEASURED, role)
    judged = Judgement(Conclusion.of(verdict), role, bounds)
    if role is not Role.GATING:
        return judged
    if verdict is Verdict.REFUTED:
        first = next(v for v in verdicts if v.verdict is Verdict.REFUTED)
        about = comparison.statement
        return replace(judged, failure=refutation_message(first, speedup, acceptance, release, about))
    if verdict is Verdict.INCONCLUSIVE:
        futile = comparison.stopped.startswith("futile")
        message = (
            f"inconclusive after {len(comparison.pairs)} pairs: speedup {speedup.estimate:.2f}x "
            f"[{speedup.low:.2f}, {speedup.high:.2f}] on {comparison.statement} vs {expect.speedup.describe()} — "
            + (
                "the bound cannot be decided within the budget at this noise (see pytest-specdec calibrate)"
                if futile
                else undecided_because(
                    len(comparison.pairs),
                    pairs_to_decide(speedup, [b for b in (expect.speedup.min, expect.speedup.max) if b is not None]),
                    comparison.plan.max_trials,
                )
            )
        )
        return replace(judged, failure=message + " (--specdec-strict)") if strict else replace(judged, warning=message)
    return judged


@dataclass(frozen=True)
class QuantityVerdict:
    """A measured quantity (r_v, a fraction of the roofline …) judged against stated bounds."""

    label: str
    interval: Interval
    verdict: Verdict
    gating: bool
    failure: str | None = None
    warning: str | None = None

    @property
    def line(self) -> str:
        """``r_v 1.42 [1.38, 1.47] vs max=1.2: refuted (reference)``."""
        i = self.interval
        shown = self.verdict.value if self.gating else f"reference: {self.verdict.value}"
        return f"{self.label} {i.estimate:.2f} [{i.low:.2f}, {i.high:.2f}]: {shown}"


def judge_quantity(
    label: str, interval: Interval, bounds: SpeedupBounds, *, gating: bool, strict: bool
) -> QuantityVerdict:
    """Three-valued verdict of ``interval`` against ``bounds``; a failure only where it gates."""
    verdicts = []
    if bounds.min is not None:
        verdicts.append(verdict_at_least(interval, bounds.min))
    if bounds.max is not None:
        verdicts.append(verdict_at_most(interval, bounds.max))
    verdict = combine(verdicts)
    shown = f"{label} {interval.estimate:.2f} [{interval.low:.2f}, {interval.high:.2f}]"
    result = QuantityVerdict(label, interval, verdict, gating)
    if not gating:
        return result
    if verdict is Verdict.REFUTED:
        return replace(result, failure=f"{shown} is outside the claimed {bounds.describe()}")
    if verdict is Verdict.INCONCLUSIVE:
        message = f"inconclusive: {shown} vs claimed {bounds.describe()}"
        return replace(result, failure=message + " (--specdec-strict)") if strict else replace(result, warning=message)
    return result


def record_outcome(
    nodeid: str,
    settings: Settings,
    fingerprint: Fingerprint,
    comparison: Comparison,
    expect: Expectations,
    *,
    judgement: Judgement,
    pair: ModelPair,
    model_digest: str,
    notes: Sequence[str] = (),
    theory: TheoryRecord | None = None,
    scope: Mapping[str, str] | None = None,
    load: MachineLoad | None = None,
) -> ComparisonRecord:
    """The record that baselines, reports and the gate keep of a judged comparison: the one result shape."""
    c = comparison
    claim = expect.claim
    return ComparisonRecord(
        nodeid=nodeid,
        backend=settings.backend,
        release=fingerprint.release,
        versions=dict(fingerprint.versions),
        device=fingerprint.device,
        target=pair.target,
        draft=pair.draft,
        model_digest=model_digest,
        profile=settings.profile,
        category=c.plan.category,
        baseline_arm=c.plan.baseline.label,
        treatment_arm=c.plan.treatment.label,
        baseline_tps=c.arm_tps("baseline"),
        treatment_tps=c.arm_tps("treatment"),
        speedup=c.speedup,
        acceptance=c.acceptance,
        trials=len(c.pairs),
        judgement=judgement,
        claim_id=claim.id if claim else None,
        claim_quote=claim.quote if claim else None,
        samples=tuple(
            SampleRecord(
                p.prompt_id,
                p.first,
                p.baseline.decode_tps,
                p.treatment.decode_tps,
                p.baseline.ttft_s,
                p.treatment.ttft_s,
                p.baseline.prompt_tokens,
                p.baseline.decode_tokens,
                p.treatment.drafted,
                p.treatment.accepted,
                p.treatment.decode_tokens,
            )
            for p in c.pairs
        ),
        notes=tuple(notes),
        theory=theory,
        scope=dict(scope or {}),
        conditions=c.plan.conditions,
        other_speedup=c.other_metric,
        protocol=MEASUREMENT_PROTOCOL,
        load=load,
    )
