"""The embedded synthetic pairs as GGUF files, for llama.cpp, written with ``gguf``.

The tensors are exactly those of :func:`pytest_specdec.embedded.models.layer_weights` (the
mlx models), renamed to llama.cpp's Llama layout; the query and key projections are
permuted the way llama.cpp's own converter permutes them, so the GGUF model computes
the same function as the mlx one. Target and drafts carry the same byte-level BPE
vocabulary, merges and pre-tokenizer (``gpt-2``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_specdec.embedded import models
from pytest_specdec.embedded.gguf_reader import open_gguf

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

GGUF_FORMAT_VERSION = 1
_LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
_GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def gguf_name(hf_name: str) -> str:
    """llama.cpp's tensor name for a Hugging Face Llama tensor name."""
    if hf_name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[hf_name]
    _, _, rest = hf_name.partition("model.layers.")
    layer, _, suffix = rest.partition(".")
    return f"blk.{layer}.{_LAYER_NAMES[suffix]}"


def rope_permute(weight: npt.NDArray[np.floating], heads: int) -> npt.NDArray[np.floating]:
    """Reorder a q/k projection from the Hugging Face rotary layout to llama.cpp's."""
    rows = weight.shape[0]
    return weight.reshape(heads, 2, rows // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _vocabulary() -> tuple[list[str], list[str], list[int]]:
    tokenizer = models.build_tokenizer()
    state = json.loads(tokenizer.to_str())
    vocab: dict[str, int] = state["model"]["vocab"]
    tokens = [token for token, _ in sorted(vocab.items(), key=lambda item: item[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["model"]["merges"]]
    control = {added["content"] for added in state.get("added_tokens", []) if added.get("special")}
    types = [3 if token in control else 1 for token in tokens]  # 3: control, 1: normal
    return tokens, merges, types


def _write(spec: models.SyntheticSpec, path: Path) -> None:
    import gguf
    import numpy as np

    tokens, merges, types = _vocabulary()
    writer = gguf.GGUFWriter(str(path), "llama")
    h = spec.hidden_size
    writer.add_name(f"specdec synthetic {spec.name}")
    writer.add_context_length(4096)
    writer.add_embedding_length(h)
    writer.add_block_count(spec.num_layers)
    writer.add_feed_forward_length(spec.intermediate_size)
    writer.add_head_count(spec.num_heads)
    writer.add_head_count_kv(spec.num_heads)
    writer.add_rope_dimension_count(h // spec.num_heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_eos_token_id(models.EOS_TOKEN_ID)
    writer.add_add_bos_token(False)
    writer.add_string("specdec.synthetic.digest", spec.digest())
    for name, weights in models.layer_weights(spec, len(tokens)).items():
        rotary = name.endswith(("q_proj.weight", "k_proj.weight"))
        tensor = rope_permute(weights, spec.num_heads) if rotary else weights
        data = tensor.astype(np.float32) if tensor.ndim == 1 else tensor.astype(np.float16)
        writer.add_tensor(gguf_name(name), data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def materialize_gguf(model: str, root: Path | None = None) -> Path:
    """Build ``embedded:NAME`` as a GGUF file in the cache (once) and return its path."""
    spec = models.embedded_spec(model)
    root = root or models.cache_root()
    tokenizer_digest = hashlib.sha256(models.build_tokenizer().to_str().encode()).hexdigest()[:8]
    path = root / f"{spec.name}-{spec.digest()}-{tokenizer_digest}-g{GGUF_FORMAT_VERSION}.gguf"
    if path.is_file():
        return path
    root.mkdir(parents=True, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=f".{spec.name}-", suffix=".gguf", dir=root)
    os.close(handle)
    try:
        _write(spec, Path(staging))
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return path


def early_exit_gguf(source: Path, layers: int, directory: Path | None = None) -> Path:
    """A self-speculative draft of a GGUF model: its first ``layers`` blocks, its own final
    norm and output head, the same vocabulary (written once, next to the model cache).

    The tensors are copied as stored (quantised or not); only ``<arch>.block_count``
    changes. A draft that shares every weight it has with its target agrees with it on
    easy tokens and costs ``layers / block_count`` of a target step.
    """
    import gguf

    reader = open_gguf(source)
    arch_field = reader.get_field(gguf.Keys.General.ARCHITECTURE)
    if arch_field is None:
        raise ValueError(f"{source} has no general.architecture")
    arch = str(arch_field.contents())
    count_key = f"{arch}.block_count"
    count_field = reader.get_field(count_key)
    total = int(count_field.contents()) if count_field is not None else 0
    if not 1 <= layers < total:
        raise ValueError(f"{source} has {total} blocks; an early-exit draft keeps 1 to {total - 1}, not {layers}")
    folder = directory or models.cache_root() / "gguf"
    destination = folder / f"{source.stem}-first{layers}of{total}-{source.stat().st_size}.gguf"
    if destination.is_file():
        return destination
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
    os.close(handle)
    writer = gguf.GGUFWriter(temporary, arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub_type = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = layers if field.name == count_key else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub_type)
    kept = [t for t in reader.tensors if not _block_index(t.name) >= layers]
    for tensor in kept:
        writer.add_tensor_info(
            tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes, tensor.tensor_type
        )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in kept:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()
    os.replace(temporary, destination)
    return destination


def _block_index(name: str) -> int:
    """``blk.12.attn_q.weight`` → 12; -1 for tensors outside the blocks."""
    parts = name.split(".")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "blk" and parts[1].isdigit() else -1
