"""Is SD lossless? The exact check of both arms' tokens, and when sampling, the distribution check.

Greedy SD must reproduce the plain tokens; a first divergence where the plain arm's two
best logits are within the near-tie limit is arithmetic (batch-size-dependent), noted,
not failed. Sampled SD is checked as :mod:`~pytest_specdec.measure.sampled` says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from pytest_specdec.backends.base import Backend
from pytest_specdec.measure.sampled import DISTRIBUTION, EXACT, SAME_SEED, check_distribution, check_method
from pytest_specdec.output_distribution import DistributionCheck

if TYPE_CHECKING:
    from pytest_specdec.measure import ComparisonPlan, Pair


@dataclass(frozen=True)
class OutputCheck:
    """Result of the lossless comparison of both arms' tokens."""

    identical: bool
    prompt_id: str | None = None
    position: int | None = None
    near_ties: tuple[str, ...] = ()  # tolerated divergences, one note each
    margin: float | None = None  # the plain arm's logit margin at the failing divergence, when known
    unit: str = "token"  # what ``position`` counts: tokens, or characters of text
    method: str = EXACT  # or SAME_SEED / DISTRIBUTION (measure.sampled)
    distribution: DistributionCheck | None = None  # the distribution check's outcome, where it ran


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    for position, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return position
    return None if len(a) == len(b) else min(len(a), len(b))


@runtime_checkable
class ExplainsDivergence(Protocol):
    """A backend that can show the plain arm's logits where the arms diverged."""

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        """``logit(first) - logit(second)`` after ``prompt`` + ``prefix``, plain decoding."""
        ...


def _margin(backend: object, plan: ComparisonPlan, pair: Pair, position: int) -> float | None:
    if not isinstance(backend, ExplainsDivergence):
        return None
    plain, sd = pair.baseline.token_ids, pair.treatment.token_ids
    if position >= min(len(plain), len(sd)):
        return None
    prompt = next(p for p in plan.prompts if p.id == pair.prompt_id)
    margin = backend.logit_margin(prompt.text, plain[:position], plain[position], sd[position])
    return None if margin is None else abs(margin)


def _near_tie_note(plan: ComparisonPlan, pair: Pair, position: int, margin: float) -> str:
    return (
        f"prompt {pair.prompt_id}: the arms diverged at {pair.baseline.units} {position} on a near-tie "
        f"(plain logit margin {margin:.3f} ≤ {plan.near_tie_logits:g}) — batch-size-dependent arithmetic, not an SD error"
    )


def check_output(pairs: Sequence[Pair], backend: object = None, plan: ComparisonPlan | None = None) -> OutputCheck:
    """The first pair whose arms disagree on a token that is not a numerical near-tie."""
    near_ties: list[str] = []
    for pair in pairs:
        position = _first_difference(pair.baseline.token_ids, pair.treatment.token_ids)
        if position is None:
            continue
        sampled = plan is not None and not plan.sampling.greedy  # a logit margin says nothing about a draw
        margin = _margin(backend, plan, pair, position) if plan is not None and not sampled else None
        if plan is None or margin is None or margin > plan.near_tie_logits:
            method = EXACT if plan is None or not sampled else check_method(backend, False)
            return OutputCheck(False, pair.prompt_id, position, tuple(near_ties), margin, pair.baseline.units, method)
        note = _near_tie_note(plan, pair, position, margin)
        if note not in near_ties:  # the same prompt diverges the same way every time it comes round
            near_ties.append(note)
    method = EXACT if plan is None or plan.sampling.greedy else check_method(backend, False)
    return OutputCheck(True, near_ties=tuple(near_ties), method=method)


def lossless(
    backend: Backend, plan: ComparisonPlan, pairs: Sequence[Pair], method: str, shown: Callable[[int, int], None]
) -> OutputCheck:
    """The exact check; for sampled SD, the distribution check where one seed does not give one text.

    On a backend that draws the same tokens per seed with and without SD, pairs that match
    token for token settle it. Where some part, the batched verify's arithmetic can differ
    from single-token decoding enough to move a draw (Gemma 3 270M Q4_K_M on llama.cpp:
    17 of 32 sampled 24-token pairs parted, plain against plain 0 of 32), so the
    distribution check decides, and a note says how many parted.
    """
    exact = check_output(pairs, backend, plan)
    if method == EXACT or (method == SAME_SEED and exact.identical) or not plan.require_identical_output:
        return exact
    parted = sum(p.baseline.token_ids != p.treatment.token_ids for p in pairs)
    note = (
        f"with one seed the arms parted in {parted} of {len(pairs)} pairs — this backend draws the same tokens per "
        "seed with and without SD, but its batched verify's arithmetic moved some draws; the distribution check decided"
        if method == SAME_SEED
        else ""
    )
    return _distribution(backend, plan, shown, note)


def _distribution(backend: Backend, plan: ComparisonPlan, shown: Callable[[int, int], None], note: str) -> OutputCheck:
    check = check_distribution(backend, plan, shown)
    failed = not check.same
    return OutputCheck(
        check.same,
        prompt_id=check.largest.prompt_id if failed else None,
        position=check.largest.position if failed else None,
        near_ties=(note,) if note else (),
        method=DISTRIBUTION,
        distribution=check,
    )
