"""Deterministic synthetic model pairs: the embedded default, built offline.

With no model configured the plugin measures a *synthetic* target and two drafts,
written once into a cache directory in the Hugging Face layout that mlx-lm loads
(``config.json``, ``model.safetensors``, ``tokenizer.json``):

``embedded:target``
    A Llama-architecture model whose first layers carry almost all of the signal;
    the later layers add only a small perturbation to the residual stream.
``embedded:draft-aligned``
    The target's own embedding, first layer(s), final norm and head: it agrees with
    the target on most greedy tokens and costs a fraction of a target step. This pair
    is built to give speculative decoding its best chance.
``embedded:draft-unrelated``
    The same shape as the aligned draft but from another seed: it rarely agrees with
    the target, so SD should lose with it.

All three share one byte-level BPE tokenizer trained on the built-in prompt suite
(so prompts are short in tokens), and the end-of-sequence token is made unreachable
so every generation runs to its budget. The default pair's output head is scaled so that
sampling at T = 0.7 draws from a distribution as concentrated as a real small model's
(Gemma 3 270M on the same prompts), not a near-uniform one.

Sizes and dtype were chosen from measurements with mlx on the CPU (see README,
"Embedded default"): in float32 a forward over k tokens costs about k times one
token, so SD cannot win; in float16 a 4-token verify costs ~1.4x one step.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

EMBEDDED_PREFIX = "embedded:"
TOKENIZER_VOCAB_LIMIT = 1024  # BPE merges stop earlier once the suite is exhausted
EOS_TOKEN_ID = 0  # the trainer's first special token
SYNTHETIC_FORMAT_VERSION = 2


@dataclass(frozen=True)
class SyntheticSpec:
    """The recipe for one synthetic model; its hash names the cache directory."""

    name: str
    seed: int
    hidden_size: int
    num_layers: int
    intermediate_size: int
    num_heads: int
    dtype: str
    # Scale of the output projections of layers past ``strong_layers``: small values
    # keep the target close to its own truncation (the aligned draft).
    weak_layer_scale: float
    strong_layers: int
    # The output head's scale, a power of two so every logit scales exactly: at 4, llama.cpp's greedy tokens
    # were those of the head at 1 on 12 of 12 suite prompts (32 tokens); mlx-lm, which takes log-probabilities
    # in float16, parted on 2 of 12, each at a tie of one or two float16 steps. At 1 (a 1/sqrt(hidden) head)
    # the next-token distribution is near uniform at T = 0.7; at 4 its entropy on the code prompts is a real
    # model's (docs/measurements.md, "The distribution check for sampled SD").
    head_scale: float = 1.0

    def digest(self) -> str:
        """A short content digest of the recipe (and the file format version)."""
        recipe = asdict(self)
        if recipe["head_scale"] == 1.0:  # the recipes written before the field existed keep their digests
            del recipe["head_scale"]
        payload = json.dumps({"v": SYNTHETIC_FORMAT_VERSION, **recipe}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


_TARGET = SyntheticSpec(
    name="target",
    seed=20261130,
    hidden_size=256,
    num_layers=8,
    intermediate_size=768,
    num_heads=4,
    dtype="float16",
    weak_layer_scale=0.02,
    strong_layers=1,
    head_scale=4.0,
)

EMBEDDED_MODELS: dict[str, SyntheticSpec] = {
    "target": _TARGET,
    # The aligned draft is the target truncated to its strong layers.
    "draft-aligned": replace(_TARGET, name="draft-aligned", num_layers=_TARGET.strong_layers),
    # Same shape as the aligned draft, but another seed: it rarely agrees with the target.
    "draft-unrelated": replace(
        _TARGET, name="draft-unrelated", seed=_TARGET.seed + 7919, num_layers=_TARGET.strong_layers
    ),
}

# A ~1.2-billion-parameter pair for GPUs, where a 10M model would only measure launch overhead.
_TARGET_1B = replace(
    _TARGET,
    name="target-1b",
    hidden_size=2048,
    num_layers=24,
    intermediate_size=5632,
    num_heads=16,
    weak_layer_scale=0.01,
    head_scale=1.0,  # as measured on the H200 (baselines/NVIDIA-H200): greedy only
)
EMBEDDED_MODELS["target-1b"] = _TARGET_1B
EMBEDDED_MODELS["draft-1b-aligned"] = replace(_TARGET_1B, name="draft-1b-aligned", num_layers=_TARGET_1B.strong_layers)

DEFAULT_TARGET = EMBEDDED_PREFIX + "target"
DEFAULT_DRAFT = EMBEDDED_PREFIX + "draft-aligned"


class UnknownEmbeddedModel(ValueError):
    """Raised for an ``embedded:NAME`` that does not exist."""


def is_embedded(model: str) -> bool:
    """Whether a model reference names one of the synthetic models."""
    return model.startswith(EMBEDDED_PREFIX)


def embedded_spec(model: str) -> SyntheticSpec:
    """The recipe behind ``embedded:NAME``."""
    name = model.removeprefix(EMBEDDED_PREFIX)
    try:
        return EMBEDDED_MODELS[name]
    except KeyError:
        known = ", ".join(EMBEDDED_PREFIX + n for n in EMBEDDED_MODELS)
        raise UnknownEmbeddedModel(f"unknown embedded model {model!r} (known: {known})") from None


def cache_root() -> Path:
    """Where synthetic models are kept: ``$SPECDEC_CACHE_DIR`` or the user cache."""
    explicit = os.environ.get("SPECDEC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-specdec"


def layer_weights(spec: SyntheticSpec, vocab_size: int) -> dict[str, npt.NDArray[np.floating]]:
    """The tensors of one synthetic model, by mlx-lm / Hugging Face Llama name.

    Layer ``i`` draws from a generator seeded by ``(seed, i)``, so a truncated model
    with the same seed reproduces the target's first layers exactly.
    """
    import numpy as np

    dtype = np.dtype(spec.dtype)
    h, f = spec.hidden_size, spec.intermediate_size

    def normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> npt.NDArray[np.floating]:
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(dtype)

    shared = np.random.default_rng([spec.seed, 1_000_000])
    embed = normal(shared, (vocab_size, h), 1.0)
    head = normal(shared, (vocab_size, h), spec.head_scale / np.sqrt(h))
    # Make <eos> unreachable so every run decodes its full token budget.
    head[EOS_TOKEN_ID, :] = 0
    tensors: dict[str, npt.NDArray[np.floating]] = {
        "model.embed_tokens.weight": embed,
        "model.norm.weight": np.ones(h, dtype=dtype),
        "lm_head.weight": head,
    }
    for i in range(spec.num_layers):
        rng = np.random.default_rng([spec.seed, i])
        out_scale = 1.0 if i < spec.strong_layers else spec.weak_layer_scale
        prefix = f"model.layers.{i}."
        tensors.update(
            {
                prefix + "self_attn.q_proj.weight": normal(rng, (h, h), 1.0 / np.sqrt(h)),
                prefix + "self_attn.k_proj.weight": normal(rng, (h, h), 1.0 / np.sqrt(h)),
                prefix + "self_attn.v_proj.weight": normal(rng, (h, h), 1.0 / np.sqrt(h)),
                prefix + "self_attn.o_proj.weight": normal(rng, (h, h), out_scale / np.sqrt(h)),
                prefix + "mlp.gate_proj.weight": normal(rng, (f, h), 1.0 / np.sqrt(h)),
                prefix + "mlp.up_proj.weight": normal(rng, (f, h), 1.0 / np.sqrt(h)),
                prefix + "mlp.down_proj.weight": normal(rng, (h, f), out_scale / np.sqrt(f)),
                prefix + "input_layernorm.weight": np.ones(h, dtype=dtype),
                prefix + "post_attention_layernorm.weight": np.ones(h, dtype=dtype),
            }
        )
    return tensors


def hf_config(spec: SyntheticSpec, vocab_size: int) -> dict[str, object]:
    """The ``config.json`` of a synthetic model (Llama architecture)."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": spec.hidden_size,
        "num_hidden_layers": spec.num_layers,
        "intermediate_size": spec.intermediate_size,
        "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_heads,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": vocab_size,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": spec.dtype,
        "bos_token_id": None,
        "eos_token_id": EOS_TOKEN_ID,
        "specdec_synthetic": {"name": spec.name, "digest": spec.digest()},
    }


def build_tokenizer() -> Tokenizer:
    """A byte-level BPE tokenizer trained on the prompt suite's first four classes (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from pytest_specdec.embedded.prompts import FIRST_CATEGORIES, SUITE

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TOKENIZER_VOCAB_LIMIT,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=["<eos>"],
        show_progress=False,
    )
    tokenizer.train_from_iterator([p.text for p in SUITE if p.category in FIRST_CATEGORIES], trainer=trainer)
    return tokenizer


def _write_tokenizer(tokenizer: Tokenizer, directory: Path) -> None:
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<eos>", "model_max_length": 4096}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def materialize(model: str, root: Path | None = None) -> Path:
    """Build ``embedded:NAME`` into the cache (once) and return its directory.

    Writes into a temporary sibling and renames it into place, so a crash or a
    concurrent build never leaves a half-written model behind.
    """
    from safetensors.numpy import save_file

    spec = embedded_spec(model)
    root = root or cache_root()
    tokenizer = build_tokenizer()
    tokenizer_digest = hashlib.sha256(tokenizer.to_str().encode()).hexdigest()[:8]
    target = root / f"{spec.name}-{spec.digest()}-{tokenizer_digest}"
    if (target / "model.safetensors").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{spec.name}-", dir=root))
    try:
        vocab_size = tokenizer.get_vocab_size()
        save_file(layer_weights(spec, vocab_size), str(staging / "model.safetensors"), metadata={"format": "mlx"})
        config = hf_config(spec, vocab_size)
        (staging / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        _write_tokenizer(tokenizer, staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
