"""The lossless check under sampling: which check applies, and the continuations the distribution check draws.

Where a backend draws the very same tokens for one seed with and without SD
(:class:`~pytest_specdec.backends.base.Samples` says ``same``), each pair runs both arms
with one seed and the exact check applies, as under greedy decoding. Elsewhere only the
distribution is the same, and :func:`sampled_outputs` draws, per prompt, equally many
short seeded continuations with each arm (interleaved, so drift cannot favour one) for
:func:`~pytest_specdec.output_distribution.distribution_check`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pytest_specdec.backends.base import Arm, Backend, GenerationRequest
from pytest_specdec.backends.sampling import Samples
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.output_distribution import DistributionCheck, SampledOutputs, distribution_check

if TYPE_CHECKING:
    from pytest_specdec.measure import ComparisonPlan, OutputCheck

EXACT = "exact"  # greedy: SD must give the plain tokens
SAME_SEED = "same-seed"  # sampled, on a backend that draws the same tokens per seed with and without SD
DISTRIBUTION = "distribution"  # sampled elsewhere: the arms' token frequencies are compared


def check_method(backend: object, greedy: bool) -> str:
    """Which lossless check a comparison on ``backend`` uses; a backend that cannot sample is refused."""
    if greedy:
        return EXACT
    if not isinstance(backend, Samples):
        name = getattr(backend, "name", type(backend).__name__)
        raise SpecdecUsageError(
            f"backend {name} decodes greedily only here — drop temperature/top_p, or use llama-cpp, llama-server or mlx"
        )
    return SAME_SEED if backend.sampled_draws_per_seed() == "same" else DISTRIBUTION


def pair_seed(order: str, index: int) -> int:
    """The seed both arms of pair ``index`` sample with: nonzero (llama-cpp-python reads 0 as "random")."""
    return 1 + (int(order or "0", 16) + index) % (2**31 - 2)


def sampled_outputs(
    backend: Backend,
    prompts: list[tuple[str, str]],
    arms: tuple[Arm, Arm],
    request: Callable[[str, Arm, int], GenerationRequest],
    *,
    generations: int,
    first_seed: int,
    progress: Callable[[int, int], None] | None = None,
) -> list[SampledOutputs]:
    """``generations`` continuations per arm and prompt (``(id, text)``), each with a seed of its own.

    One arm draws all its continuations, then the other: what a seeded draw gives does not depend on
    when it runs, and a backend that holds one arm at a time (llama-server in restart mode) would
    otherwise restart its server for every continuation.
    """
    total, done = 2 * generations * len(prompts), 0
    drawn: dict[tuple[str, str], list[tuple[int, ...]]] = {}
    for arm in arms:
        for prompt_index, (prompt_id, text) in enumerate(prompts):
            for index in range(generations):
                # A seed of its own for every continuation: one seed for both arms would tie their draws
                # together (on mlx the first token shares its key), and one seed list for every prompt would
                # tie the prompts' statistics together while the permutations shuffle each prompt alone
                # (it made 2 of 20 lossless runs fail before each prompt had seeds of its own).
                seed = first_seed + 2 * (prompt_index * generations + index) + (arm is arms[1])
                tokens: list[int] = []
                for burst in backend.generate(request(text, arm, seed)):
                    tokens.extend(burst.token_ids)
                drawn.setdefault((arm.label, prompt_id), []).append(tuple(tokens))
                done += 1
                if progress is not None:
                    progress(done, total)
    return [
        SampledOutputs(prompt_id, tuple(drawn[arms[0].label, prompt_id]), tuple(drawn[arms[1].label, prompt_id]))
        for prompt_id, _ in prompts
    ]


def check_distribution(
    backend: Backend, plan: ComparisonPlan, progress: Callable[[int, int], None] | None = None
) -> DistributionCheck:
    """Draw the plan's continuations from both arms on every prompt and compare their distributions."""

    def request(text: str, arm: Arm, seed: int) -> GenerationRequest:
        return GenerationRequest(text, arm, plan.distribution_tokens, seed, plan.sampling)

    outputs = sampled_outputs(
        backend,
        [(p.id, p.text) for p in plan.prompts],
        (plan.baseline, plan.treatment),
        request,
        generations=plan.distribution_generations,
        first_seed=pair_seed(plan.order, 1_000_003),
        progress=progress,
    )
    return distribution_check(outputs, plan.distribution_tokens, seed=pair_seed(plan.order, 0))


def lossless_failure(output: OutputCheck, plan: ComparisonPlan) -> str:
    """The line a lossy comparison fails with, naming the check that caught it."""
    check = output.distribution
    if output.method == DISTRIBUTION and check is not None:
        big = check.largest
        return (
            f"SD changed the output distribution ({plan.sampling.label()}): {check.finding} (permutation "
            f"p={check.p_value:.3g} ≤ {check.alpha:g}, {check.generations} continuations of {check.tokens} tokens "
            f"per arm and prompt; largest difference: prompt {big.prompt_id}, token {big.position}, id {big.token} "
            f"drawn {big.baseline_count}x plain vs {big.treatment_count}x SD)"
        )
    if output.method == SAME_SEED:
        return (
            f"SD changed the output: prompt {output.prompt_id} differs from plain decoding at {output.unit} "
            f"{output.position} with the same seed ({plan.sampling.label()}; this backend draws the same tokens per "
            "seed with and without SD, so sampled SD must reproduce them)"
        )
    margin = (
        f"; plain logit margin {output.margin:.3f} > near-tie limit {plan.near_tie_logits:g}, see --specdec-near-tie)"
        if output.margin is not None
        else ")"
    )
    return (
        f"SD changed the output: prompt {output.prompt_id} differs from plain decoding at {output.unit} "
        f"{output.position} (greedy speculative decoding must be lossless{margin}"
    )
