"""The distribution check for sampled SD, on continuations of the simulated backend's Markov chain.

Every sample here comes from fixed seeds, so each test has one answer; the error rates
over many runs are measured by ``studies/sampling_check_rates.py``.
"""

from __future__ import annotations

import pytest

from pytest_specdec.backends.simulated.sampler import sampled_tokens
from pytest_specdec.output_distribution import SampledOutputs, continuation_scores, distribution_check


def outputs(sd_temperature: float, *, generations: int = 96, seed: int = 0, prompts: int = 4) -> list[SampledOutputs]:
    """Per prompt, ``generations`` plain continuations at T=0.7 and as many SD ones at ``sd_temperature``."""
    result = []
    for p in range(prompts):
        base = seed + 10_000 * p
        plain = tuple(tuple(sampled_tokens(f"p{p}", 16, base + 2 * i, 0.7, 1.0)) for i in range(generations))
        sd = tuple(
            tuple(sampled_tokens(f"p{p}", 16, base + 2 * i + 1, sd_temperature, 1.0)) for i in range(generations)
        )
        result.append(SampledOutputs(f"p{p}", plain, sd))
    return result


def test_a_lossless_arm_passes_and_a_hotter_one_is_caught_with_its_direction() -> None:
    same = distribution_check(outputs(0.7), 16)
    hotter = distribution_check(outputs(0.8), 16)
    colder = distribution_check(outputs(0.6), 16)
    assert same.same
    assert same.p_value > 0.05
    assert not hotter.same
    assert hotter.p_value <= 0.01
    assert hotter.direction == "more spread out"
    assert not colder.same
    assert colder.direction == "more concentrated"


def test_false_alarms_stay_near_alpha_over_many_lossless_samples() -> None:
    p_values = [distribution_check(outputs(0.7, generations=24, seed=s, prompts=2), 16, permutations=199).p_value
                for s in range(0, 60_000, 1000)]  # fmt: skip
    assert sum(p <= 0.1 for p in p_values) <= 12  # 60 runs at alpha 0.1: 6 expected, 12 has p < 0.02
    assert min(p_values) >= 1 / 200  # (1 + k) / (B + 1) never reaches 0


def test_the_largest_difference_names_a_prompt_position_and_token() -> None:
    check = distribution_check(outputs(1.5), 16)
    big = check.largest
    assert big.prompt_id in {"p0", "p1", "p2", "p3"}
    assert 0 <= big.position < 16
    assert big.baseline_count > big.treatment_count  # the common token is drawn less often when hotter
    assert check.generations == 96
    assert check.tokens == 16
    assert check.permutations == 999


def test_scores_reward_common_tokens() -> None:
    rows = SampledOutputs("p", ((1, 2), (1, 2)), ((1, 2), (3, 4)))
    scores = continuation_scores(rows, 2)
    assert scores[0] == scores[1] == scores[2] > scores[3] == 0.0


def test_unequal_or_tiny_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="as many continuations"):
        distribution_check([SampledOutputs("p", ((1,), (2,)), ((1,),))], 1)


def test_a_wrong_distribution_of_the_same_spread_is_caught_by_its_cells() -> None:
    import numpy as np

    from pytest_specdec.backends.simulated import sampler

    def swapped(prompt: str, seed: int) -> tuple[int, ...]:
        """The chain with each step's two most likely tokens exchanged: the same spread, the wrong tokens."""
        rng, previous, drawn = np.random.default_rng(seed), int(sampler._start(prompt)), []
        for _ in range(16):
            weights = np.exp((sampler._logits()[previous] - sampler._logits()[previous].max()) / 0.7)
            first, second = np.argsort(-weights)[:2]
            weights[[first, second]] = weights[[second, first]]
            previous = int(rng.choice(sampler.VOCAB, p=weights / weights.sum()))
            drawn.append(previous)
        return tuple(drawn)

    same_spread = [
        SampledOutputs(o.prompt_id, o.baseline, tuple(swapped(o.prompt_id, 7_000 + i) for i in range(96)))
        for o in outputs(0.7)
    ]
    check = distribution_check(same_spread, 16)
    assert not check.same
    assert abs(check.largest.baseline_count - check.largest.treatment_count) > 30
