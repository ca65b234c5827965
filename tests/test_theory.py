"""α inversion, the predicted speedup, break-even α and dominant causes; general arms; γ sweeps."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_specdec.stats import Interval
from pytest_specdec.theory import (
    Costs,
    acceptance_rate,
    alpha_from_rate,
    break_even_alpha,
    expected_tokens,
    explain,
    predicted_speedup,
)

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


@pytest.mark.parametrize("gamma", [1, 3, 6])
@pytest.mark.parametrize("alpha", [0.2, 0.6, 0.9])
def test_alpha_is_recovered_from_simulated_drafting_rounds(alpha: float, gamma: int) -> None:
    """Draft γ tokens per round, accept each with probability α until the first rejection."""
    rng = np.random.default_rng(11)
    drafted = accepted = 0
    for _ in range(40_000):
        drafted += gamma
        for _ in range(gamma):
            if rng.random() >= alpha:
                break
            accepted += 1
    rate = accepted / drafted
    assert rate < alpha or gamma == 1, "accepted/drafted understates α"
    assert alpha_from_rate(rate, gamma) == pytest.approx(alpha, abs=0.01)


def test_rate_and_inverse_agree_and_hit_the_ends() -> None:
    assert alpha_from_rate(acceptance_rate(0.73, 4), 4) == pytest.approx(0.73)
    assert alpha_from_rate(0.0, 3) == 0.0
    assert alpha_from_rate(1.0, 3) == 1.0
    with pytest.raises(ValueError, match="lies in"):
        alpha_from_rate(1.2, 3)


def test_predicted_speedup_is_the_paper_formula_when_verify_is_free() -> None:
    alpha, gamma, c = 0.8, 4, 0.05
    paper = (1 - alpha ** (gamma + 1)) / ((1 - alpha) * (gamma * c + 1))  # Leviathan et al., Theorem 3.8
    assert predicted_speedup(alpha, gamma, c, 1.0) == pytest.approx(paper)
    assert expected_tokens(1.0, gamma) == gamma + 1
    assert predicted_speedup(alpha, gamma, c, 2.0) < paper


def test_break_even_alpha() -> None:
    even = break_even_alpha(3, 0.1, 1.5)
    assert even is not None
    assert predicted_speedup(even, 3, 0.1, 1.5) == pytest.approx(1.0)
    assert break_even_alpha(3, 0.5, 3.0) is None  # even perfect drafts cannot pay for that
    assert break_even_alpha(1, 0.0, 1.0) == 0.0


def test_explanation_names_the_dominant_cause() -> None:
    slow_verify = explain(
        0.9, 3, Costs(c=0.02, r_v=4.5, target_step_s=0.01, method="t"), Interval(0.8, 0.7, 0.9, 0.95, 9)
    )
    assert slow_verify.cause.startswith("SD loses: verify cost r_v = 4.50")
    bad_drafts = explain(
        0.05, 3, Costs(c=0.05, r_v=1.1, target_step_s=0.01, method="t"), Interval(0.8, 0.7, 0.9, 0.95, 9)
    )
    assert bad_drafts.cause.startswith("SD loses: low acceptance")
    costs = Costs(c=0.05, r_v=1.1, target_step_s=0.01, method="t")
    expected = predicted_speedup(alpha_from_rate(0.9, 3), 3, 0.05, 1.1)
    win = explain(0.9, 3, costs, Interval(expected, expected * 0.95, expected * 1.05, 0.95, 9))
    assert win.cause.startswith("SD wins")
    assert win.agrees
    assert "break-even α" in win.describe()
    off = explain(0.9, 3, costs, Interval(1.5, 1.4, 1.6, 0.95, 9))
    assert not off.agrees
    assert "(the theory is +97% off the measurement)" in off.describe()


def test_the_cause_follows_from_the_numbers_it_quotes() -> None:
    dear_drafts = Costs(c=1.4, r_v=1.46, target_step_s=0.01, method="t")  # a prediction of a loss
    won = explain(0.95, 3, dear_drafts, Interval(1.3, 1.2, 1.4, 0.95, 9))
    assert won.predicted < 1.0
    assert won.cause.startswith("the model does not explain this: it predicts a loss")
    assert "SD wins" not in won.describe()


def test_the_measured_overhead_closes_the_gap_to_the_measurement() -> None:
    costs = Costs(c=0.0, r_v=1.4, target_step_s=0.010, method="lookup", draft_is_model=False)
    rate = 0.8
    plain_tps = 1 / 0.0125  # 25 % overhead per plain token beyond the timed step
    bare = predicted_speedup(alpha_from_rate(rate, 3), 3, 0.0, 1.4)
    with_overhead = explain(rate, 3, costs, Interval(1.0, 0.9, 1.1, 0.95, 9), plain_tps)
    assert with_overhead.overhead == pytest.approx(0.25)
    assert with_overhead.predicted > bare, "the per-call overhead is paid once per SD step, once per plain token"


def test_general_arms_compare_two_configurations(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from pytest_specdec import Arm

        @pytest.mark.speedup(min=1.4)
        def test_faster_machine(specdec):
            specdec.compare(
                category="prose",
                baseline=Arm("slow"),
                treatment=Arm("fast", options={"plain_tps": 80.0}),
            )
        """
    )
    result = pytester.runpytest(*SIM)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*prose (slow → fast)*1.[56]?x [[]*holds*"])


def test_gamma_sweep_reports_the_best_gamma(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        def test_sweep(specdec):
            results = specdec.sweep(num_draft=[1, 2, 4], category="code")
            assert [r.record.num_draft for r in results] == [1, 2, 4]
        """
    )
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "speedup=1.2")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*test_sweep γ sweep [[]code]: γ=1 decode *; best γ=? (1.*x); break-even α: γ=1 -, γ=2 -, γ=4 -"]
    )
