"""Error rates, power and coverage of the protocol under realistic noise (docs/measurements.md: "Statistics").

Run: ``python -m studies.error_rates [--runs 8000] [--jobs 2]``. Not collected by pytest.

Every run is the plugin's own :func:`~pytest_specdec.measure.run_comparison` with its
default design (blocks of the four ``code`` prompts, looks after whole blocks, the
Hwang–Shih–DeCani spending, the total-time ratio with its Newey–West error, futility,
``max_trials`` 72) on the simulated backend. Every run has Student-t(5) noise with a CV
drawn from 5–15 % for that run; each shape adds one kind of trouble, and ``all`` adds
every one of them:

* ``throttle``: the machine loses 10–20 % of its speed, exponentially, over the run;
* ``wander``: its speed wanders (a random walk, 1 % per generation);
* ``AR(1)``: each generation carries half of the last one's slowness (ρ = 0.5);
* ``step``: the machine drops 25 % at a random generation mid-run;
* ``SD hiccups``: one SD generation in fifty runs 2–3x slow (the plain arm never);
* ``SD stalls as measured``: 5.9 % of SD generations 2–3x slow, the share the stall screen
  left out of SD pairs on quiet real cores (a 16-core x86-64 CPU, llama-cpp, 4 threads;
  not part of ``all``, which keeps the hiccups' 2 %);
* ``skewed prompts``: each prompt has its own speedup, drawn from a right-skewed law.

**The truth** is what a user feels: plain decode time ÷ SD decode time for the same
prompts (one generation each), from the simulation's own parameters — never the
estimator's location. "At the bound" rows set it exactly on the stated bound, so every
decisive verdict there is wrong in one direction (nominal 1 % per direction). Coverage
counts the reported interval ("these prompts") against that truth, and the "prompts
like these" interval against the truth over the law the prompts were drawn from.
Every figure comes with a Wilson 95 % interval.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import statistics
from dataclasses import dataclass, field

from scipy.stats import binomtest

from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.config import Settings
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict

SHAPES: dict[str, dict[str, str]] = {
    "t(5) noise": {},
    "throttle": {"throttle": "uniform 0.10 0.20", "throttle_time": "uniform 20 80"},
    "wander": {"wander": "0.01"},
    "AR(1)": {"ar": "0.5"},
    "step": {"step": "-0.25", "step_at": "whole 16 128"},
    "SD hiccups": {"outliers": "0.02", "outlier_arm": "sd"},
    "skewed prompts": {"prompt_spread": "0.15", "prompt_shape": "skewed"},
}
STRONG_SKEW = {"prompt_spread": "0.3", "prompt_shape": "skewed"}
SHAPES["all"] = {key: value for shape in list(SHAPES.values()) for key, value in shape.items()}
# As often as on quiet real cores (issue #52: the screen left out 5.9 % of SD pairs, llama-cpp, 4 threads);
# apart from "all", whose rows keep the hiccups' 2 %.
SHAPES["SD stalls as measured"] = {"outliers": "0.059", "outlier_arm": "sd"}


@dataclass(frozen=True)
class Scenario:
    """A truth (relative to the stated bound, or absolute) under one noise shape."""

    shape: str
    bounds: SpeedupBounds
    wrong: Verdict  # the verdict that would be an error here
    truth: float | None = None  # None: exactly at the bound
    cv: str = "uniform 0.05 0.15"
    extra: dict[str, str] = field(default_factory=dict)
    category: str = "code"  # its 4 prompts; "all": 16
    reading: str = "these-prompts"  # which interval the verdict reads, and so which truth counts

    @property
    def name(self) -> str:
        bound = self.bounds.describe()
        where = "at the bound" if self.truth is None else f"{self.truth:g}x"
        cv = "" if self.cv.startswith("uniform") else f", CV {float(self.cv):.0%}"
        prompts = f", {len(prompts_for(self.category))} prompts" if self.category != "code" else ""
        skew = ", strong skew" if self.extra == STRONG_SKEW else ""
        reading = ", reading prompts like these" if self.reading != "these-prompts" else ""
        return f"{self.shape}: {where} vs {bound}{cv}{prompts}{skew}{reading}"


def _at_bound(shape: str) -> tuple[Scenario, ...]:
    return (
        Scenario(shape, SpeedupBounds(max=1.0), Verdict.REFUTED),
        Scenario(shape, SpeedupBounds(min=1.0), Verdict.REFUTED),
    )


SCENARIOS = (
    *(scenario for shape in SHAPES for scenario in _at_bound(shape)),
    Scenario("all", SpeedupBounds(min=1.2), Verdict.REFUTED, 1.3, cv="0.10"),
    Scenario("all", SpeedupBounds(min=1.2), Verdict.REFUTED, 1.3, cv="0.15"),
    Scenario("all", SpeedupBounds(max=1.0), Verdict.HOLDS, 1.3),
    Scenario("all", SpeedupBounds(min=1.0), Verdict.HOLDS, 0.9),
    Scenario("all", SpeedupBounds(min=1.0), Verdict.REFUTED, 1.1),
    Scenario("all", SpeedupBounds(max=1.0), Verdict.REFUTED, category="all"),
    Scenario("all", SpeedupBounds(min=1.2), Verdict.REFUTED, 1.3, cv="0.10", category="all"),
    Scenario("all", SpeedupBounds(min=1.2), Verdict.REFUTED, 1.3, cv="0.15", category="all"),
    *(
        Scenario("all", SpeedupBounds(min=1.0), Verdict.REFUTED, 1.3, extra=STRONG_SKEW, category=c, reading=r)
        for c in ("code", "all")
        for r in ("these-prompts", "prompts-like-these")
    ),
)


def _drawn(text: str, rng: random.Random) -> str:
    """A shape's value for one run: a constant, ``uniform LOW HIGH`` or ``whole LOW HIGH``."""
    kind, *limits = text.split()
    if kind == "uniform":
        return repr(rng.uniform(float(limits[0]), float(limits[1])))
    if kind == "whole":
        return str(rng.randint(int(limits[0]), int(limits[1])))
    return text


def one_run(scenario: Scenario, seed: int, settings: Settings) -> tuple[Verdict, int, bool, bool]:
    """One comparison: its verdict, pairs used, and whether each reading's interval covered its truth."""
    rng = random.Random(f"{scenario.name} {seed}")
    options = {key: _drawn(value, rng) for key, value in SHAPES[scenario.shape].items()}
    options |= {"noise": _drawn(scenario.cv, rng), "noise_df": "5", "seed": str(seed), **scenario.extra}
    options["prompt_seed"] = str(seed)
    prompts = prompts_for(scenario.category)
    probe = SimulatedBackend(ModelPair("t", "d"), options)
    inverse = statistics.fmean(1.0 / probe.prompt_effect(p.text) for p in prompts)
    bound = scenario.bounds.min if scenario.bounds.min is not None else scenario.bounds.max
    assert bound is not None
    truth = bound if scenario.truth is None else scenario.truth
    # The nominal speedup that makes the read truth (these prompts', or the law's) what the row says.
    nominal = truth * (inverse if scenario.reading == "these-prompts" else probe.mean_inverse_prompt_effect())
    backend = SimulatedBackend(ModelPair("t", "d"), {**options, "speedup": repr(nominal)})
    these, like = nominal / inverse, nominal / probe.mean_inverse_prompt_effect()
    expect = Expectations(speedup=scenario.bounds)
    plan = ComparisonPlan(
        "code",
        prompts,
        Arm("plain"),
        Arm("sd", speculative=True, num_draft=3),
        max_tokens=16,
        min_trials=settings.min_trials,
        max_trials=settings.max_trials,
        confidence=1.0 - (1.0 - settings.confidence) / expect.bound_count,
        stop_when=stop_rule(expect),
        bounds=(bound,),
        reading=scenario.reading,
        order=f"{scenario.name} {seed}",  # each run its own coin flips, repeatable
    )
    comparison = run_comparison(backend, plan)
    (judged,) = judge(expect, comparison.speedup, comparison.acceptance)
    readings = {scenario.reading: comparison.speedup}
    if comparison.other_reading is not None:
        readings["prompts-like-these" if scenario.reading == "these-prompts" else "these-prompts"] = (
            comparison.other_reading
        )
    covered = "these-prompts" in readings and readings["these-prompts"].low <= these <= readings["these-prompts"].high
    other = readings.get("prompts-like-these")
    covered_like = other is not None and other.low <= like <= other.high
    return judged.verdict, len(comparison.pairs), covered, covered_like


def _row(job: tuple[Scenario, int]) -> str:
    scenario, runs = job
    settings = Settings(backend="simulated")
    results = [one_run(scenario, seed, settings) for seed in range(runs)]
    n = len(results)

    def shown(hits: int) -> str:
        low, high = binomtest(hits, n).proportion_ci(method="wilson")
        return f"{hits / n:.2%} [{low:.2%}, {high:.2%}]"

    holds = sum(r[0] is Verdict.HOLDS for r in results)
    refuted = sum(r[0] is Verdict.REFUTED for r in results)
    wrong = sum(r[0] is scenario.wrong for r in results)
    pairs = [r[1] for r in results]
    return (
        f"| {scenario.name} | {shown(holds)} | {shown(refuted)} | {shown(wrong)} | "
        f"{statistics.fmean(pairs):.1f} / {statistics.median(pairs):.0f} | "
        f"{shown(sum(r[2] for r in results))} | {shown(sum(r[3] for r in results))} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=8000, help="runs per row (default 8000)")
    parser.add_argument("--jobs", type=int, default=2, help="rows measured at once (default 2)")
    parser.add_argument("--only", default="", help="only rows whose name contains this text")
    args = parser.parse_args()
    settings = Settings(backend="simulated")
    chosen = [s for s in SCENARIOS if args.only in s.name]
    print(f"{args.runs} runs per row; confidence {settings.confidence:.0%}; max_trials {settings.max_trials}")
    print(
        "| scenario | holds | refuted | wrong | mean / median pairs | coverage (these prompts) | coverage (prompts like these) |"
    )
    print("|---|---|---|---|---|---|---|")
    with multiprocessing.Pool(args.jobs) as pool:
        for line in pool.imap(_row, [(scenario, args.runs) for scenario in chosen]):
            print(line, flush=True)


if __name__ == "__main__":
    main()
