"""``pytest-specdec validate``: is a submitted comparison consistent? Decided from the file alone, nothing run.

Each check reads what the file keeps and gives one line per reason to reject it:

- **schema and protocol**: a submission of this schema, measured under this release's
  :data:`~pytest_specdec.store.records.MEASUREMENT_PROTOCOL`;
- **pairs**: as many pairs as it says it measured, each with both arms' rates and its counts;
- **paired and interleaved**: the pairs' prompts and arm order are exactly the ones its own
  arm-order seed gives (:func:`~pytest_specdec.sequential.pair_schedule`);
- **the interval**: recomputed from the pairs with the design's looks and confidence
  (:func:`~pytest_specdec.measure.looks.speedup_readings`), it must be the one the file states;
- **SD engaged**: the SD arm drafted, and never accepted more than it drafted;
- **lossless**: the output check ran and did not fail;
- **what a reader sees**: each bound's verdict, the conclusion, both arms' tok/s and the
  acceptance interval are the ones the pairs give;
- **physics**: no speedup above the tokens per target pass its own counts allow (a pass
  produces one token of the target's plus the accepted drafts, and costs at least a plain
  step). A plain rate above the chip's bandwidth roofline (where the chip's bandwidth and the
  target's size are known) is *flagged*, not rejected: a mixture of experts reads fewer bytes a
  token than its file holds, which the file cannot show;
- **release**: a backend this pytest-specdec knows, whose release string names a version
  its recorded versions list.

What it cannot check is said beside the result (:attr:`Validation.unchecked`): above all,
that the pairs were measured at all — consistent, fabricated pairs pass, so submitted rows
read "submitted, not reproduced".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.axes.concurrency import CONCURRENCY
from pytest_specdec.axes.metric import END_TO_END, METRIC
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.hardware import peak_bandwidth_gbs
from pytest_specdec.measure.looks import acceptance_interval, critical_value, speedup_readings
from pytest_specdec.measure.sampled import DISTRIBUTION, EXACT, SAME_SEED
from pytest_specdec.roofline import roofline_tps
from pytest_specdec.sequential import pair_schedule, total_time_ratio
from pytest_specdec.stats import Interval, combine, verdict_on
from pytest_specdec.store.records import MEASUREMENT_PROTOCOL, ComparisonRecord, Conclusion
from pytest_specdec.store.submissions import Submission, read_submission

RELATIVE_TOLERANCE = 1e-6  # the interval as recomputed against the one stated: JSON keeps 17 digits
PASS_BOUND_SLACK = 1.05  # the tokens-per-pass bound, with room for a first token counted on one side only
NOT_MEASURED = "that the pairs were measured at all: consistent, made-up pairs pass (submitted, not reproduced)"
VERSION = re.compile(r"^(?:v?\d+(?:\.\d+)*(?:[-.+]?[A-Za-z0-9.]+)?|b\d+(?:-[0-9a-f]+)?)$")


@dataclass(frozen=True)
class Validation:
    """What ``pytest-specdec validate`` decided about one file."""

    where: str
    reasons: tuple[str, ...]  # one line per reason to reject; empty: consistent
    unchecked: tuple[str, ...]  # what this validator cannot check about it
    flags: tuple[str, ...] = ()  # what looks implausible without being shown wrong (the roofline)

    @property
    def accepted(self) -> bool:
        """Whether no check found a reason to reject it."""
        return not self.reasons


def check_file(path: Path) -> Validation:
    """Validate one file (a file that is not a submission is one reason, never a traceback)."""
    try:
        submission = read_submission(path)
    except SpecdecUsageError as error:
        return Validation(str(path), (str(error),), (NOT_MEASURED,))
    return check_submission(submission, str(path))


def check_submission(submission: Submission, where: str) -> Validation:
    """Every check on one submission."""
    from pytest_specdec.backends import registered_backends

    c = submission.comparison
    reasons: list[str] = []
    unchecked = [NOT_MEASURED]
    flags: list[str] = []
    if c.protocol != MEASUREMENT_PROTOCOL:
        reasons.append(
            f"measured under protocol {c.protocol}; this validator checks protocol {MEASUREMENT_PROTOCOL} — "
            "measure again with this release of pytest-specdec"
        )
    if c.backend not in registered_backends():
        reasons.append(f"backend {c.backend!r} is not one pytest-specdec knows ({', '.join(registered_backends())})")
    released = _release(c)
    reasons += released[0]
    unchecked += released[1]
    unpaired = _pairs(c)
    reasons += unpaired
    if not unpaired:  # two pairs or more, each with its rates and tokens: everything can be recomputed
        reasons += _order(c)
        try:
            speedup = recomputed_speedup(c)
        except (ValueError, ZeroDivisionError, IndexError) as error:
            reasons.append(f"its interval cannot be recomputed from its pairs ({error})")
        else:
            reasons += _interval(c, speedup) + _reported(c, speedup)
        reasons += _lossless(c) + _tokens_per_pass(c)
        engaged = _engaged(c)
        reasons += engaged[0]
        unchecked += engaged[1]
        roofline = _roofline(submission)
        flags += roofline[0]
        unchecked += roofline[1]
    unchecked.append(f"whether {c.release} was ever released (no package index is read)")
    return Validation(where, tuple(reasons), tuple(unchecked), tuple(flags))


Found = tuple[list[str], list[str]]  # (reasons to reject, what cannot be checked)


def _release(c: ComparisonRecord) -> Found:
    named = [v for v in c.versions.values() if v and v in c.release]
    if not c.release.strip() or not named:
        return [f"release {c.release!r} names none of its recorded versions ({dict(c.versions)})"], []
    odd = [v for v in named if not VERSION.match(v)]
    return [], [f"which release {c.release!r} is: {odd[0]!r} is not a version"] if odd else []


def _pairs(c: ComparisonRecord) -> list[str]:
    reasons = []
    if c.trials != len(c.samples):
        reasons.append(
            f"it says {c.trials} pairs were measured but keeps {len(c.samples)}: pairs were dropped or added"
        )
    if len(c.samples) < 2:
        reasons.append(f"{len(c.samples)} pair(s): an interval needs at least two")
    bad = [
        i
        for i, s in enumerate(c.samples)
        if not all(math.isfinite(x) and x > 0 for x in (s.baseline_tps, s.treatment_tps)) or not s.decode_tokens
    ]
    if bad:
        reasons.append(f"pair {bad[0] + 1} (of {len(bad)} such) lacks a positive rate or its token count")
    design = c.design
    reasons += design.problems
    for name, value in (("looks", design.looks), ("arm_order", design.arm_order),
                        ("lossless_check", design.observed.lossless_check)):  # fmt: skip
        if not value and not any(f"scope {name!r}" in problem for problem in design.problems):
            reasons.append(f"scope has no {name!r}: the file cannot be checked without it")
    return reasons


def _order(c: ComparisonRecord) -> list[str]:
    """The pairs' prompts and arm order against the schedule the file's own seed gives."""
    ids = list(dict.fromkeys(s.prompt_id for s in c.samples))
    planned = len(ids) if c.trials <= 2 * len(ids) else c.design.prompt_count or len(ids)
    schedule = pair_schedule(planned, len(c.samples), c.design.arm_order or "")
    order = [ids[i] if i < len(ids) else "?" for i, _ in schedule[: len(ids)]]
    index = {prompt: k for k, prompt in enumerate(order)}
    for n, (sample, (prompt, sd_first)) in enumerate(zip(c.samples, schedule, strict=True), 1):
        first = c.treatment_arm if sd_first else c.baseline_arm
        if index.get(sample.prompt_id) != prompt or sample.first != first:
            return [
                f"pair {n} ran {sample.prompt_id} with {sample.first} first, where its arm-order seed "
                f"{c.design.arm_order!r} gives {order[prompt] if prompt < len(order) else '?'} with {first} first: "
                "not paired and interleaved as measured"
            ]
    return []


def recomputed_speedup(c: ComparisonRecord) -> Interval:
    """The speedup interval its pairs give, under the design's looks, confidence and reading."""
    seconds = [s.seconds_of(c.conditions.get(METRIC) == END_TO_END) for s in c.samples]
    kept = [x for x in seconds if x is not None]
    plain_s, sd_s = zip(*kept, strict=True)
    z = critical_value(len(kept), c.design.looks or (), c.speedup.confidence)
    estimate = total_time_ratio(plain_s, sd_s, [s.prompt_id for s in c.samples])
    return speedup_readings(estimate, z, c.speedup.confidence, c.design.reading, len(kept))[0]


def _interval(c: ComparisonRecord, again: Interval) -> list[str]:
    stated = c.speedup
    if all(math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE) or a == b for a, b in _sides(again, stated)):
        return []
    return [
        f"its interval {_shown(stated)} is not the one its pairs give ({_shown(again)}): the pairs or the interval "
        "were edited"
    ]


def _sides(a: Interval, b: Interval) -> list[tuple[float, float]]:
    return [(a.estimate, b.estimate), (a.low, b.low), (a.high, b.high)]


def _shown(i: Interval) -> str:
    return f"{i.estimate:.3f}x [{i.low:.3f}, {i.high:.3f}]"


def _engaged(c: ComparisonRecord) -> Found:
    counted = [s for s in c.samples if s.drafted is not None]
    if not counted:
        return [], [f"whether SD drafted: {c.backend} counted no drafts in these pairs"]
    drafted = sum(s.drafted or 0 for s in counted)
    if drafted == 0:
        return [f"SD never drafted (0 draft tokens over {len(counted)} pairs): not a speculative decoding result"], []
    over = [s for s in counted if (s.accepted or 0) > (s.drafted or 0)]
    return ([f"{len(over)} pair(s) accepted more drafts than they drafted"] if over else []), []


def _reported(c: ComparisonRecord, speedup: Interval) -> list[str]:
    """What a reader takes from the file besides the interval (``speedup``, recomputed from the pairs): each bound's
    verdict and the conclusion, both arms' tok/s and the acceptance interval, recomputed from the pairs."""
    acceptance = acceptance_interval([(s.drafted, s.accepted) for s in c.samples],
                                     critical_value(len(c.samples), c.design.looks or (), c.speedup.confidence))  # fmt: skip
    reasons = []
    for bound in c.judgement.bounds:
        interval = speedup if bound.metric == "speedup" else acceptance
        if interval is not None and verdict_on(interval, bound.kind, bound.bound) is not bound.verdict:
            again = verdict_on(interval, bound.kind, bound.bound).value
            reasons.append(f"it says {bound.label} {bound.verdict.value}, where its pairs give {again}")
    said = c.judgement.conclusion.verdict
    if c.judgement.bounds and said is not None and combine([b.verdict for b in c.judgement.bounds]) is not said:
        reasons.append(f"its conclusion {said.value!r} is not what its bounds' verdicts combine to")
    plain = math.fsum(s.decode_tokens or 0 for s in c.samples)
    for arm, stated, rates in (("plain", c.baseline_tps, [s.baseline_tps for s in c.samples]),
                               ("SD", c.treatment_tps, [s.treatment_tps for s in c.samples])):  # fmt: skip
        seconds = math.fsum((s.decode_tokens or 0) / r for s, r in zip(c.samples, rates, strict=True))
        if stated is not None and not math.isclose(stated, plain / seconds, rel_tol=RELATIVE_TOLERANCE):
            reasons.append(f"its {arm} arm's {stated:.1f} tok/s is not its pairs' {plain / seconds:.1f}")
    if (
        c.acceptance is not None
        and acceptance is not None
        and not all(
            math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=1e-12) for a, b in _sides(acceptance, c.acceptance)
        )
    ):
        reasons.append(f"its acceptance {_shown(c.acceptance)} is not its pairs' {_shown(acceptance)}")
    return reasons


def _lossless(c: ComparisonRecord) -> list[str]:
    method = c.design.observed.lossless_check
    if method not in (EXACT, SAME_SEED, DISTRIBUTION):
        return [f"lossless check {method!r} is not one pytest-specdec runs ({EXACT}, {SAME_SEED}, {DISTRIBUTION})"]
    if c.judgement.conclusion is Conclusion.FAILED:
        return ["its lossless check failed: SD changed the output, so its speed is not comparable"]
    return []


def tokens_per_pass(c: ComparisonRecord) -> float | None:
    """Tokens per target forward pass its counts show: each pass gives one target token plus the drafts it accepted."""
    tokens = sum(s.treatment_decode_tokens or s.decode_tokens or 0 for s in c.samples)  # the SD arm's own
    accepted = sum(s.accepted or 0 for s in c.samples)
    return tokens / (tokens - accepted) if tokens > accepted else None


def _tokens_per_pass(c: ComparisonRecord) -> list[str]:
    if not sum(s.drafted or 0 for s in c.samples):
        return []  # never drafted: said once, by the engagement check
    bound = tokens_per_pass(c)
    if bound is None:
        return ["it accepted as many drafts as it decoded tokens: no target pass left to produce them"]
    if c.speedup.estimate > bound * PASS_BOUND_SLACK:
        return [
            f"speedup {c.speedup.estimate:.2f}x is above the {bound:.2f} tokens per target pass its own draft counts "
            "allow: a target pass costs at least a plain step, so SD cannot gain more"
        ]
    return []


def _roofline(submission: Submission) -> tuple[list[str], list[str]]:
    """(flags, unchecked): a plain rate above the chip's bandwidth roofline for the target's size."""
    c, chip = submission.comparison, submission.machine.chip
    bandwidth = peak_bandwidth_gbs(chip, submission.machine.gpu_cores)
    size = c.design.observed.target_bytes or 0
    streams = c.conditions.get(CONCURRENCY) or 1
    if not bandwidth or size <= 0 or streams > 1:
        missing = (
            f"no peak bandwidth known for {chip!r}" if not bandwidth
            else "the target's size was not recorded" if size <= 0
            else f"{streams} streams at once share one read of the weights"
        )  # fmt: skip
        return [], [f"the bandwidth roofline: {missing}"]
    ceiling = roofline_tps(bandwidth, size)
    plain = sorted(s.baseline_tps for s in c.samples)[len(c.samples) // 2]
    if plain > ceiling:
        return [
            f"plain {plain:.1f} tok/s is above the {ceiling:.1f} tok/s roofline of {chip} ({bandwidth:g} GB/s) for "
            f"{size / 1e9:.2f} GB of weights: another chip or model, or a mixture of experts (fewer bytes a token)"
        ], []
    return [], []
