"""One run's bookkeeping: the settings, the backend pool, the ledger and every result.

The pytest glue creates one :class:`SpecdecSession`, asks it to :meth:`~SpecdecSession.compare`
a :class:`ComparisonSpec`, and turns each :class:`Result` into pass, fail or warning.
Measuring is :mod:`~pytest_specdec.measure`'s, judging :mod:`~pytest_specdec.claims`',
explaining :mod:`~pytest_specdec.analysis`', keeping :mod:`~pytest_specdec.store`'s; this
module only wires them and remembers what happened. Nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from pytest_specdec.analysis import Analysis, verify_cost
from pytest_specdec.axes import Conditions
from pytest_specdec.axes.num_draft import ADAPTIVE, NUM_DRAFT
from pytest_specdec.backends.arms import needs_router
from pytest_specdec.backends.base import (
    AdaptsDraftLength,
    Arm,
    Backend,
    Fingerprint,
    KnowsDefaultDraftLength,
    ModelPair,
    NotRun,
)
from pytest_specdec.backends.pool import BackendPool
from pytest_specdec.claims import Expectations, judge_outcome, record_outcome, stop_rule
from pytest_specdec.config import MAX_TOKENS_LIMIT, TRIALS_LIMIT, Settings
from pytest_specdec.embedded.prompt_sets import PromptSet, as_read, choose, digest_of
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.hardware import machine_profile, swap_ins
from pytest_specdec.machine_load import LoadProbe, MachineLoad
from pytest_specdec.measure import Comparison, ComparisonPlan, CutShort, Progress, run_comparison
from pytest_specdec.measure.budget import TimeBudget
from pytest_specdec.measure.realise import Room, realise
from pytest_specdec.measure.sampled import EXACT
from pytest_specdec.render.conditions import condition_notes
from pytest_specdec.seed.evidence import beside_result
from pytest_specdec.stats import Interval
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.files import now_iso, specdec_version
from pytest_specdec.store.ledger import BaselineLedger, Decision, LedgerPolicy
from pytest_specdec.store.records import ComparisonRecord, RunRecord, UnmeasuredTest

# Conditions under which published figures (short prompts, one stream, decode) can stand beside a result.
PUBLISHED_CONDITIONS = frozenset({"num_draft", "sampling"})


@dataclass(frozen=True)
class ComparisonSpec:
    """What a test asks to compare; ``None`` fields fall back to the settings.

    ``baseline`` / ``treatment`` pair any two arms instead of plain vs SD. ``conditions``
    (γ, sampling, context …, each axis checked as the test gave it) default to the test's
    markers'; an unset γ is the run's ``--specdec-num-draft``.
    """

    category: str = "code"
    target: str | None = None
    draft: str | None = None
    max_tokens: int | None = None
    baseline: Arm | None = None
    treatment: Arm | None = None
    max_trials: int | None = None
    reference: bool = False  # judged and shown, never gating
    conditions: Conditions | None = None  # None: the test's markers'
    prompt_set: PromptSet | None = None  # the user's prompts (``category`` is their content class); None: built-in

    def check(self) -> None:
        """The same limits as the command line's, one line naming the argument (before anything runs)."""
        for name, value, low, high in (("max_tokens", self.max_tokens, 2, MAX_TOKENS_LIMIT),
                                       ("max_trials", self.max_trials, 2, TRIALS_LIMIT)):  # fmt: skip
            if value is None:
                continue
            try:  # any whole number (a numpy integer too), never a float, a string or a bool
                if isinstance(value, bool):
                    raise TypeError
                whole = operator.index(value)
            except TypeError:
                raise SpecdecUsageError(
                    f"compare({name}={value!r}) is not a whole number — e.g. {name}={low * 16}"
                ) from None
            if not low <= whole <= high:
                raise SpecdecUsageError(
                    f"compare({name}={whole}) is outside {low}..{high} — "
                    + ("decode timing needs two tokens" if whole < low else "the limit the command line has too")
                )

    def pair(self, configured: ModelPair) -> ModelPair | None:
        """The model pair the spec names, or ``None`` for the configured one."""
        if self.target or self.draft:
            return ModelPair(self.target or configured.target, self.draft or configured.draft)
        return None


@dataclass(frozen=True)
class Result:
    """One comparison from the judge to the gate: what it measured, its record, and what the ledger decided.

    What did it conclude? ``record.judgement.conclusion`` (holds, refuted … against the test's bounds;
    ``record.check`` says what changed against the accepted baseline). Does it fail? ``decision.failure``.
    """

    comparison: Comparison
    record: ComparisonRecord
    decision: Decision

    @property
    def failure(self) -> str | None:
        """The line the test fails with, if the ledger decided it fails."""
        return self.decision.failure

    @property
    def warning(self) -> str | None:
        """The warning the test gives, if any."""
        return self.decision.warning


@dataclass
class SpecdecSession:
    """The run's settings, backends, ledger, results and summary notes."""

    settings: Settings
    machine_class: str
    ledger: BaselineLedger
    pool: BackendPool
    analysis: Analysis = field(default_factory=Analysis)
    results: list[Result] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # run-level lines for the summary (γ sweeps)
    unmeasured: list[UnmeasuredTest] = field(default_factory=list)  # tests that kept no result, and why
    started: str = field(default_factory=now_iso)
    command: tuple[str, ...] = ()  # the run's command line as typed: kept with its results
    prompt_sets: Mapping[str, PromptSet] = field(default_factory=dict)  # the prompt file's sets, by name
    budget: TimeBudget | None = None  # --specdec-time-budget, shared among the measuring tests

    @classmethod
    def create(
        cls,
        settings: Settings,
        machine_class: str,
        baselines_root: Path,
        prompt_sets: Mapping[str, PromptSet] | None = None,
    ) -> SpecdecSession:
        """A session whose ledger follows the settings' baseline options, with the prompt file's sets."""
        policy = LedgerPolicy(
            update=settings.update_baselines,
            accept_inconclusive=settings.accept_inconclusive,
            fail_on_drift=settings.fail_on_drift,
            min_effect=settings.drift_min_effect,
            drift_alpha=settings.drift_alpha,
            acceptance_drop=settings.acceptance_drop,
        )
        store = BaselineStore(baselines_root, machine_class)
        pool = BackendPool(settings.backend, settings.pair, settings.backend_options)
        more = (Path(settings.run_history),) if settings.run_history else ()
        ledger = BaselineLedger(store, policy, history_sources=more)
        budget = TimeBudget(settings.time_budget_s) if settings.time_budget_s is not None else None
        return cls(settings, machine_class, ledger, pool, prompt_sets=dict(prompt_sets or {}), budget=budget,
                   notes=list(ledger.unread))  # fmt: skip

    def prompt_choice(self, category: str | None, prompts: object) -> tuple[str, PromptSet | None]:
        """The content class and the user's set that ``compare(category, prompts=...)`` names (``None``: built-in)."""
        return choose(category, prompts, self.prompt_sets, self.settings.prompts)

    @property
    def records(self) -> list[ComparisonRecord]:
        """Every result's record, in the order they ran."""
        return [r.record for r in self.results]

    def backend(self, pair: ModelPair | None = None, name: str | None = None) -> Backend:
        """The configured backend (or ``name``'s) for ``pair``, loaded once."""
        return self.pool.backend(pair, name)

    def arms(self, spec: ComparisonSpec, conditions: Conditions | None = None) -> tuple[Arm, Arm]:
        """Plain vs SD at the conditions' (or the settings') γ, unless the spec names other arms."""
        asked = (conditions or spec.conditions or Conditions()).get(NUM_DRAFT)
        num_draft = self.settings.num_draft if asked is None else asked
        return spec.baseline or Arm("plain"), spec.treatment or Arm("sd", speculative=True, num_draft=num_draft)

    def plain_runtime_arm(self, spec: ComparisonSpec) -> Arm | None:
        """The plain arm on another runtime, same weights (``--specdec-plain-runtime``), if configured.

        The weights: ``--specdec-plain-model``, else the model file the comparison's own
        backend reports for the target it runs (a test's ``target=`` included).
        """
        runtime = self.settings.plain_runtime
        if not runtime:
            return None
        model = self.settings.plain_model
        if model is None:
            backend = self.backend(spec.pair(self.settings.pair))
            model = backend.fingerprint().details.get("model_path") or backend.pair.target
        return Arm(f"{runtime} plain", options={"runtime": runtime, "model": model})

    def plan(
        self, spec: ComparisonSpec, expect: Expectations, *, base_model: bool = False, backend: Backend | None = None
    ) -> ComparisonPlan:
        """The comparison's plan from the settings; a base model gets text to continue, not instructions, and
        chat prompts become text by ``backend``'s chat template."""
        settings = self.settings
        conditions = expect.conditions if spec.conditions is None else spec.conditions
        baseline, treatment = self.arms(spec, conditions)
        chosen = spec.prompt_set  # the user's texts as given; the built-in set in the form the model reads
        given = (
            chosen.prompts if chosen else prompts_for(spec.category, "continuation" if base_model else "instruction")
        )
        render = None if backend is None else partial(self.pool.chat_text, backend)
        reader = f"{backend.name} on {backend.pair.target}" if backend else "this backend"
        prompts = as_read(given, render, yours=chosen is not None, reader=reader)
        if chosen:  # the set as read: its digest in the key covers the messages and the engine's template
            chosen = replace(chosen, prompts=prompts)
        return ComparisonPlan(
            category=spec.category,
            prompts=prompts,
            prompt_digest=digest_of(prompts),
            baseline=baseline,
            treatment=treatment,
            max_tokens=settings.max_tokens if spec.max_tokens is None else spec.max_tokens,
            min_trials=settings.min_trials,
            max_trials=max(settings.min_trials, min(spec.max_trials or settings.max_trials, settings.max_trials)),
            # Each stated bound gets an equal share of the per-direction error budget.
            confidence=1.0 - (1.0 - settings.confidence) / max(1, expect.bound_count),
            stop_when=stop_rule(expect) if expect.has_bounds else None,
            bounds=tuple(b for b in (expect.speedup.min, expect.speedup.max) if b is not None),
            reading=settings.interval,
            # Different models (or kernels) need not produce the same text; SD must.
            require_identical_output=not needs_router(baseline, treatment),
            precision=settings.precision,
            near_tie_logits=settings.near_tie,
            distribution_generations=settings.distribution_samples,
            # γ as the SD arm drafts it (a given γ too); the user's prompt set by name and digest
            conditions=conditions.with_(num_draft=treatment.num_draft, prompt_set=chosen.label if chosen else None),
        )

    def compare(
        self,
        nodeid: str,
        spec: ComparisonSpec,
        expect: Expectations,
        progress: Callable[[Progress], None] = lambda _: None,
    ) -> Result:
        """Run one comparison, judge it, explain it and check it against its baseline."""
        spec.check()
        asked = expect.conditions if spec.conditions is None else spec.conditions
        baseline, treatment = self.arms(spec, asked)
        pair = spec.pair(self.settings.pair)
        # What the configured backend cannot run is refused before one is loaded with the conditions' options.
        refused = asked.refusals(self.pool.for_arms(baseline, treatment, pair))
        if refused:
            raise SpecdecUsageError("; ".join(refused))
        backend = self.pool.for_arms(baseline, treatment, pair, asked.backend_options())
        plan = self.plan(spec, expect, base_model=self.pool.is_base_model(backend), backend=backend)
        if isinstance(backend, AdaptsDraftLength) and backend.adapts_draft_length():
            given = asked.get(NUM_DRAFT)
            if given is not None:  # a γ sweep, or one γ, over a knob the engine does not have
                raise SpecdecUsageError(
                    f"{backend.name} picks the draft length itself each round (no γ is sent): "
                    f"num_draft={given} would label one setting with a γ that did not run — drop num_draft"
                )
            plan = replace(plan, treatment=replace(plan.treatment, num_draft=ADAPTIVE)).under(num_draft=ADAPTIVE)
        elif isinstance(backend, KnowsDefaultDraftLength) and plan.treatment.speculative and spec.treatment is None:
            own = backend.default_num_draft()
            if own is not None and asked.get(NUM_DRAFT) is None and not self.settings.num_draft_explicit:
                plan = replace(plan, treatment=replace(plan.treatment, num_draft=own)).under(num_draft=own)
        # Before anything runs: each condition put into effect (a context prefix inside the window and the memory).
        room = Room(self.pool.weight_bytes(backend) or 0, machine_profile().usable_bytes)
        plan = realise(plan, backend, room)
        if self.budget is not None:
            plan = replace(plan, time_budget_s=self.budget.share(nodeid))
        swapped_before, probe = swap_ins(), LoadProbe()
        try:
            comparison = run_comparison(backend, plan, progress)
        except CutShort as cut:  # its pairs so far are kept (the run keeps them as an interrupted history line)
            with contextlib.suppress(Exception):  # whatever keeping them meets, the interrupt goes on
                load = probe.finish()
                self.ledger.check(
                    self._record(nodeid, spec, expect, backend, cut.comparison, load=load, cut_short=True)
                )
            raise
        load = probe.finish()  # the pairs' and checks' time, not the engagement probe's
        unmeasurable, engagement_notes, not_run = self.analysis.engagement(backend, comparison, progress)
        swapped_after = swap_ins()
        if swapped_before is not None and swapped_after is not None and swapped_after > swapped_before:
            not_run, unmeasurable = (
                None,
                (
                    f"not measurable: the machine swapped ({swapped_after - swapped_before} pages swapped in during the "
                    "comparison) — the models did not fit beside what else runs; close it, or measure a smaller pair"
                ),
            )
        record = self.ledger.check(
            self._record(
                nodeid,
                spec,
                expect,
                backend,
                comparison,
                load=load,
                unmeasurable=unmeasurable,
                not_run=not_run,
                engagement_notes=engagement_notes,
            )
        )
        result = Result(comparison, record, self.ledger.decide(record))
        self.results.append(result)
        return result

    def _record(
        self,
        nodeid: str,
        spec: ComparisonSpec,
        expect: Expectations,
        backend: Backend,
        comparison: Comparison,
        *,
        load: MachineLoad | None = None,
        unmeasurable: str | None = None,
        not_run: NotRun | None = None,
        engagement_notes: Sequence[str] = (),
        cut_short: bool = False,
    ) -> ComparisonRecord:
        """The comparison judged, explained and recorded as the run keeps it; one ``cut_short`` (Ctrl-C, SIGTERM)
        is judged and recorded as its pairs stand, never explained further (that would run the engine again)."""
        plan = comparison.plan
        fingerprint = backend.fingerprint()
        judgement = judge_outcome(self.settings, fingerprint, comparison, expect, unmeasurable=unmeasurable,
                                  not_run=not_run, reference=spec.reference)  # fmt: skip
        scope = _scope(self.settings.profile, comparison, fingerprint, spec.prompt_set,
                       base_model=self.pool.is_base_model(backend), weight_bytes=self.pool.weight_bytes(backend),
                       arm_options=self.pool.arm_options(backend))  # fmt: skip
        if cut_short:
            return record_outcome(
                nodeid, self.settings, fingerprint, comparison, expect, judgement=judgement, pair=backend.pair,
                model_digest=self.pool.digest(backend), scope=scope, load=load,
                notes=[f"{comparison.stopped}: kept in the history as interrupted, never accepted or gating"
                       + ("" if comparison.output.method == EXACT else "; its sampled lossless check never ran")],
            )  # fmt: skip
        notes = self.analysis.notes(backend, comparison, self.pool.weight_bytes(backend)) + list(engagement_notes)
        notes += condition_notes(comparison)
        if "time budget" in comparison.stopped:  # fewer pairs than the trials allowed: the budget's doing
            notes.append(f"{comparison.stopped} (--specdec-time-budget)")
        if self.settings.num_draft_explicit and plan.treatment.num_draft == ADAPTIVE and plan.treatment.speculative:
            notes.append(f"γ={self.settings.num_draft} (--specdec-num-draft or [tool.specdec]) does not apply: "
                         f"{backend.name} picks each draft's length itself here")  # fmt: skip
        own = backend.default_num_draft() if isinstance(backend, KnowsDefaultDraftLength) else None
        if own is not None and plan.treatment.speculative and plan.treatment.num_draft != own:
            notes.append(
                f"a tuned arm: γ={plan.treatment.num_draft}, where {backend.name}'s users get {own} by default"
            )
        if (
            not judgement.conclusion.says_nothing_about_speed
            and {axis.name for axis, _ in plan.conditions.items()} <= PUBLISHED_CONDITIONS
        ):
            s = comparison.speedup  # published short-prompt decode figures on this chip, beside it: never a verdict
            notes += beside_result(
                self.machine_class, self.settings.backend, s.estimate, s.low, s.high,
                sampling=comparison.plan.sampling.label(),
            )  # fmt: skip
        return record_outcome(
            nodeid, self.settings, fingerprint, comparison, expect, judgement=judgement, pair=backend.pair,
            model_digest=self.pool.digest(backend), notes=notes, theory=self.analysis.theory(backend, comparison),
            scope=scope, load=load,
        )  # fmt: skip

    def mark_drifted(self, drifted: Sequence[ComparisonRecord]) -> None:
        """Carry the end-of-run drift decisions into the results the report shows."""

        def key(r: ComparisonRecord) -> tuple[object, ...]:  # a sweep's rows may differ only in their conditions
            return (r.nodeid, r.category, r.baseline_arm, r.conditions)

        checks = {key(r): r.check for r in drifted}
        for index, result in enumerate(self.results):
            record = result.record
            check = checks.get(key(record))
            if check is not None:
                self.results[index] = replace(result, record=replace(record, check=check))

    def verify_cost(self, num_draft: int, rounds: int = 8) -> Interval:
        """r_v for γ = ``num_draft`` on the configured backend."""
        return verify_cost(self.backend(), num_draft, rounds, self.settings.confidence)

    def run_record(self, *, interrupted: bool = False) -> RunRecord:
        """The session's results as one record, finished now (``interrupted``: the run was cut short)."""
        return RunRecord(
            interrupted=interrupted,
            machine_class=self.machine_class,
            started=self.started,
            finished=now_iso(),
            comparisons=tuple(self.records),
            machine_info=dict(self.ledger.machine_info),
            commit_info=dict(self.ledger.commit_info),
            specdec_version=specdec_version(),
            summary=tuple(self.notes),
            unmeasured=tuple(self.unmeasured),
            command=self.command,
        )

    def close(self) -> None:
        """Release every backend."""
        self.pool.close()


def _scope(
    profile: str,
    comparison: Comparison,
    fingerprint: Fingerprint,
    chosen: PromptSet | None,
    *,
    base_model: bool,
    weight_bytes: int | None = None,
    arm_options: str = "",
) -> dict[str, str]:
    plan = comparison.plan
    loaded = fingerprint.details.get("n_ctx")  # the context the backend held (llama.cpp sizes its caches by it)
    return {
        # the prompts' form: the user's texts as given, or the built-in set for an instruction or a base model
        "prompts": "given" if chosen else "continuation" if base_model else "instruction",
        "prompt_set": chosen.name if chosen else plan.category,  # the texts never leave the machine; their digest does
        "prompt_digest": plan.prompt_digest,
        "arm_options": arm_options,  # the backend options that change an arm, as loaded: compared with the baseline's
        "profile": profile,
        "baseline": plan.baseline.label,
        "treatment": plan.treatment.label,
        "max_tokens": str(plan.max_tokens),
        "min_trials": str(plan.min_trials),
        "max_trials": str(plan.max_trials),  # what the run could take: "more pairs would decide" is capped by it
        "reading": plan.reading,  # what the verdict is a statement about: these prompts, or prompts like these
        "prompt_count": str(len({p.prompt_id for p in comparison.pairs}) or len(plan.prompts)),
        "looks": ",".join(map(str, comparison.looks)),  # the design's looks, in pairs: its critical values
        "arm_order": plan.order,  # the seed of its coin-flipped arm order, drawn for this comparison
        "lossless_check": comparison.output.method,  # exact, same-seed or distribution (measure.sampled)
        **({"n_ctx": loaded} if loaded else {}),
        # the target's weights as loaded: what one plain token reads (the roofline a submission is checked by)
        **({"target_bytes": str(weight_bytes)} if weight_bytes else {}),
    }


def plain_runtimes_line(category: str, own: Result, other: Result) -> str:
    """Both plain ways side by side: which is faster, and SD against each."""
    mine, theirs = own.record, other.record
    own_tps, other_tps = mine.baseline_tps or 0.0, theirs.baseline_tps or 0.0
    faster = theirs.baseline_arm if other_tps >= own_tps else f"{mine.baseline_arm} (the backend's own)"
    line = (
        f"[{category}] plain ways: {theirs.baseline_arm} {other_tps:.1f} tok/s, the backend's own plain "
        f"{own_tps:.1f} tok/s (each measured against SD in its own comparison); SD vs {theirs.baseline_arm} "
        f"{theirs.speedup.estimate:.2f}x (the verdict), vs its own plain {mine.speedup.estimate:.2f}x (reference); "
        f"faster plain way: {faster}"
    )
    if own_tps > other_tps:
        line += " — the configured plain runtime was the slower one here, so the verdict is against the slower way"
    return line
