"""What llama-server's restart mode costs in validity (README: "llama-server"), on the simulated drift harness.

Run: ``python -m studies.restart_mode [--runs 400]``. Not collected by pytest.

When two copies of a model do not fit in memory, the llama-server backend runs one
server and restarts it at every arm switch; the first generation after a restart is
a discarded warm-up. Here a simulated server pays a cold-start penalty on the first
generation after each switch (``--cold 0.3``: 30 % slower), under the realistic drift
and noise of ``studies/error_rates.py``, and the default design judges A/A against
``max=1.0`` in three modes: both arms served at once (no switches), restart mode as
built (warm-up discarded), and restart mode without the warm-up. Reported: the wrong
decisive verdicts, the coverage of 1.0, the bias of the estimate, and the
generations spent (Wilson 95 % intervals).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Mapping

from scipy.stats import binomtest

from pytest_specdec.backends.base import Arm, GenerationRequest, GenerationStats, GenerationStream, ModelPair
from pytest_specdec.backends.simulated.adapter import SimulatedBackend
from pytest_specdec.claims import Expectations, SpeedupBounds, judge, stop_rule
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.measure import ComparisonPlan, run_comparison
from pytest_specdec.stats import Verdict

REALISTIC = {"noise": "0.1", "drift": "0.0011", "wander": "0.01", "outliers": "0.02"}


class Restarting(SimulatedBackend):
    """One simulated server restarted per arm switch; the first generation after it runs cold."""

    def __init__(self, pair: ModelPair, options: Mapping[str, str], *, cold: float, warm_up: bool) -> None:
        super().__init__(pair, options)
        self.cold, self.warm_up = cold, warm_up
        self.serving: str | None = None
        self.generations_run = 0

    def _once(self, request: GenerationRequest, penalty: float) -> GenerationStream:
        stats = yield from super().generate(request)
        self.generations_run += 1
        assert stats.server_decode_seconds is not None
        return GenerationStats(
            prompt_tokens=stats.prompt_tokens,
            drafted=stats.drafted,
            accepted=stats.accepted,
            server_decode_seconds=stats.server_decode_seconds * (1.0 + penalty),
            server_decode_tokens=stats.server_decode_tokens,
        )

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Restart on an arm switch; discard a warm-up generation when asked to."""
        switched = self.serving is not None and self.serving != request.arm.label
        self.serving = request.arm.label
        if switched and self.warm_up:
            for _ in self._once(request, self.cold):  # the discarded warm-up takes the cold start
                pass
            switched = False
        return (yield from self._once(request, self.cold if switched else 0.0))


def one_run(seed: int, mode: str, cold: float) -> tuple[Verdict, bool, float, int]:
    options = {**REALISTIC, "seed": str(seed), "speedup": "1.0"}
    if mode == "both at once":
        backend: SimulatedBackend = Restarting(ModelPair("t"), options, cold=0.0, warm_up=False)
    else:
        backend = Restarting(ModelPair("t"), options, cold=cold, warm_up=mode == "restart, warm-up discarded")
    expect = Expectations(speedup=SpeedupBounds(max=1.0))
    plan = ComparisonPlan(
        "code", prompts_for("code"), Arm("plain"), Arm("plain-b"), 16, 16, 72, 0.98,
        stop_when=stop_rule(expect), bounds=(1.0,), order=str(seed),
    )  # fmt: skip
    comparison = run_comparison(backend, plan)
    (bound,) = judge(expect, comparison.speedup, None)
    s = comparison.speedup
    assert isinstance(backend, Restarting)
    return bound.verdict, s.low <= 1.0 <= s.high, math.log(s.estimate), backend.generations_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--cold", type=float, default=0.3)
    args = parser.parse_args()
    print(f"{args.runs} A/A runs per mode, cold start +{args.cold:.0%}, realistic conditions {REALISTIC}")
    print("| mode | wrong decisive verdicts | coverage of 1.0 | bias (mean log estimate) | generations per run |")
    print("|---|---|---|---|---|")
    for mode in ("both at once", "restart, warm-up discarded", "restart, no warm-up"):
        results = [one_run(seed, mode, args.cold) for seed in range(args.runs)]
        wrong = sum(r[0] is Verdict.REFUTED for r in results)
        covered = sum(r[1] for r in results)

        def shown(hits: int, n: int = args.runs) -> str:
            low, high = binomtest(hits, n).proportion_ci(method="wilson")
            return f"{hits / n:.1%} [{low:.1%}, {high:.1%}]"

        bias = statistics.fmean(r[2] for r in results)
        spent = statistics.fmean(r[3] for r in results)
        print(f"| {mode} | {shown(wrong)} | {shown(covered)} | {bias:+.4f} | {spent:.0f} |", flush=True)


if __name__ == "__main__":
    main()
