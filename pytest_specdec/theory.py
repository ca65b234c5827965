"""Why a verdict came out as it did: α, c and r_v, and the speedup they predict.

Leviathan, Kalman & Matias (2023) model speculative decoding with

* **α** — the expected probability that one draft token is accepted (i.i.d. per
  token). What backends report, accepted ÷ drafted, is *not* α: with γ drafts per
  step, E[accepted] = α(1 − α^γ)/(1 − α), so accepted/drafted =
  α(1 − α^γ)/(γ(1 − α)) < α. :func:`alpha_from_rate` inverts that.
* **c** — the time of one draft step ÷ one target step.

Their Theorem 3.8 assumes verifying γ+1 tokens costs the same as decoding one. Local
hardware breaks that, so we also measure

* **r_v** — target time for γ+1 tokens ÷ target time for 1 token,

and predict ``speedup ≈ E[tokens] / (γ·c + r_v)`` with
``E[tokens] = (1 − α^(γ+1)) / (1 − α)`` (our generalisation; r_v = 1 recovers the
paper). The break-even α is where that prediction equals 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pytest_specdec.stats import Interval


def expected_tokens(alpha: float, gamma: int) -> float:
    """E[#tokens per step] = (1 − α^(γ+1)) / (1 − α), the target's own token included."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def acceptance_rate(alpha: float, gamma: int) -> float:
    """accepted ÷ drafted under i.i.d. α: α(1 − α^γ) / (γ(1 − α))."""
    if alpha >= 1.0:
        return 1.0
    return alpha * (1.0 - alpha**gamma) / (gamma * (1.0 - alpha))


def alpha_from_rate(rate: float, gamma: int) -> float:
    """The α whose accepted/drafted ratio at ``gamma`` is ``rate`` (inverse of :func:`acceptance_rate`)."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"an acceptance rate lies in [0, 1], got {rate}")
    if rate in (0.0, 1.0) or gamma == 1:
        return rate
    from scipy.optimize import brentq

    return float(brentq(lambda a: acceptance_rate(a, gamma) - rate, 0.0, 1.0 - 1e-12))


def predicted_speedup(alpha: float, gamma: int, c: float, r_v: float) -> float:
    """E[tokens] / (γ·c + r_v)."""
    return expected_tokens(alpha, gamma) / (gamma * c + r_v)


def break_even_alpha(gamma: int, c: float, r_v: float) -> float | None:
    """The α at which the predicted speedup is 1; ``None`` when even α = 1 loses."""
    cost = gamma * c + r_v
    if expected_tokens(1.0, gamma) < cost:
        return None
    if expected_tokens(0.0, gamma) >= cost:
        return 0.0
    from scipy.optimize import brentq

    return float(brentq(lambda a: expected_tokens(a, gamma) - cost, 0.0, 1.0))


@dataclass(frozen=True)
class Costs:
    """Measured step costs of one backend and pair at one γ."""

    c: float  # draft step ÷ target step (0 for n-gram lookup)
    r_v: float  # target(γ+1 tokens) ÷ target(1 token)
    target_step_s: float
    method: str  # how they were measured, for the report


@dataclass(frozen=True)
class Explanation:
    """α, c, r_v, the predicted speedup, and the dominant cause of the verdict."""

    alpha: float
    gamma: int
    c: float
    r_v: float
    predicted: float
    break_even_alpha: float | None
    agrees: bool  # the prediction lies inside the measured interval
    cause: str

    def describe(self) -> str:
        """``α=0.62 c=0.13 r_v=1.90 γ=3: predicted 0.85x … — SD loses: verify cost …``."""
        even = "none (SD cannot win)" if self.break_even_alpha is None else f"{self.break_even_alpha:.2f}"
        agreement = "" if self.agrees else " (outside the measured interval: the model misses something)"
        return (
            f"α={self.alpha:.2f} c={self.c:.2f} r_v={self.r_v:.2f} γ={self.gamma}: predicted {self.predicted:.2f}x"
            f"{agreement}; break-even α {even} — {self.cause}"
        )


def dominant_cause(alpha: float, gamma: int, c: float, r_v: float, measured: float) -> str:
    """Which factor decides the outcome, in one phrase."""
    gain = expected_tokens(alpha, gamma)
    if measured >= 1.0:
        return f"SD wins: {gain:.2f} tokens per step for a cost of {gamma * c + r_v:.2f} target steps"
    costs = {
        f"verify cost r_v = {r_v:.2f} (theory assumes 1)": r_v - 1.0,
        f"draft cost γ·c = {gamma * c:.2f}": gamma * c,
        f"low acceptance α = {alpha:.2f} ({gain:.2f} tokens per step)": (gamma + 1 - gain) / (gamma + 1) * r_v,
    }
    return "SD loses: " + max(costs, key=lambda k: costs[k])


def explain(rate: float, gamma: int, costs: Costs, measured: Interval) -> Explanation:
    """Everything :class:`Explanation` holds, from accepted/drafted, costs and the measured speedup."""
    alpha = alpha_from_rate(min(1.0, max(0.0, rate)), gamma)
    predicted = predicted_speedup(alpha, gamma, costs.c, costs.r_v)
    return Explanation(
        alpha=alpha,
        gamma=gamma,
        c=costs.c,
        r_v=costs.r_v,
        predicted=predicted,
        break_even_alpha=break_even_alpha(gamma, costs.c, costs.r_v),
        agrees=measured.low <= predicted <= measured.high or math.isclose(predicted, measured.estimate, rel_tol=0.05),
        cause=dominant_cause(alpha, gamma, costs.c, costs.r_v, measured.estimate),
    )
