"""The one measurement protocol, the same for every backend.

1. **Warm-up**: one generation per arm, discarded (kernels compile, caches fill).
2. **Interleaved pairs in blocks**: pair *i* runs both arms back to back on the same
   prompt; a block runs every prompt twice with the arm order balanced
   (:func:`~pytest_specdec.sequential.pair_schedule`). Slow drift of the machine (heat,
   background load) hits both arms of a pair alike and cancels in the pair's log-ratio.
3. **Fixed budget**: every generation decodes ``max_tokens`` tokens, greedy by default;
   sampled (``temperature`` > 0) with one seed for both arms of a pair.
4. **Decode-only timing**: the wall clock from the first token to the last, by the
   burst; time to first token is kept apart. Servers that time themselves report
   their own decode seconds, which win.
5. **Lossless check**: greedy SD must reproduce the plain tokens exactly; sampled SD too
   where the backend draws the same tokens per seed, elsewhere the plain arm's token
   distribution (:mod:`~pytest_specdec.measure.sampled`).
6. **Engaged check**: the SD arm must have drafted at least one token.
7. **Group-sequential stopping** after whole blocks
   (:mod:`~pytest_specdec.sequential`): the interval at each look is a repeated
   confidence interval, valid whenever the run stops; a bound that can no longer be
   decided within the budget stops being waited for (futility), and a time budget
   (:mod:`~pytest_specdec.measure.budget`) stops the pairs at the last look that fits it.
8. **Cut short**: Ctrl-C or SIGTERM during the pairs raises :class:`CutShort`, which carries
   the comparison of the pairs measured so far (two or more), for the history.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pytest_specdec.axes import DEFAULT_CONDITIONS, Conditions
from pytest_specdec.axes.concurrency import CONCURRENCY
from pytest_specdec.axes.context import CONTEXT
from pytest_specdec.axes.metric import DECODE, END_TO_END, METRIC
from pytest_specdec.axes.num_draft import NUM_DRAFT
from pytest_specdec.axes.sampling import SAMPLING, Sampling
from pytest_specdec.backends.base import Arm, Backend, CompilesPerShape, GenerationRequest
from pytest_specdec.embedded.prompts import Prompt
from pytest_specdec.measure.budget import distribution_seconds, stop_for_time
from pytest_specdec.measure.looks import decided, futile_at, look_at
from pytest_specdec.measure.lossless import ExplainsDivergence, OutputCheck, check_output, lossless
from pytest_specdec.measure.sampled import DISTRIBUTION, SAME_SEED, check_method, pair_seed
from pytest_specdec.measure.streams import run_streams
from pytest_specdec.measure.trial import StreamTiming, Trial, timed_generation
from pytest_specdec.sequential import Estimate, look_schedule, pair_schedule
from pytest_specdec.stats import Interval

Clock = Callable[[], float]
StopRule = Callable[["Interval", "Interval | None"], bool]
"""Given the speedup and acceptance intervals at a look, whether the run may stop."""


@dataclass(frozen=True)
class Pair:
    """Both arms on one prompt, back to back."""

    index: int
    prompt_id: str
    first: str  # label of the arm that ran first
    baseline: Trial
    treatment: Trial

    @property
    def log_ratio(self) -> float:
        """``log(treatment tok/s ÷ baseline tok/s)``."""
        return math.log(self.treatment.decode_tps / self.baseline.decode_tps)

    @property
    def seconds(self) -> tuple[float, float]:
        """Each arm's decode seconds for the baseline arm's tokens (SD's by its own rate, should counts differ)."""
        tokens = self.baseline.decode_tokens
        return tokens / self.baseline.decode_tps, tokens / self.treatment.decode_tps

    def seconds_of(self, metric: str) -> tuple[float, float]:
        """Each arm's seconds for ``decode`` (:attr:`seconds`) or ``end-to-end``: prompt in, last token out.

        End to end adds each arm's time to its first token (its prefill, and a draft's where
        the backend runs it before the first token) to its decode seconds.
        """
        plain, sd = self.seconds
        if metric == END_TO_END:
            return self.baseline.ttft_s + plain, self.treatment.ttft_s + sd
        return plain, sd


@dataclass(frozen=True)
class ComparisonPlan:
    """What to compare, on which prompts, and when to stop."""

    category: str
    prompts: tuple[Prompt, ...]
    baseline: Arm
    treatment: Arm
    max_tokens: int
    min_trials: int
    max_trials: int
    confidence: float
    stop_when: StopRule | None = None  # None: stop at ``precision``
    precision: float = 0.05  # relative half-width that ends a run without a stop rule
    require_identical_output: bool = True
    # A first divergence where the plain arm's top two logits are closer than this is
    # a numerical near-tie (batch-size-dependent arithmetic), not an SD error.
    near_tie_logits: float = 0.1
    seed: int = 0
    # The speedup bounds the test states (ratio scale), for futility; their error shares are in ``confidence``.
    bounds: tuple[float, ...] = ()
    reading: str = "these-prompts"  # or "prompts-like-these": which interval the verdicts use
    # Seeds the coin flips of the arm order (:func:`~pytest_specdec.sequential.pair_schedule`); empty: drawn
    # fresh for each comparison, so no pattern of the machine lines up with the same order run after run.
    order: str = ""
    # Every axis it runs under (γ, sampling, decode or end to end, context …): carried unchanged into its record.
    conditions: Conditions = DEFAULT_CONDITIONS
    # The distribution check (sampled SD on a backend whose draws differ per seed): continuations per arm and
    # prompt, and tokens each (studies/sampling_check_rates.py measured its error rates at these).
    distribution_generations: int = 128
    distribution_tokens: int = 16
    # SHA-256 of the prompts' texts as the set gave them (before a context prefix): kept with the record.
    prompt_digest: str = ""
    # Seconds this comparison may take, warm-up and distribution check included (None: no time budget).
    time_budget_s: float | None = None

    def __post_init__(self) -> None:
        if self.conditions.get(NUM_DRAFT) is None:  # γ is the SD arm's, where the conditions leave it to the arm
            object.__setattr__(self, "conditions", self.conditions.with_(num_draft=self.treatment.num_draft))

    @property
    def sampling(self) -> Sampling:
        """How both arms decode (the sampling axis)."""
        return self.conditions.get(SAMPLING)

    @property
    def speedup_of(self) -> str:
        """``decode`` or ``end-to-end``: which seconds the speedup, its verdicts and its stopping use."""
        return self.conditions.get(METRIC)

    @property
    def context(self) -> int:
        """Tokens of prefix before every prompt (the prompts carry it: :mod:`~pytest_specdec.measure.context`)."""
        return self.conditions.get(CONTEXT)

    def under(self, **values: object) -> ComparisonPlan:
        """This plan under other values of some axes (by axis name): ``plan.under(sampling=Sampling(0.7))``."""
        return replace(self, conditions=self.conditions.with_(**values))

    def statement(self, measured: int | None = None) -> str:
        """What the verdict is about: ``these 4 code prompts`` or ``code prompts like these (4 measured)``."""
        count = len(self.prompts) if measured is None else measured
        kind = f"{self.category} prompts" if self.category not in ("all", "") else "prompts"
        condition = self.conditions.statement()
        if self.reading == "prompts-like-these":
            return f"{kind} like these ({count} measured){condition}"
        return f"these {count} {kind}{condition}"

    def with_order(self) -> ComparisonPlan:
        """This plan with its arm order's seed: the given one, or a fresh one (recorded with the result)."""
        import secrets

        return self if self.order else replace(self, order=secrets.token_hex(6))

    @property
    def alpha(self) -> float:
        """The one-sided error this comparison's interval may spend over all its looks."""
        return (1.0 - self.confidence) / 2.0


@dataclass(frozen=True)
class Progress:
    """Emitted after every pair, for the terminal."""

    category: str
    done: int
    planned_max: int
    interval: Interval | None
    stage: str = "pair"  # or "engagement probe": the rounds that look for a sign of SD after the pairs
    after_s: float = 0.0  # the distribution check's expected seconds after the pairs, from their rate so far


@dataclass(frozen=True)
class Comparison:
    """The outcome of one paired comparison."""

    plan: ComparisonPlan
    pairs: tuple[Pair, ...]
    speedup: Interval
    acceptance: Interval | None
    looks: tuple[int, ...]
    output: OutputCheck
    engaged: bool | None  # None: the backend cannot tell
    stopped: str = ""
    other_reading: Interval | None = None  # the interval of the reading the verdicts do not use
    other_metric: Interval | None = None  # the speedup of the metric the verdicts do not use (decode / end to end)
    estimate: Estimate | None = None  # the final look's, on the log scale (per-prompt totals, pairs left out)

    @property
    def statement(self) -> str:
        """What its verdict is about, counting the prompts its pairs measured (a short budget measures fewer)."""
        return self.plan.statement(len({p.prompt_id for p in self.pairs}) or None)

    @property
    def log_ratios(self) -> tuple[float, ...]:
        """Per-pair log speedups."""
        return tuple(p.log_ratio for p in self.pairs)

    def ttft_s(self, arm: str) -> float:
        """Median time to first token of one arm (``baseline`` or ``treatment``) over its pairs."""
        import statistics

        return statistics.median((p.baseline if arm == "baseline" else p.treatment).ttft_s for p in self.pairs)

    def arm_tps(self, arm: str) -> float:
        """Decode tok/s of one arm (``baseline`` or ``treatment``) over all its pairs: tokens ÷ seconds, summed."""
        seconds = math.fsum(p.seconds[0 if arm == "baseline" else 1] for p in self.pairs)
        return sum(p.baseline.decode_tokens for p in self.pairs) / seconds

    @property
    def generated_tokens(self) -> int:
        """Tokens generated by all measured trials (warm-up excluded)."""
        return sum(len(p.baseline.token_ids) + len(p.treatment.token_ids) for p in self.pairs)


def run_trial(
    backend: Backend, prompt: Prompt, arm: Arm, plan: ComparisonPlan, clock: Clock, *, seed: int | None = None
) -> Trial:
    """Run one generation and time it by the burst (under concurrency, that many streams of it at once); an
    in-process backend sends the first token and then the rest at once (``every_token=False``)."""
    request = GenerationRequest(
        prompt.text, arm, plan.max_tokens, plan.seed if seed is None else seed, plan.sampling, every_token=False
    )
    streams = plan.conditions.get(CONCURRENCY)
    if streams > 1:
        return run_streams(backend, request, prompt.id, streams, clock)
    timed = timed_generation(backend, request, clock)
    stats = timed.stats
    decode_s, decode_tokens = timed.last_at - timed.first_at, timed.decode_tokens
    client_tps = decode_tokens / decode_s if decode_s > 0 else None
    if stats.server_decode_seconds is not None:
        decode_s = stats.server_decode_seconds
        decode_tokens = stats.server_decode_tokens if stats.server_decode_tokens is not None else decode_tokens
    ttft = stats.server_ttft_seconds if stats.server_ttft_seconds is not None else timed.first_at - timed.start
    return Trial(
        arm=arm.label,
        prompt_id=prompt.id,
        token_ids=timed.tokens,
        prompt_tokens=stats.prompt_tokens,
        ttft_s=ttft,
        decode_s=decode_s,
        decode_tokens=decode_tokens,
        drafted=stats.drafted,
        accepted=stats.accepted,
        peak_memory_bytes=stats.peak_memory_bytes,
        load_s=stats.load_seconds,
        units=stats.output_units,
        client_tps=client_tps if stats.server_decode_seconds is not None else None,
    )


def _engaged(pairs: Sequence[Pair]) -> bool | None:
    drafted = [p.treatment.drafted for p in pairs if p.treatment.drafted is not None]
    return sum(drafted) > 0 if drafted else None


def baseline_drafted(pairs: Sequence[Pair]) -> int | None:
    """Tokens the baseline arm drafted (``None`` when the backend cannot count them)."""
    drafted = [p.baseline.drafted for p in pairs if p.baseline.drafted is not None]
    return sum(drafted) if drafted else None


def run_comparison(
    backend: Backend,
    plan: ComparisonPlan,
    progress: Callable[[Progress], None] | None = None,
    clock: Clock = time.perf_counter,
) -> Comparison:
    """Warm up, run paired trials until decided, futile or out of budget, and summarise.

    Each arm is warmed on the first prompt; on a runtime that compiles its kernels per
    shape (:class:`~pytest_specdec.backends.base.CompilesPerShape`: mlx on a GPU) on every
    prompt of the plan, at the full token budget, since every new (prompt, length) is slow
    the first time. On an H200 with mlx's CUDA build, a warm-up of the first prompt (or of
    8 tokens per prompt) left each prompt's first SD generation 5–20× slower than its
    later ones (docs/measurements.md); a full warm-up per prompt does not.
    """
    started = clock()
    plan = plan.with_order()
    method = check_method(backend, plan.sampling.greedy)  # a backend that cannot sample is refused first
    every = isinstance(backend, CompilesPerShape) and backend.compiles_per_shape()
    warm_seed = None if plan.sampling.greedy else pair_seed(plan.order, -1)  # a seed, never llama-cpp's "random" 0
    for prompt in plan.prompts if every else plan.prompts[:1]:
        for arm in (plan.baseline, plan.treatment):
            run_trial(backend, prompt, arm, plan, clock, seed=warm_seed)
    looks = look_schedule(len(plan.prompts), plan.min_trials, plan.max_trials)
    pairs: list[Pair] = []
    try:
        stopped = _interleaved_pairs(backend, plan, looks, progress, clock, into=pairs, timing=(started, method))
    except KeyboardInterrupt as interrupt:
        if len(pairs) < 2:
            raise
        said = f"interrupted after {len(pairs)} of at most {looks[-1]} pairs"
        # Each greedy pair was checked as it came (a divergence stops the pairs); a sampled run's check, which
        # follows the pairs, never ran: neither is asked of the engine again while the run stops.
        checked = OutputCheck(True, method=method)
        raise CutShort(_summary(plan, pairs, looks, checked, said)) from interrupt

    def shown(done: int, total: int) -> None:
        if progress is not None:
            progress(Progress(plan.category, done, total, None, stage="distribution check"))

    return _summary(plan, pairs, looks, lossless(backend, plan, pairs, method, shown), stopped)


class CutShort(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during the pairs: :attr:`comparison` is what its pairs so far measured (its cause is the
    interrupt itself, which the caller re-raises once it has kept the comparison)."""

    def __init__(self, comparison: Comparison) -> None:
        super().__init__(comparison.stopped)
        self.comparison = comparison


def _summary(plan: ComparisonPlan, pairs: Sequence[Pair], looks: tuple[int, ...], output: OutputCheck,
             stopped: str) -> Comparison:  # fmt: skip
    final = look_at(plan, pairs, looks)
    other = plan.under(metric=DECODE if plan.speedup_of == END_TO_END else END_TO_END)
    return Comparison(
        plan=plan,
        pairs=tuple(pairs),
        speedup=final.speedup,
        acceptance=final.acceptance,
        looks=looks,
        output=output,
        engaged=_engaged(pairs) if plan.treatment.speculative else None,
        stopped=stopped,
        other_reading=final.other,
        other_metric=look_at(other, pairs, looks).speedup if len(pairs) >= 2 else None,
        estimate=final.estimate,
    )


def _after_pairs_s(plan: ComparisonPlan, method: str, per_pair_s: float, pairs: Sequence[Pair]) -> float:
    """The distribution check's expected seconds where :func:`lossless` will run one: sampled SD whose draws
    differ per seed, or draw the same but some pair parted; never where the arms need not agree."""
    parted = method == SAME_SEED and any(p.baseline.token_ids != p.treatment.token_ids for p in pairs)
    if not plan.require_identical_output or not (method == DISTRIBUTION or parted):
        return 0.0
    return distribution_seconds(
        per_pair_s, plan.distribution_generations, len(plan.prompts), plan.distribution_tokens, plan.max_tokens
    )


def _interleaved_pairs(
    backend: Backend,
    plan: ComparisonPlan,
    looks: tuple[int, ...],
    progress: Callable[[Progress], None] | None,
    clock: Clock,
    *,
    into: list[Pair],
    timing: tuple[float, str],
) -> str:
    """Append pairs to ``into`` until a look decides, is futile, fails a check or runs out of time or pairs; say
    why it stopped (``timing``: when the comparison began by ``clock``, and which lossless check follows)."""
    started, method = timing
    pairs, began = into, clock()
    schedule = pair_schedule(len(plan.prompts), looks[-1], plan.order)
    for index in range(looks[-1]):
        prompt_index, sd_first = schedule[index]
        prompt = plan.prompts[prompt_index]
        arms = (plan.treatment, plan.baseline) if sd_first else (plan.baseline, plan.treatment)
        seed = None if plan.sampling.greedy else pair_seed(plan.order, index)
        first, second = (run_trial(backend, prompt, arm, plan, clock, seed=seed) for arm in arms)
        baseline, treatment = (second, first) if sd_first else (first, second)
        pairs.append(Pair(index, prompt.id, arms[0].label, baseline, treatment))
        shown = progress is not None or len(pairs) in looks  # the interval is computed only to be shown or used
        look = look_at(plan, pairs, looks) if len(pairs) >= 2 and shown else None
        now = clock()
        per_pair_s = (now - began) / len(pairs)
        after_s = _after_pairs_s(plan, method, per_pair_s, pairs)
        if progress is not None:
            progress(Progress(plan.category, len(pairs), looks[-1], look.speedup if look else None, after_s=after_s))
        # Sampled pairs that part are not yet a failure: the distribution check decides (measure.sampled).
        if (
            plan.require_identical_output
            and plan.sampling.greedy
            and not check_output(pairs[-1:], backend, plan).identical
        ):
            return "stopped: the arms produced different tokens"
        if len(pairs) in looks and look is not None:
            at = f"look {looks.index(len(pairs)) + 1} of {len(looks)}"
            if plan.treatment.speculative and _engaged(pairs) is False:
                return "stopped: the SD arm never drafted"
            if not plan.baseline.speculative and baseline_drafted(pairs):
                return "stopped: the plain arm drafted"
            if decided(plan, look):
                return f"decided at {at}"
            if futile_at(plan, look, looks):
                return f"futile at {at}: the bound cannot be decided within the budget"
            budget = plan.time_budget_s
            later = [n for n in looks if n > len(pairs)]
            if (
                budget is not None
                and later
                and stop_for_time(now - started, budget, per_pair_s, later[0] - len(pairs), after_s)
            ):
                return f"stopped at {at}: the next look would end past this comparison's time budget ({budget:.0f} s)"
    return "trial budget used up"


__all__ = [
    "DECODE",
    "END_TO_END",
    "Comparison",
    "ComparisonPlan",
    "Conditions",
    "CutShort",
    "ExplainsDivergence",
    "OutputCheck",
    "Pair",
    "Progress",
    "StreamTiming",
    "Trial",
    "baseline_drafted",
    "check_output",
    "run_comparison",
    "run_trial",
]
