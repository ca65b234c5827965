"""A simulated backend with a known true speedup and realistic noise: for tests and protocol studies."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind

_NUMBERS = (
    ("speedup", "the true speedup"),
    ("plain_tps", "the plain arm's tok/s"),
    ("noise", "coefficient of variation of each generation's time"),
    ("ar", "lag-1 autocorrelation of the noise from generation to generation (AR(1))"),
    ("throttle", "share of speed lost by exponential throttling over the run (e.g. 0.15)"),
    ("throttle_time", "generations over which throttling sets in (its time constant)"),
    ("drift", "relative slowdown over the run"),
    ("wander", "random-walk step of the machine's speed"),
    ("prompt_spread", "spread of per-prompt speedup effects"),
    ("outliers", "share of generations that are 2-3x slow"),
    ("acceptance", "the drafts' acceptance rate"),
    ("tie_margin", "logit margin reported at a divergence (-1: none)"),
    ("step", "relative change of the machine's speed from step_at on (e.g. -0.25)"),
    ("sd_temperature", "a lossy sampled SD arm: the temperature it samples at instead of the request's (0: off)"),
    ("counter_scale", "what the SD arm's reported decode seconds cover, as a factor (a release's counters)"),
    ("prefill_tps", "prompt words read per second before the first token (time to first token)"),
    ("draft_prefill", "the SD arm's extra prefill (its draft's), as a share of the target's"),
    ("context_decay", "how the true speedup falls with the prompt: speedup × exp(-context_decay × words ÷ 1000)"),
)

SPEC = BackendSpec(
    name="simulated",
    target="pytest_specdec.backends.simulated.adapter:SimulatedBackend",
    summary="simulated timings with a known true speedup (tests and protocol studies)",
    distributions=("numpy",),
    options=(
        *(OptionSpec(key, "float", text) for key, text in _NUMBERS),
        OptionSpec("crash_after", "int", "raise after this many generations (0: never)"),
        OptionSpec("interrupt_after", "int", "cut the run short (KeyboardInterrupt) after this many generations"),
        OptionSpec("step_at", "int", "the generation from which the machine's speed changes by step (0: never)"),
        OptionSpec("noise_df", "int", "Student-t degrees of freedom of the noise (0: normal)"),
        OptionSpec("outlier_arm", "str", "which arm the slow generations hit: both or sd"),
        OptionSpec(
            "prompt_shape", "str", "per-prompt effects: normal (log-normal) or skewed (a few prompts gain much)"
        ),
        OptionSpec("lossless", "bool", "SD reproduces plain output"),
        OptionSpec("draws", "str", "sampled SD: same (one text per seed) or distribution (other draws, same law)"),
        OptionSpec("realtime", "bool", "sleep through the simulated decode time, so a client's clock sees it"),
        OptionSpec("engaged", "bool", "SD engages at all"),
        OptionSpec("not_run", "str", "why SD does not run, as an engine that says so (drafter not loaded, ...)"),
        OptionSpec("release", "str", "the release the fingerprint reports"),
        OptionSpec("seed", "int", "random seed"),
        OptionSpec("prompt_seed", "int", "seed of the per-prompt effects (default: seed)"),
    ),
    pairs={"embedded": ModelPair("simulated-target", "simulated-draft")},
    kinds=(SpeculationKind.DRAFT_MODEL,),
    in_process=True,
)
