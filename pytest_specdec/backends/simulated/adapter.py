"""A simulated backend with known truth, shipped for tests and protocol studies.

It behaves like a server that times itself: every generation reports decode
seconds drawn from a model with a known speedup, log-normal noise, a steady drift
(e.g. thermal throttling) and a random walk of the machine's speed (``wander``),
both of which depend on *when* the run happens. Because the truth
is known, it measures how often the protocol's verdicts are wrong (README: R1, R2)
and how much interleaving saves over a block protocol (P3). Nothing sleeps: the
timings are reported, not waited for.

Options (``--specdec-backend-option KEY=VALUE``): ``speedup``, ``plain_tps``,
``noise`` (its CV; ``noise_df`` makes it Student-t, ``ar`` carries it over from one
generation to the next as an AR(1)), ``drift``, ``throttle`` / ``throttle_time``
(exponential throttling), ``wander``, ``step`` / ``step_at``, ``prompt_spread`` (log-sd
of per-prompt speedups around ``speedup``; ``prompt_shape=skewed`` draws them from a
right-skewed law), ``outliers`` (the share of generations that run 2–3x slow;
``outlier_arm=sd``: only the SD arm's), ``acceptance``, ``lossless``, ``tie_margin``, ``engaged``, ``release``, ``seed``, and
``crash_after`` (a library that raises after that many generations, for fault tests);
``prefill_tps``, ``draft_prefill`` and ``context_decay`` make time to first token and the
speedup depend on the prompt's length (the context axis).
Sampled requests draw from a Markov chain (:mod:`~pytest_specdec.backends.simulated.sampler`);
``draws=same`` gives both arms one text per seed, ``distribution`` (the default) draws the
SD arm's from another seed, and ``sd_temperature`` makes a lossy SD arm that samples hotter.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from pytest_specdec.backends.base import (
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    NotRun,
    SpeculationEvidence,
    TokenBurst,
)
from pytest_specdec.backends.files import names_digest
from pytest_specdec.backends.simulated.sampler import sampled_tokens
from pytest_specdec.errors import SpecdecUsageError

_VOCAB = 1000


@functools.cache
def _prompt_tokens(prompt: str, count: int) -> tuple[int, ...]:
    """The prompt's deterministic continuation (the same for every arm and run)."""
    seed = int.from_bytes(hashlib.sha256(prompt.encode()).digest()[:8], "little")
    return tuple(int(t) for t in np.random.default_rng(seed).integers(0, _VOCAB, count))


class SimulatedBackend:
    """Speculative decoding with a chosen true speedup, noise and drift."""

    name: ClassVar[str] = "simulated"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        self.true_speedup = reader.number("speedup", 1.0, low=0.01, high=100.0)
        self.plain_tps = reader.number("plain_tps", 50.0, low=0.001)
        self.noise = reader.number("noise", 0.03, low=0.0, high=2.0)
        self.noise_df = reader.integer("noise_df", 0, low=0)
        if self.noise_df in (1, 2):
            raise SpecdecUsageError(
                "backend option noise_df must be 0 (normal) or above 2 (a finite variance) — fix --specdec-backend-option noise_df=..."
            )
        self.ar = reader.number("ar", 0.0, low=0.0, high=0.99)
        self.drift = reader.number("drift", 0.0, low=-0.5, high=0.5)
        self.throttle = reader.number("throttle", 0.0, low=0.0, high=0.9)
        self.throttle_time = reader.number("throttle_time", 50.0, low=1.0)
        self.wander = reader.number("wander", 0.0, low=0.0, high=1.0)
        self.prompt_spread = reader.number("prompt_spread", 0.0, low=0.0, high=1.0)
        self.prompt_shape = reader.choice("prompt_shape", "normal", ("normal", "skewed"))
        self.outliers = reader.number("outliers", 0.0, low=0.0, high=0.5)
        self.outlier_arm = reader.choice("outlier_arm", "both", ("both", "sd"))
        self.crash_after = reader.integer("crash_after", 0, low=0)
        self.interrupt_after = reader.integer("interrupt_after", 0, low=0)
        self.step_at = reader.integer("step_at", 0, low=0)
        self.step = reader.number("step", 0.0, low=-0.9, high=9.0)
        self.realtime = reader.flag("realtime", False)
        self.counter_scale = reader.number("counter_scale", 1.0, low=0.01, high=100.0)
        self.acceptance = reader.number("acceptance", 0.7, low=0.0, high=1.0)
        self.lossless = reader.flag("lossless", True)
        # Logit margin reported where a lossy SD arm diverges (unset: the backend cannot tell).
        self.tie_margin = reader.number("tie_margin", -1.0, low=-1.0)
        self.engaged = reader.flag("engaged", True)
        said = reader.choice("not_run", "", ("", *(why.value for why in NotRun)))
        self.not_run = NotRun(said) if said else None  # why its SD does not run, as an engine that says so would
        self.release = reader.text("release", "1.0")
        self.draws = reader.choice("draws", "distribution", ("same", "distribution"))
        self.sd_temperature = reader.number("sd_temperature", 0.0, low=0.0, high=5.0)
        self.prefill_tps = reader.number("prefill_tps", 2000.0, low=1.0)
        self.draft_prefill = reader.number("draft_prefill", 0.0, low=0.0, high=10.0)
        self.context_decay = reader.number("context_decay", 0.0, low=0.0, high=10.0)
        self._seed = reader.integer("seed", 0)
        self._rng = np.random.default_rng(self._seed)
        # Two releases that run the same prompts equally fast share their prompts' effects.
        self._prompt_seed = reader.integer("prompt_seed", self._seed)
        reader.reject_unknown()
        self._pair = pair
        self.generations = 0
        self._walk = 0.0  # log-rate random walk: the machine's state wanders
        self._effects: dict[str, float] = {}
        self._carried = 0.0  # the last generation's standardised noise, for AR(1)

    @property
    def pair(self) -> ModelPair:
        """The (fictional) model pair."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """Reports the simulated release so tests can inject a new one."""
        return Fingerprint(
            backend=self.name,
            release=f"simulated {self.release}",
            versions={"simulated": self.release},
            device="simulated",
        )

    def speculation_evidence(self) -> SpeculationEvidence:
        """What the simulated engine says of its arms: nothing, unless told why its SD does not run (``not_run``)."""
        if self.not_run is None:
            return SpeculationEvidence(None, False, "the simulated engine counts its drafts")
        return SpeculationEvidence(False, False, f"the simulated engine says: {self.not_run.value}", self.not_run)

    def model_digest(self) -> str:
        """A digest of the model names (there are no files)."""
        return names_digest(self._pair)

    def prompt_effect(self, prompt: str) -> float:
        """This prompt's own speedup factor: drawn once per prompt and seed, log-sd ``prompt_spread``.

        ``skewed``: the log-effect is a centred exponential (most prompts a little below
        the centre, a few far above it: the prompts drafting guesses well).
        """
        if not self.prompt_spread:
            return 1.0
        if prompt in self._effects:
            return self._effects[prompt]
        seed = int.from_bytes(hashlib.sha256(f"effect {self._prompt_seed} {prompt}".encode()).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        draw = float(rng.exponential()) - 1.0 if self.prompt_shape == "skewed" else float(rng.standard_normal())
        self._effects[prompt] = math.exp(self.prompt_spread * draw)
        return self._effects[prompt]

    def mean_inverse_prompt_effect(self) -> float:
        """``E[1 / effect]`` over the law the prompts' effects are drawn from (for a total-time truth)."""
        s = self.prompt_spread
        return math.exp(s) / (1.0 + s) if self.prompt_shape == "skewed" else math.exp(s * s / 2.0)

    def _noise(self) -> float:
        """This generation's standardised noise: normal or Student-t, carried over as an AR(1)."""
        if self.noise_df:
            fresh = float(self._rng.standard_t(self.noise_df)) / math.sqrt(self.noise_df / (self.noise_df - 2))
        else:
            fresh = float(self._rng.standard_normal())
        self._carried = self.ar * self._carried + math.sqrt(1.0 - self.ar**2) * fresh
        return self._carried

    def sampled_draws_per_seed(self) -> str:
        """As configured by ``draws``: ``same`` or ``distribution``."""
        return self.draws

    def _sampled(self, request: GenerationRequest) -> list[int]:
        sd = request.arm.speculative
        temperature = self.sd_temperature if sd and self.sd_temperature else request.sampling.temperature
        seed = request.seed + (1_000_000_007 if sd and self.draws == "distribution" else 0)
        return sampled_tokens(request.prompt, request.max_tokens, seed, temperature, request.sampling.top_p)

    def _tokens(self, prompt: str, count: int) -> list[int]:
        return list(_prompt_tokens(prompt, count))

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Yield the prompt's deterministic tokens and report simulated timings."""
        if self.crash_after and self.generations >= self.crash_after:
            raise RuntimeError("simulated library failure (crash_after)")
        if self.interrupt_after and self.generations >= self.interrupt_after:
            raise KeyboardInterrupt  # the run is cut short, as by Ctrl-C or the job's time-out
        count = request.max_tokens
        speculative = request.arm.speculative
        tokens = self._tokens(request.prompt, count) if request.sampling.greedy else self._sampled(request)
        if speculative and not self.lossless:
            tokens[count // 2] = (tokens[count // 2] + 1) % _VOCAB
        # Drift: the machine slows (or speeds up) with every generation, whatever the arm.
        self._walk += self.wander * float(self._rng.standard_normal())
        rate = self.plain_tps * math.exp(-self.drift * self.generations + self._walk)
        rate *= 1.0 - self.throttle * (1.0 - math.exp(-self.generations / self.throttle_time))
        if self.step_at and self.generations >= self.step_at:
            rate *= 1.0 + self.step  # the machine moved mid-run (a thermal limit, a background job)
        words = len(request.prompt.split())
        if speculative:  # verification at long context costs more: the speedup decays with the prompt's length
            rate *= (
                self.true_speedup * self.prompt_effect(request.prompt) * math.exp(-self.context_decay * words / 1000)
            )
        rate *= math.exp(self.noise * self._noise())
        hit = speculative or self.outlier_arm == "both"
        if self.outliers and self._rng.random() < self.outliers and hit:
            rate /= 2.0 + float(self._rng.random())  # a background job, a page fault storm
        self.generations += 1
        drafted = accepted = None
        if speculative:
            # As SD runs: rounds of γ drafts, each round's target pass giving its accepted drafts plus one token of
            # its own, so the accepted drafts never exceed the tokens the rounds left to the target.
            gamma = max(1, request.arm.num_draft)
            rounds = math.ceil(count / (1.0 + gamma * self.acceptance))
            drafted = rounds * gamma if self.engaged else 0
            drawn = int(self._rng.binomial(drafted, self.acceptance)) if drafted else 0
            accepted = min(drawn, max(0, count - rounds - 1))
        for token in tokens:
            if self.realtime:  # the client's clock sees the simulated decode time, token by token
                time.sleep(1.0 / rate)
            yield TokenBurst((token,))
        # counter_scale: what the server's decode duration covers changed (SD arm), not the speed
        reported = (count - 1) / rate * (self.counter_scale if speculative else 1.0)
        return GenerationStats(
            prompt_tokens=words,
            drafted=drafted,
            accepted=accepted,
            server_decode_seconds=reported,
            server_decode_tokens=count - 1,
            server_ttft_seconds=words / self.prefill_tps * (1.0 + (self.draft_prefill if speculative else 0.0)),
        )

    def count_tokens(self, text: str) -> int:
        """Its tokens are words."""
        return len(text.split())

    def template_tokens(self) -> int:
        """No template: the prompt's words are what it sees."""
        return 0

    def context_window(self) -> int:
        """As long as any test asks (``window`` is not an option: a simulated model has none)."""
        return 1 << 20

    def context_bytes(self, tokens: int) -> int:
        """A small KV cache: 64 KiB per position (a 7B-like model's order of magnitude is 128–512 KiB)."""
        return tokens * 64 * 1024

    def prepare_context(self, tokens: int) -> None:
        """Nothing to size: the cache grows with the prompt."""

    def logit_margin(self, prompt: str, prefix: Sequence[int], first: int, second: int) -> float | None:
        """The configured ``tie_margin`` (``None`` when unset)."""
        return None if self.tie_margin < 0 else self.tie_margin

    def close(self) -> None:
        """Nothing to release."""
