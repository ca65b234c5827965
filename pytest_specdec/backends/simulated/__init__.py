"""A simulated backend with a known true speedup and realistic noise: for tests and protocol studies."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec

_NUMBERS = (
    ("speedup", "the true speedup"),
    ("plain_tps", "the plain arm's tok/s"),
    ("noise", "coefficient of variation of each generation's time"),
    ("drift", "relative slowdown over the run"),
    ("wander", "random-walk step of the machine's speed"),
    ("prompt_spread", "spread of per-prompt speedup effects"),
    ("outliers", "share of generations that are 2-3x slow"),
    ("acceptance", "the drafts' acceptance rate"),
    ("tie_margin", "logit margin reported at a divergence (-1: none)"),
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
        OptionSpec("lossless", "bool", "SD reproduces plain output"),
        OptionSpec("engaged", "bool", "SD engages at all"),
        OptionSpec("release", "str", "the release the fingerprint reports"),
        OptionSpec("seed", "int", "random seed"),
    ),
    pairs={"embedded": ModelPair("simulated-target", "simulated-draft")},
)
