"""The seed document's claims as data: quotes, bounds, published figures, model sizes.

The document is "Speculative Decoding on Apple silicon: Why It Does Not Work" (M1 Max
64 GB); what public sources say about each claim is summarised in ``research``. Model
sizes come from the Ollama library and model cards (see the research note, §6).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.roofline import GB, ModelFootprint, kv_bytes_per_token

SEED_BANDWIDTH_GBS = 400.0
# Metal's recommendedMaxWorkingSetSize reported on an M1 Max 64 GB (ggml-org/llama.cpp#22673, research §3.1).
SEED_USABLE_BYTES = 53 * 2**30
SHORT_CONTEXT = 2048
LONG_CONTEXT = 131_072

QWEN3_CODER_30B = ModelFootprint(
    "qwen3-coder:30b (30B-A3B MoE, Q4_K_M)", 17.28 * 2**30, 17.28 * 2**30 * 3.3 / 30.5, kv_bytes_per_token(48, 4, 128)
)
GEMMA4_26B_NVFP4 = ModelFootprint("gemma4:26b-nvfp4 (26B-A4B MoE)", 17 * GB, 17 * GB * 3.8 / 25.2)
DEEPSEEK_R1_14B = ModelFootprint("deepseek-r1:14b (dense Q4_K_M)", 9.0 * GB, None, kv_bytes_per_token(48, 8, 128))
DENSE_7B_Q4 = ModelFootprint("a dense 7B at Q4_K_M", 4.68 * GB)
DENSE_30B_Q4 = ModelFootprint("a dense 30B at Q4_K_M", 18.0 * GB)
MTPLX_TARGET_BF16 = ModelFootprint("30B target at bf16", 60 * GB)
MTPLX_DRAFT_BF16 = ModelFootprint("7B draft at bf16", 14 * GB)


@dataclass(frozen=True)
class PublishedFigure:
    """A decode rate the document states, and the model and context it is for."""

    label: str
    tps: float
    model: ModelFootprint
    context: int = SHORT_CONTEXT


@dataclass(frozen=True)
class SeedClaim:
    """One claim: where, what, the bounds stated, and what research found."""

    id: str
    section: str
    quote: str
    bounds: str
    research: str
    figures: tuple[PublishedFigure, ...] = ()
    # What a backend must do for the claim to apply to it: the kind of SD it is about (empty: any), and the
    # runtime family it names (a BackendSpec's evidence_family; empty: any). Never a backend's name.
    kinds: frozenset[SpeculationKind] = frozenset()
    families: frozenset[str] = frozenset()

    @property
    def source(self) -> str:
        """``seed: <section>`` for the claim marker."""
        return f"seed: {self.section}"

    @property
    def applies_to(self) -> str:
        """Where it applies, in words: ``SD with a draft model`` or ``llama.cpp`` (``any backend``).

        >>> CLAIMS["d"].applies_to
        'SD with a draft model or an early exit'
        """
        kinds = " or ".join(f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}" for kind in sorted(self.kinds))
        said = [*sorted(self.families), *([f"SD with {kinds}"] if kinds else [])]
        return ", ".join(said) or "any backend"

    def applies(self, family: str | None, run_kind: SpeculationKind | None) -> bool:
        """Whether a backend of ``family`` whose SD arm drafts with ``run_kind`` this run is one the claim is about.

        >>> CLAIMS["d"].applies("my-engine", SpeculationKind.DRAFT_MODEL)
        True
        """
        if self.families and family not in self.families:
            return False
        return not self.kinds or run_kind in self.kinds


CLAIMS: dict[str, SeedClaim] = {
    claim.id: claim
    for claim in (
        SeedClaim(
            "a",
            "Ollama Auto-MTP",
            "Every approach tested on the M1 Max 64GB produces net-zero or negative speedup.",
            "speedup(max=1.0)",
            "real feature (MTP on the MLX engine since Ollama 0.31); plausible on M1/M2, hardware-dependent",
            families=frozenset({"ollama"}),
            figures=(
                PublishedFigure("qwen3-coder:30b without SD", 55.7, QWEN3_CODER_30B),
                PublishedFigure("gemma4:26b-nvfp4 without SD", 52.8, GEMMA4_26B_NVFP4),
                PublishedFigure("deepseek-r1:14b without SD (short context)", 62.0, DEEPSEEK_R1_14B),
                PublishedFigure("deepseek-r1:14b without SD (128K context)", 22.2, DEEPSEEK_R1_14B, LONG_CONTEXT),
            ),
        ),
        SeedClaim(
            "b",
            "MTPLX (Separate Draft Model)",
            "A 30B model at bfloat16 needs ~60 GB, and even a small 7B draft adds ~14 GB — exceeding the 64 GB limit.",
            "memory fit: does not fit",
            "arithmetic right, premise wrong: MTPLX drafts with the target's own MTP heads",
            families=frozenset({"mtplx"}),
        ),
        SeedClaim(
            "c",
            "llama.cpp Metal MTP",
            "The overhead of coordinating draft and target on the same GPU exceeds the benefit.",
            "speedup(max=1.0)",
            "mostly true for dense models on M1/M2/M4 Pro; +30 % reported for a MoE on an M1 Max",
            families=frozenset({"llama.cpp"}),
        ),
        SeedClaim(
            "d",
            "mlx-lm Draft Model",
            "The complexity is not worth the 0.9x–1.3x speedup (at best).",
            "speedup(max=1.3)",
            "holds on M1/M2; M3/M4 report 1.3–2.4x",
            # mlx-lm's draft_model: a second model, or the target's own first layers loaded as one
            kinds=frozenset({SpeculationKind.DRAFT_MODEL, SpeculationKind.EARLY_EXIT}),
        ),
        SeedClaim(
            "e",
            "Recommendation",
            "Use flash attention — gives 1.4–2.2x speedup with zero complexity",
            "speedup(min=1.4), flash attention off vs on",
            "unverified; short-context evidence says about 3–10 %",
        ),
        SeedClaim(
            "f",
            "Recommendation",
            "Use smaller models — a 7B model at 100+ tok/s beats a 30B model at 38 tok/s for most tasks",
            "roofline plausibility of both figures; measured 7B vs 30B where a profile has them",
            "implausible for a dense 7–8B Q4 on an M1 Max; 38 tok/s fits only a MoE 30B",
            (
                PublishedFigure("a 7B model at 100 tok/s", 100.0, DENSE_7B_Q4),
                PublishedFigure("a 30B model at 38 tok/s (if dense)", 38.0, DENSE_30B_Q4),
            ),
        ),
        SeedClaim(
            "g",
            "Bandwidth, Not Compute, is the Bottleneck",
            "Apple silicon bottleneck is memory bandwidth (200–400 GB/s depending on chip), not compute.",
            "plain decode at ≥ 0.5 of the bandwidth roofline; chip bandwidth within 200–400 GB/s",
            "too narrow: the lineup spans 68–819 GB/s; whether SD pays depends on verify compute",
        ),
        SeedClaim(
            "premise",
            "What is speculative decoding?",
            "In theory, this can give 2–3x speedups because verifying K tokens costs about the same as generating 1 token.",
            "r_v ≤ 1.2 (verify of γ+1 tokens within 20 % of one step)",
            "false on M1/M2 GPUs (2-token verify ≈ 1.7x one step); depends on GPU generation",
        ),
    )
}


def claims_run_by(family: str | None, kinds: Sequence[SpeculationKind]) -> list[str]:
    """The ids of the claims about a kind of SD or a runtime family that a backend of ``family`` declaring ``kinds``
    can run (the claims about any backend left out).

    >>> claims_run_by("mlx-lm", [SpeculationKind.DRAFT_MODEL])
    ['d']
    """
    return [
        claim.id
        for claim in CLAIMS.values()
        if (claim.kinds or claim.families)
        and (not claim.families or family in claim.families)
        and (not claim.kinds or claim.kinds & set(kinds))
    ]
