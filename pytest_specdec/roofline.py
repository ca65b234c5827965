"""Roofline plausibility and memory fit: arithmetic that checks a claim before any run.

Plain decoding reads every active weight once per token, so a machine with peak
bandwidth *B* cannot decode faster than ``B ÷ bytes read per token`` (weights, plus
the KV cache at the context length; for a mixture of experts only the active
experts). A measured or published tok/s above ~0.9 of that is **implausible**: a
wrong figure, a different quantisation or a cache hit.

Memory fit: target + draft + KV cache at the tested context must fit the usable
working set (on a Mac the GPU's wired limit or Metal's recommended maximum, not the
nameplate RAM). A comparison that cannot fit is reported as "does not fit" with the
numbers instead of being attempted.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
PLAUSIBLE_FRACTION = 0.9


@dataclass(frozen=True)
class ModelFootprint:
    """What one model reads per token and holds in memory."""

    name: str
    weight_bytes: float
    active_weight_bytes: float | None = None  # mixture of experts: weights read per token
    kv_bytes_per_token: float = 0.0

    def bytes_per_token(self, context: int = 0) -> float:
        """Bytes read to decode one token at ``context`` tokens of KV cache."""
        active = self.active_weight_bytes if self.active_weight_bytes is not None else self.weight_bytes
        return active + self.kv_bytes_per_token * context

    def resident_bytes(self, context: int = 0) -> float:
        """Weights plus the KV cache at ``context``."""
        return self.weight_bytes + self.kv_bytes_per_token * context


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_value: float = 2.0) -> float:
    """Keys and values of one token across all layers."""
    return 2.0 * layers * kv_heads * head_dim * bytes_per_value


def roofline_tps(bandwidth_gbs: float, bytes_per_token: float) -> float:
    """The bandwidth-bound ceiling on decode tok/s."""
    return bandwidth_gbs * GB / bytes_per_token


@dataclass(frozen=True)
class Plausibility:
    """A tok/s figure against its roofline."""

    tps: float
    ceiling: float
    label: str

    @property
    def fraction(self) -> float:
        """tok/s as a fraction of the roofline."""
        return self.tps / self.ceiling

    @property
    def plausible(self) -> bool:
        """At most :data:`PLAUSIBLE_FRACTION` of the roofline."""
        return self.fraction <= PLAUSIBLE_FRACTION

    def describe(self) -> str:
        """``deepseek-r1:14b 62 tok/s = 1.40 of the 44.4 tok/s roofline — implausible``."""
        state = "plausible" if self.plausible else f"IMPLAUSIBLE (above {PLAUSIBLE_FRACTION:g} of the roofline)"
        return f"{self.label}: {self.tps:.1f} tok/s = {self.fraction:.2f} of the {self.ceiling:.1f} tok/s roofline — {state}"


def check_plausibility(
    label: str, tps: float, model: ModelFootprint, bandwidth_gbs: float, context: int = 0
) -> Plausibility:
    """Compare a decode rate with the roofline of ``model`` on a ``bandwidth_gbs`` machine."""
    return Plausibility(tps, roofline_tps(bandwidth_gbs, model.bytes_per_token(context)), label)


@dataclass(frozen=True)
class MemoryFit:
    """Target + draft + KV cache against the usable working set."""

    needed_bytes: float
    usable_bytes: float
    parts: tuple[tuple[str, float], ...]

    @property
    def fits(self) -> bool:
        """Whether it all fits."""
        return self.needed_bytes <= self.usable_bytes

    def describe(self) -> str:
        """``does not fit: 60.0 GB target + 14.0 GB draft = 74.0 GB > 48.0 GB usable``."""
        parts = " + ".join(f"{size / GB:.1f} GB {name}" for name, size in self.parts)
        sign = "≤" if self.fits else ">"
        state = "fits" if self.fits else "does not fit"
        return f"{state}: {parts} = {self.needed_bytes / GB:.1f} GB {sign} {self.usable_bytes / GB:.1f} GB usable"


def memory_fit(target: ModelFootprint, draft: ModelFootprint | None, context: int, usable_bytes: float) -> MemoryFit:
    """Does the pair, with its KV caches at ``context``, fit ``usable_bytes``?"""
    parts = [(f"target {target.name}", target.weight_bytes)]
    if target.kv_bytes_per_token:
        parts.append((f"KV cache at {context} tokens", target.kv_bytes_per_token * context))
    if draft is not None:
        parts.append((f"draft {draft.name}", draft.resident_bytes(context)))
    return MemoryFit(sum(size for _, size in parts), usable_bytes, tuple(parts))
