"""What a result means beyond its verdict: is SD live, why this speedup, how close to the roofline.

:class:`Analysis` attaches three things to each comparison, each measured once per
backend and pair: the engagement probe (below), the α / c / r_v explanation of
:mod:`pytest_specdec.theory`, and the plain arm as a fraction of the bandwidth roofline.

**The engagement probe**, for backends that report no drafted or accepted counts (Ollama).

Drafting pays off only when the drafter guesses right, and guessing is easy on text
the prompt already contains. So with SD live, decode on a copy-this prompt is faster
than on a random-words prompt of equal length; with SD off, decode speed does not
depend on content and the ratio is ≈ 1. The probe runs both arms on equal-length
pairs and compares the two ratios: the SD arm's content dependence over the plain
arm's, as a paired geometric mean with an interval.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pytest_specdec.backends.base import (
    Arm,
    Backend,
    Detokenizes,
    KnowsSpeculation,
    MeasuresStepCosts,
    ModelPair,
    NotRun,
)
from pytest_specdec.embedded.prompts import probe_prompts, prompts_for
from pytest_specdec.errors import BackendRuntimeError
from pytest_specdec.hardware import machine_profile
from pytest_specdec.measure import DECODE, Clock, Comparison, ComparisonPlan, Progress, baseline_drafted, run_trial
from pytest_specdec.roofline import roofline_tps
from pytest_specdec.sequential import MAX_PROMPTS_TO_SUGGEST, boundaries, prompts_to_decide
from pytest_specdec.stats import Interval, speedup_interval
from pytest_specdec.store.records import TheoryRecord
from pytest_specdec.theory import Costs, alpha_from_rate, explain

# Plain decoding's speed should not depend on what the text says; a plain arm whose
# predictable-vs-unpredictable ratio is this far from 1 behaves like a drafting arm.
PLAIN_CONTENT_TOLERANCE = 1.10


@dataclass(frozen=True)
class EngagementProbe:
    """Content dependence of decode speed in each arm, and their contrast."""

    sd_ratio: Interval  # predictable tok/s ÷ unpredictable tok/s, SD arm
    plain_ratio: Interval  # the same for the plain arm (≈ 1)
    contrast: Interval  # sd_ratio ÷ plain_ratio, paired

    @property
    def sd_live(self) -> bool:
        """A sign of SD: the SD arm's content dependence differs from the plain arm's, either way.

        Faster on predictable text is the usual sign; slower can be too (drafting that
        costs more than it saves on text it guesses well, as on an MTP GGUF).
        """
        return self.contrast.low > 1.0 or self.contrast.high < 1.0

    @property
    def plain_speculates(self) -> bool:
        """The plain arm's own speed depends on content beyond :data:`PLAIN_CONTENT_TOLERANCE`."""
        p = self.plain_ratio
        return p.low > PLAIN_CONTENT_TOLERANCE or p.high < 1.0 / PLAIN_CONTENT_TOLERANCE

    def describe(self) -> str:
        """One line for the report, with the intervals the conclusion rests on."""
        s, p, c = self.sd_ratio, self.plain_ratio, self.contrast
        if self.plain_speculates:
            verdict = "the plain arm's speed depends on content: it looks like it speculates too"
        elif self.sd_live:
            verdict = "SD is live (the contrast excludes 1)"
        else:
            verdict = "cannot tell (the contrast interval includes 1)"
        return (
            f"engagement probe: predictable/unpredictable decode ratio {s.estimate:.2f} [{s.low:.2f}, {s.high:.2f}] "
            f"with SD vs {p.estimate:.2f} [{p.low:.2f}, {p.high:.2f}] without, contrast {c.estimate:.2f} "
            f"[{c.low:.2f}, {c.high:.2f}] → {verdict}"
        )


def probe_engagement(
    backend: Backend,
    *,
    baseline: Arm,
    treatment: Arm,
    max_tokens: int,
    confidence: float,
    rounds: int = 2,
    clock: Clock = time.perf_counter,
    progress: Callable[[Progress], None] = lambda _: None,
) -> EngagementProbe:
    """Run both arms on every probe pair ``rounds`` times, interleaved (progress after each pair)."""
    pairs = probe_prompts() * rounds
    plan = ComparisonPlan(
        "probe", tuple(p for pair in pairs for p in pair), baseline, treatment, max_tokens, 2, 2, confidence
    )
    sd_logs: list[float] = []
    plain_logs: list[float] = []
    for predictable, unpredictable in pairs:
        ratios = {}
        for arm in (baseline, treatment):
            fast = run_trial(backend, predictable, arm, plan, clock)
            slow = run_trial(backend, unpredictable, arm, plan, clock)
            ratios[arm.label] = math.log(fast.decode_tps / slow.decode_tps)
        plain_logs.append(ratios[baseline.label])
        sd_logs.append(ratios[treatment.label])
        progress(Progress(treatment.label, len(sd_logs), len(pairs), None, stage="engagement probe"))
    contrast = [s - p for s, p in zip(sd_logs, plain_logs, strict=True)]
    return EngagementProbe(
        speedup_interval(sd_logs, confidence),
        speedup_interval(plain_logs, confidence),
        speedup_interval(contrast, confidence),
    )


def verify_cost(backend: Backend, num_draft: int, rounds: int, confidence: float) -> Interval:
    """r_v = target time for γ+1 tokens ÷ for 1 token, as a paired interval over ``rounds``."""
    if not isinstance(backend, MeasuresStepCosts):
        raise BackendRuntimeError(f"backend {backend.name!r} cannot time its forward passes, so r_v is not measurable")
    prompts = prompts_for("prose")
    logs = []
    for index in range(rounds):
        _, one, wide, _ = backend.step_costs(prompts[index % len(prompts)].text, num_draft)
        logs.append(math.log(wide / one))
    return speedup_interval(logs, confidence)


def roofline_note(size: int | None, plain_tps: float) -> str | None:
    """The plain arm as a fraction of this machine's bandwidth roofline, when the weights' size is known."""
    if size is None:
        return None
    machine = machine_profile()
    if size <= 0 or not machine.bandwidth_gbs:
        return None  # weights of unknown size (a server the user started): no roofline to state
    ceiling = roofline_tps(machine.bandwidth_gbs, size)
    return (
        f"plain arm at {plain_tps / ceiling:.2f} of its roofline: it ran {plain_tps:.0f} tok/s where "
        f"{size / 1e9:.2f} GB of weights at {machine.bandwidth_gbs:.0f} GB/s ({machine.bandwidth_source}) would "
        f"allow {ceiling:.0f} — a ceiling from the weights' size, not a rate measured"
    )


def _prompts_needed(comparison: Comparison) -> str:
    """``; about 23 prompts like these would decide min=1.2``, from the spread between the prompts measured."""
    plan, estimate = comparison.plan, comparison.estimate
    if estimate is None or not plan.bounds or not comparison.looks:
        return ""
    looks = comparison.looks  # the critical value of the look the run stopped at, as its intervals use
    at = next((k for k, n in enumerate(looks) if n >= len(comparison.pairs)), len(looks) - 1)
    z = boundaries(tuple(n / looks[-1] for n in looks), plan.alpha)[at]
    said = []
    like = comparison.other_reading if plan.reading == "these-prompts" else comparison.speedup
    for bound in plan.bounds:
        if like is not None and not like.low <= bound <= like.high:
            continue  # that reading decides this bound already
        needed = prompts_to_decide(estimate, math.log(bound), z)
        if needed is not None:
            said.append(f"about {needed} prompts like these would decide {bound:g}x")
        else:
            said.append(f"no prompt count up to {MAX_PROMPTS_TO_SUGGEST} would decide {bound:g}x")
    return "; " + "; ".join(said) if said else ""


def _stalls(comparison: Comparison) -> list[str]:
    """One line on the pairs left out because one arm stalled (hiccups), with the arm and how slow."""
    estimate = comparison.estimate
    if estimate is None or not estimate.left_out:
        return []
    keys = sorted({p.prompt_id for p in comparison.pairs})
    locations = estimate.locations
    shown = []
    for position in estimate.left_out:
        pair = comparison.pairs[position]
        typical = locations[keys.index(pair.prompt_id)] if len(locations) == len(keys) else estimate.value
        slower = typical - pair.log_ratio  # log_ratio is log(plain seconds / SD seconds): low when SD stalled
        arm = pair.treatment.arm if slower > 0 else pair.baseline.arm
        shown.append(f"pair {position + 1} ({pair.prompt_id}): the {arm} arm {math.exp(abs(slower)):.1f}x slow")
    return [
        f"left out {len(shown)} of {len(comparison.pairs)} pairs in which one arm stalled (the speedup is "
        f"for generations without stalls): " + ", ".join(shown)
    ]


SAMPLE_CHARACTERS = 60


def _sample(backend: Backend, comparison: Comparison) -> str | None:
    """The start of the baseline arm's output on the first pair: what the category really decoded."""
    if not comparison.pairs:
        return None
    trial = comparison.pairs[0].baseline
    if trial.units == "character":
        text = "".join(chr(unit) for unit in trial.token_ids)
    elif isinstance(backend, Detokenizes):
        try:
            text = backend.detokenize(list(trial.token_ids))
        except BackendRuntimeError:  # a sample is an aid to the reader, never a reason to fail
            return None
    else:
        return None
    return f"sample of the {trial.arm} arm's output on {trial.prompt_id}: {text[:SAMPLE_CHARACTERS]!r}"


RELOAD_SECONDS = 0.5  # a load_duration this long is a model (re)load, not request parsing


@dataclass
class Analysis:
    """Theory, roofline and engagement notes for a run's comparisons, each measured once."""

    _probes: dict[tuple[str, ModelPair, str, int], EngagementProbe] = field(default_factory=dict)
    _costs: dict[tuple[str, ModelPair, int], Costs] = field(default_factory=dict)
    _roofline_shown: set[tuple[str, ModelPair]] = field(default_factory=set)

    def notes(self, backend: Backend, comparison: Comparison, weight_bytes: int | None = None) -> list[str]:
        """Near-tie notes, the roofline (once per backend and pair, from the weights' size at load), a sample, reloads."""
        plan = comparison.plan
        notes = list(comparison.output.near_ties)
        if plan.baseline.label == "plain" and (backend.name, backend.pair) not in self._roofline_shown:
            self._roofline_shown.add((backend.name, backend.pair))
            roofline = roofline_note(weight_bytes, comparison.arm_tps("baseline"))
            notes += [roofline] if roofline else []
        other = comparison.other_reading
        if other is None and plan.reading == "prompts-like-these":
            notes.append(
                "prompts like these needs every prompt measured equally often, at least twice: "
                "the verdict read these prompts instead"
            )
        if other is not None:
            reading = "these prompts" if plan.reading == "prompts-like-these" else "prompts like these"
            notes.append(
                f"{reading}: {other.estimate:.2f}x [{other.low:.2f}, {other.high:.2f}] "
                f"(the verdict reads {comparison.statement}{_prompts_needed(comparison)})"
            )
        notes += _stalls(comparison)
        sample = _sample(backend, comparison)
        notes += [sample] if sample else []
        reloads = [t.load_s for p in comparison.pairs for t in (p.baseline, p.treatment) if t.load_s]
        slow = [s for s in reloads if s >= RELOAD_SECONDS]
        if slow:
            notes.append(
                f"the server (re)loaded the model before {len(slow)} of {2 * len(comparison.pairs)} generations "
                f"({sum(slow):.1f} s in all), excluded from decode and first-token timing"
            )
        return notes

    def engagement(
        self, backend: Backend, comparison: Comparison, progress: Callable[[Progress], None] = lambda _: None
    ) -> tuple[str | None, list[str], NotRun | None]:
        """Why the arms cannot differ (``None`` when they can), the lines that show it, and the class of the
        engine's own reason where it gave one (:class:`~pytest_specdec.backends.base.NotRun`).

        Counted drafts decide where the backend reports them: the SD arm must draft,
        the plain arm must not. Otherwise the server's own answers (static evidence) can
        refuse, and only the probe can accept: a sign of SD in the probe confirms; no
        sign is not measurable even when the server's answers say SD toggles (Ollama
        reports no draft counts, and a draft that fails to set up falls back to plain
        decoding without a word).
        """
        plan = comparison.plan
        if not plan.treatment.speculative:
            return None, [], None
        evidence = backend.speculation_evidence() if isinstance(backend, KnowsSpeculation) else None
        why = evidence.why if evidence is not None else None

        def not_run(detail: str) -> str:  # the engine's class, where it said one, then its words
            said = f" — the engine says: {why.value}" if why else ""
            return f"not measurable: SD not engaged{said} ({detail})"

        if comparison.engaged is False:
            if evidence is not None and evidence.sd_arm is False:  # the server is not speculating at all
                return not_run(evidence.reason), [], why
            said = f"; {evidence.reason}" if evidence is not None and evidence.sd_arm else ""
            return not_run(f"the {plan.treatment.label} arm drafted 0 tokens{said}"), [], why
        drafted = None if plan.baseline.speculative else baseline_drafted(comparison.pairs)
        if drafted:
            return (
                f"not measurable: both arms speculate (the {plan.baseline.label} arm drafted {drafted} tokens)",
                [],
                None,
            )
        if comparison.engaged is True:
            return None, [], None
        if evidence is not None and (evidence.sd_arm is False or evidence.plain_arm is True):
            if evidence.plain_arm is True:
                return f"not measurable: SD not engaged ({evidence.reason})", [], None
            return not_run(evidence.reason), [], why
        probe = self._probe(backend, plan, progress)
        lines = [probe.describe()]
        if probe.plain_speculates:
            return "not measurable: both arms look speculative (" + probe.describe() + ")", lines, None
        if probe.sd_live:
            return None, lines, None
        reason = evidence.reason if evidence is not None else "the backend reports no drafted tokens"
        c = probe.contrast
        return not_run(f"no sign of SD: contrast {c.estimate:.2f} [{c.low:.2f}, {c.high:.2f}]; {reason}"), lines, why

    def theory(self, backend: Backend, comparison: Comparison) -> TheoryRecord | None:
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
            unmeasurable = "c and r_v are not measurable through this backend"
            return TheoryRecord(
                alpha=alpha,
                gamma=gamma,
                c=None,
                r_v=None,
                predicted=None,
                break_even_alpha=None,
                agrees=None,
                cause=unmeasurable,
                method="accepted/drafted only",
                text=f"α={alpha:.2f} γ={gamma} ({unmeasurable})",
            )
        key = (backend.name, backend.pair, gamma)
        if key not in self._costs:
            draft_s, one_s, wide_s, method = backend.step_costs(plan.prompts[0].text, gamma)
            lookup = "lookup" in method  # an n-gram drafter's time is measured as c, with no model call
            self._costs[key] = Costs(draft_s / one_s, wide_s / one_s, one_s, method, draft_is_model=not lookup)
        costs = self._costs[key]
        decode = comparison.speedup if plan.speedup_of == DECODE else comparison.other_metric  # theory models decode
        why = explain(rate, gamma, costs, decode or comparison.speedup, comparison.arm_tps("baseline"))
        return TheoryRecord(
            alpha=why.alpha,
            gamma=gamma,
            c=why.c,
            r_v=why.r_v,
            predicted=why.predicted,
            break_even_alpha=why.break_even_alpha,
            agrees=why.agrees,
            cause=why.cause,
            method=costs.method,
            text=why.describe(),
        )

    def _probe(
        self, backend: Backend, plan: ComparisonPlan, progress: Callable[[Progress], None] = lambda _: None
    ) -> EngagementProbe:
        """The engagement probe, once per backend, pair and SD arm (for backends that count no drafts)."""
        key = (backend.name, backend.pair, plan.treatment.label, plan.treatment.num_draft)
        if key not in self._probes:
            self._probes[key] = probe_engagement(
                backend,
                baseline=plan.baseline,
                treatment=plan.treatment,
                max_tokens=plan.max_tokens,
                confidence=plan.confidence,
                progress=lambda update: progress(replace(update, category=plan.category)),
            )
        return self._probes[key]
