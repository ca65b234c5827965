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

Frameworks add work outside the forward pass to every model call (sampling,
bookkeeping, Python): the measured **overhead** ``o`` is the plain arm's time per
token over the timed target step, minus one. Every call pays it once, so the
prediction becomes ``E[tokens]·(1 + o) / (γ·(c + o_d) + r_v + o)`` (``o_d = o`` when the
draft is a model, 0 for n-gram lookup, whose own time is already in c).
"""

from __future__ import annotations

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


def predicted_speedup(
    alpha: float, gamma: int, c: float, r_v: float, *, overhead: float = 0.0, draft_overhead: float = 0.0
) -> float:
    """E[tokens]·(1 + o) / (γ·(c + o_d) + r_v + o); with no overhead, E[tokens] / (γ·c + r_v)."""
    return expected_tokens(alpha, gamma) * (1.0 + overhead) / (gamma * (c + draft_overhead) + r_v + overhead)


def break_even_alpha(
    gamma: int, c: float, r_v: float, *, overhead: float = 0.0, draft_overhead: float = 0.0
) -> float | None:
    """The α at which the predicted speedup is 1; ``None`` when even α = 1 loses."""
    cost = (gamma * (c + draft_overhead) + r_v + overhead) / (1.0 + overhead)
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
    draft_is_model: bool = True  # a draft model pays the per-call overhead too; n-gram lookup does not


AGREEMENT = 0.10  # prediction and measurement "meet" within 10 %


@dataclass(frozen=True)
class Explanation:
    """α, c, r_v, the overhead, the predicted speedup, and the cause of the verdict."""

    alpha: float
    gamma: int
    c: float
    r_v: float
    overhead: float
    predicted: float
    break_even_alpha: float | None
    agrees: bool  # prediction and measurement meet within AGREEMENT (or the prediction is inside the interval)
    cause: str

    def describe(self) -> str:
        """``α=0.62 c=0.13 r_v=1.90 o=0.25 γ=3: predicted 0.85x (measured 0.83x) … — SD loses: …``."""
        even = "none (SD cannot win)" if self.break_even_alpha is None else f"{self.break_even_alpha:.2f}"
        return (
            f"α={self.alpha:.2f} c={self.c:.2f} r_v={self.r_v:.2f} o={self.overhead:.2f} γ={self.gamma}: "
            f"predicted {self.predicted:.2f}x; break-even α {even} — {self.cause}"
        )


def dominant_cause(
    alpha: float,
    gamma: int,
    c: float,
    r_v: float,
    *,
    overhead: float,
    draft_overhead: float,
    predicted: float,
    measured: Interval,
) -> str:
    """The cause the numbers support, in one sentence; says so when the model does not explain the measurement."""
    gain = expected_tokens(alpha, gamma)
    cost = (gamma * (c + draft_overhead) + r_v + overhead) / (1.0 + overhead)
    if (predicted >= 1.0) != (measured.estimate >= 1.0):
        side = "a win" if predicted >= 1.0 else "a loss"
        return (
            f"the model does not explain this: it predicts {side} ({gain:.2f} tokens per step for a cost of "
            f"{cost:.2f} plain steps) but measured {measured.estimate:.2f}x — a cost it misses (caching, batching, "
            "a drafter that is cheaper or dearer than timed)"
        )
    miss = predicted / measured.estimate - 1.0
    off = "" if abs(miss) <= AGREEMENT else f" (the theory is {miss:+.0%} off the measurement)"
    if measured.estimate >= 1.0:
        return f"SD wins: {gain:.2f} tokens per step for a cost of {cost:.2f} plain steps{off}"
    draft = gamma * (c + draft_overhead)
    costs = {
        f"verify cost r_v = {r_v:.2f} (theory assumes 1)": r_v - 1.0,
        f"draft cost γ·(c + o_d) = {draft:.2f} target steps": draft,
        f"the verify call's own overhead o = {overhead:.2f}": overhead,
        f"low acceptance α = {alpha:.2f} ({gain:.2f} tokens per step)": (gamma + 1 - gain) / (gamma + 1) * r_v,
    }
    return "SD loses: " + max(costs, key=lambda k: costs[k]) + off


def explain(rate: float, gamma: int, costs: Costs, measured: Interval, plain_tps: float | None = None) -> Explanation:
    """Everything :class:`Explanation` holds, from accepted/drafted, the costs, the plain rate and the speedup."""
    alpha = alpha_from_rate(min(1.0, max(0.0, rate)), gamma)
    overhead = 0.0
    if plain_tps and costs.target_step_s > 0:
        overhead = max(0.0, 1.0 / (plain_tps * costs.target_step_s) - 1.0)
    draft_overhead = overhead if costs.draft_is_model else 0.0
    predicted = predicted_speedup(alpha, gamma, costs.c, costs.r_v, overhead=overhead, draft_overhead=draft_overhead)
    agrees = measured.low <= predicted <= measured.high or abs(predicted / measured.estimate - 1.0) <= AGREEMENT
    return Explanation(
        alpha=alpha,
        gamma=gamma,
        c=costs.c,
        r_v=costs.r_v,
        overhead=overhead,
        predicted=predicted,
        break_even_alpha=break_even_alpha(gamma, costs.c, costs.r_v, overhead=overhead, draft_overhead=draft_overhead),
        agrees=agrees,
        cause=dominant_cause(
            alpha,
            gamma,
            costs.c,
            costs.r_v,
            overhead=overhead,
            draft_overhead=draft_overhead,
            predicted=predicted,
            measured=measured,
        ),
    )
