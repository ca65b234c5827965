"""One run's bookkeeping: loaded backends, comparisons made, and their outcomes.

The pytest glue creates one :class:`SpecdecSession`, asks it to :meth:`compare`,
and turns each :class:`Outcome` into pass, fail or warning. Nothing here imports
pytest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pytest_specdec.arms import ArmRouter, arm_backend_options, arm_pair, needs_router
from pytest_specdec.backends import load_backend
from pytest_specdec.backends.base import Arm, Backend, KnowsWeightBytes, MeasuresStepCosts, ModelPair
from pytest_specdec.baselines import BaselineStore
from pytest_specdec.claims import Expectations, Outcome, judge_outcome, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.errors import BackendRuntimeError
from pytest_specdec.hardware import machine_profile
from pytest_specdec.ledger import BaselineLedger, LedgerPolicy
from pytest_specdec.measure import Comparison, ComparisonPlan, Progress, run_comparison
from pytest_specdec.probe import probe_engagement
from pytest_specdec.prompts import prompts_for
from pytest_specdec.records import ComparisonRecord, TheoryRecord, record_outcome
from pytest_specdec.roofline import roofline_tps
from pytest_specdec.stats import Interval, speedup_interval
from pytest_specdec.theory import Costs, alpha_from_rate, explain


@dataclass(frozen=True)
class Result:
    """A judged comparison, its record (with the baseline check) and what the test must do."""

    outcome: Outcome
    record: ComparisonRecord
    failure: str | None
    warning: str | None


@dataclass
class SpecdecSession:
    """Backends loaded once per pair, the baseline ledger, and every result of the run."""

    settings: Settings
    machine_class: str
    ledger: BaselineLedger
    loader: Callable[[str, ModelPair, Mapping[str, str]], Backend] = load_backend
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # run-level lines for the summary (γ sweeps)
    _backends: dict[tuple[str, ModelPair, tuple[tuple[str, str], ...]], Backend] = field(default_factory=dict)
    _digests: dict[tuple[str, ModelPair], str] = field(default_factory=dict)
    _probes: dict[tuple[str, ModelPair, str, int], str] = field(default_factory=dict)
    _costs: dict[tuple[str, ModelPair, int], Costs] = field(default_factory=dict)
    _roofline_shown: set[tuple[str, ModelPair]] = field(default_factory=set)

    @classmethod
    def create(cls, settings: Settings, machine_class: str, baselines_root: Path) -> SpecdecSession:
        """A session whose ledger follows the settings' baseline options."""
        policy = LedgerPolicy(
            update=settings.update_baselines,
            fail_on_drift=settings.fail_on_drift,
            alpha=1.0 - settings.confidence,
            min_effect=settings.drift_min_effect,
        )
        return cls(settings, machine_class, BaselineLedger(BaselineStore(baselines_root, machine_class), policy))

    @property
    def records(self) -> list[ComparisonRecord]:
        """Every result's record, in the order they ran."""
        return [r.record for r in self.results]

    def backend(
        self, pair: ModelPair | None = None, name: str | None = None, extra_options: Mapping[str, str] | None = None
    ) -> Backend:
        """The backend for ``pair`` (default: the configured pair) and options, loaded once."""
        backend_name = name or self.settings.backend
        options = dict(self.settings.backend_options) if backend_name == self.settings.backend else {}
        options.update(extra_options or {})
        key = (backend_name, pair or self.settings.pair, tuple(sorted(options.items())))
        if key not in self._backends:
            self._backends[key] = self.loader(key[0], key[1], options)
        return self._backends[key]

    def backend_for(self, plan: ComparisonPlan, pair: ModelPair | None) -> Backend:
        """One backend for plain-vs-SD; a router over one backend per arm for other A/B pairs."""
        if not needs_router(plan.baseline, plan.treatment):
            return self.backend(pair)
        base = pair or self.settings.pair
        return ArmRouter(
            {
                arm.label: self.backend(arm_pair(base, arm), extra_options=arm_backend_options(arm))
                for arm in (plan.baseline, plan.treatment)
            }
        )

    def plan(
        self,
        category: str,
        expect: Expectations,
        *,
        num_draft: int | None = None,
        max_tokens: int | None = None,
        baseline: Arm | None = None,
        treatment: Arm | None = None,
        max_trials: int | None = None,
    ) -> ComparisonPlan:
        """A plain-vs-SD plan from the settings, unless other arms are given."""
        settings = self.settings
        gamma = num_draft or settings.num_draft
        return ComparisonPlan(
            category=category,
            prompts=prompts_for(category),
            baseline=baseline or Arm("plain"),
            treatment=treatment or Arm("sd", speculative=True, num_draft=gamma),
            max_tokens=max_tokens or settings.max_tokens,
            min_trials=settings.min_trials,
            max_trials=max(settings.min_trials, min(max_trials or settings.max_trials, settings.max_trials)),
            confidence=settings.confidence,
            stop_when=stop_rule(expect) if expect.has_bounds else None,
            # Different models (or kernels) need not produce the same text; SD must.
            require_identical_output=not needs_router(baseline or Arm("plain"), treatment or Arm("sd")),
            precision=settings.precision,
            near_tie_logits=settings.near_tie,
        )

    def compare(
        self,
        nodeid: str,
        plan: ComparisonPlan,
        expect: Expectations,
        pair: ModelPair | None = None,
        progress: Callable[[Progress], None] = lambda _: None,
    ) -> Result:
        """Run one comparison on the pair's backend, judge it and check its baseline."""
        backend = self.backend_for(plan, pair)
        comparison = run_comparison(backend, plan, progress)
        settings = replace(self.settings, pair=backend.pair)
        outcome = judge_outcome(nodeid, settings, backend.fingerprint(), comparison, expect)
        notes = list(comparison.output.near_ties)
        if plan.baseline.label == "plain" and (backend.name, backend.pair) not in self._roofline_shown:
            roofline = self.roofline_note(backend, comparison.arm_tps("baseline"))
            self._roofline_shown.add((backend.name, backend.pair))
            notes += [roofline] if roofline else []
        if comparison.engaged is None and plan.treatment.speculative:
            notes += self._engagement_notes(backend, plan)
        record = record_outcome(outcome, self._digest(backend), notes)
        record = replace(record, theory=self._theory(backend, comparison), scope=self._scope(plan))
        record = self.ledger.check(record)
        baseline_failure = self.ledger.failure(record)
        failure = baseline_failure or outcome.failure
        warning = outcome.warning
        if record.check is not None and record.check.change == "drift" and not baseline_failure:
            warning = "; ".join(w for w in (warning, record.check.message) if w)
        result = Result(outcome, replace(record, failure=failure, warning=warning), failure, warning)
        self.results.append(result)
        return result

    def verify_cost(self, num_draft: int, rounds: int = 8) -> Interval:
        """r_v = target time for γ+1 tokens ÷ for 1 token, as a paired interval over ``rounds``."""
        backend = self.backend()
        if not isinstance(backend, MeasuresStepCosts):
            raise BackendRuntimeError(
                f"backend {backend.name!r} cannot time its forward passes, so r_v is not measurable"
            )
        prompts = prompts_for("prose")
        logs = []
        for index in range(rounds):
            _, one, wide, _ = backend.step_costs(prompts[index % len(prompts)].text, num_draft)
            logs.append(math.log(wide / one))
        return speedup_interval(logs, self.settings.confidence)

    def roofline_note(self, backend: Backend, plain_tps: float) -> str | None:
        """The plain arm as a fraction of this machine's bandwidth roofline, when the weights' size is known."""
        if not isinstance(backend, KnowsWeightBytes):
            return None
        machine = machine_profile()
        if not machine.bandwidth_gbs:
            return None
        ceiling = roofline_tps(machine.bandwidth_gbs, backend.weight_bytes())
        return (
            f"plain arm at {plain_tps / ceiling:.2f} of its roofline ({ceiling:.0f} tok/s from "
            f"{backend.weight_bytes() / 1e9:.2f} GB of weights at {machine.bandwidth_gbs:.0f} GB/s, {machine.bandwidth_source})"
        )

    def _scope(self, plan: ComparisonPlan) -> dict[str, str]:
        return {
            "profile": self.settings.profile,
            "baseline": plan.baseline.label,
            "treatment": plan.treatment.label,
            "max_tokens": str(plan.max_tokens),
        }

    def _theory(self, backend: Backend, comparison: Comparison) -> TheoryRecord | None:
        """α from accepted/drafted, c and r_v where the backend can time its steps."""
        plan = comparison.plan
        gamma = plan.treatment.num_draft
        drafted = sum(p.treatment.drafted or 0 for p in comparison.pairs)
        accepted = sum(p.treatment.accepted or 0 for p in comparison.pairs)
        if not plan.treatment.speculative or drafted == 0 or gamma < 1:
            return None
        rate = accepted / drafted
        alpha = alpha_from_rate(min(1.0, rate), gamma)
        if not isinstance(backend, MeasuresStepCosts):
            return TheoryRecord(
                alpha,
                gamma,
                None,
                None,
                None,
                None,
                None,
                "c and r_v are not measurable through this backend",
                "accepted/drafted only",
                f"α={alpha:.2f} γ={gamma} (c and r_v are not measurable through this backend)",
            )
        key = (backend.name, backend.pair, gamma)
        if key not in self._costs:
            draft_s, one_s, wide_s, method = backend.step_costs(plan.prompts[0].text, gamma)
            self._costs[key] = Costs(c=draft_s / one_s, r_v=wide_s / one_s, target_step_s=one_s, method=method)
        costs = self._costs[key]
        why = explain(rate, gamma, costs, comparison.speedup)
        return TheoryRecord(
            why.alpha,
            gamma,
            why.c,
            why.r_v,
            why.predicted,
            why.break_even_alpha,
            why.agrees,
            why.cause,
            costs.method,
            why.describe(),
        )

    def _engagement_notes(self, backend: Backend, plan: ComparisonPlan) -> list[str]:
        """The engagement probe, once per backend, pair and SD arm (for backends that count no drafts)."""
        key = (backend.name, backend.pair, plan.treatment.label, plan.treatment.num_draft)
        if key not in self._probes:
            probe = probe_engagement(
                backend,
                baseline=plan.baseline,
                treatment=plan.treatment,
                max_tokens=plan.max_tokens,
                confidence=plan.confidence,
            )
            self._probes[key] = probe.describe()
        return [self._probes[key]]

    def _digest(self, backend: Backend) -> str:
        key = (backend.name, backend.pair)
        if key not in self._digests:
            self._digests[key] = backend.model_digest()
        return self._digests[key]

    def close(self) -> None:
        """Release every backend."""
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()


def sweep_summary(nodeid: str, category: str, results: list[Result]) -> str:
    """``γ sweep [code]: best γ=3 (1.52x); break-even α γ=1 0.21, γ=2 0.30 …``."""
    best = max(results, key=lambda r: r.record.speedup.estimate)
    evens = []
    for result in results:
        theory = result.record.theory
        even = theory.break_even_alpha if theory is not None else None
        shown = "-" if theory is None or theory.c is None else ("none" if even is None else f"{even:.2f}")
        evens.append(f"γ={result.record.num_draft} {shown}")
    return (
        f"{nodeid} γ sweep [{category}]: best γ={best.record.num_draft} ({best.record.speedup.estimate:.2f}x); "
        f"break-even α: {', '.join(evens)}"
    )
