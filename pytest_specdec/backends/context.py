"""What a backend must answer for a comparison at long context (``compare(context=…)``).

A context comparison puts a prefix of a given number of tokens before every prompt. To
build it the backend counts tokens with its own tokenizer; to say whether the length can
run here it names its model's window and the memory the arms need to hold that context
beyond the target's weights (the draft's weights, KV caches of every instance, and any buffer
sized per position).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Protocol, runtime_checkable


@runtime_checkable
class KnowsContext(Protocol):
    """A backend that can count tokens and size its memory for a context length."""

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the target's tokenizer, as plain text (no chat template, no BOS)."""
        ...

    def template_tokens(self) -> int:
        """Tokens the backend adds around a prompt before the model sees it (its chat template, a BOS),
        counted by its own tokenizer on a one-word prompt."""
        ...

    def context_window(self) -> int:
        """The longest context the target was trained for (its GGUF ``context_length``, its config's window)."""
        ...

    def context_bytes(self, tokens: int) -> int:
        """Bytes both arms hold beyond one copy of the target's weights at ``tokens`` positions: the
        draft's weights, every instance's KV cache (the draft's included), compute buffers where they
        grow with the context, and any per-position buffer (llama-cpp-python's ``logits_all`` scores)."""
        ...

    def prepare_context(self, tokens: int) -> None:
        """Make room for ``tokens`` positions where the context is sized at load (reload larger), as a user would."""
        ...


# The protocol's methods, read from it: named when one is missing, and all a release worker answers.
CONTEXT_METHODS = tuple(name for name, member in vars(KnowsContext).items() if callable(member) and name[0] != "_")

KV_BYTES_PER_VALUE = {"float32": 4, "float16": 2, "bfloat16": 2}


def config_context(config: dict[str, object]) -> tuple[int, float]:
    """A Hugging Face ``config.json``'s window and KV bytes per token (keys and values, every layer).

    A multimodal config keeps its language model under ``text_config``. The cache holds
    the activations' dtype (``torch_dtype``; quantised weights still cache 16-bit values).
    Sliding-window layers are counted at full length: an upper bound.
    """
    text = config.get("text_config")
    values: dict[str, object] = {**config, **text} if isinstance(text, dict) else dict(config)

    def number(key: str, default: int = 0) -> int:
        found = values.get(key, default)
        return int(found) if isinstance(found, int | float | str) else default

    heads = number("num_attention_heads", 1)
    head_dim = number("head_dim") or number("hidden_size") // max(heads, 1)
    per_value = KV_BYTES_PER_VALUE.get(str(values.get("torch_dtype", "float16")), 2)
    per_token = 2.0 * number("num_hidden_layers") * number("num_key_value_heads", heads) * head_dim * per_value
    return number("max_position_embeddings", 2048), per_token


def _metadata_number(metadata: dict[str, str], key: str, default: int = 0) -> int:
    """``{arch}.key`` of GGUF metadata as text: a number, or a per-layer array's largest entry."""
    raw = metadata.get(f"{metadata.get('general.architecture', 'llama')}.{key}", "")
    try:
        return int(float(raw))
    except ValueError:
        parts = [int(float(p)) for p in raw.strip("[]").replace(",", " ").split() if p]
        return max(parts) if parts else default


def gguf_context(metadata: dict[str, str]) -> tuple[int, float]:
    """A GGUF's window and KV bytes per token in llama.cpp's default f16 cache.

    From the ``{arch}.*`` keys that llama.cpp's ``src/llama-model.cpp`` reads: ``block_count``,
    ``attention.head_count_kv``, ``attention.key_length`` / ``value_length`` (else
    ``embedding_length ÷ head_count``), ``context_length``. Sliding-window layers count at full length.
    """

    def number(key: str, default: int = 0) -> int:
        return _metadata_number(metadata, key, default)

    heads = number("attention.head_count", 1)
    fallback = number("embedding_length") // max(heads, 1)
    key, value = number("attention.key_length") or fallback, number("attention.value_length") or fallback
    per_token = float(number("block_count") * number("attention.head_count_kv", heads) * (key + value) * 2)
    return number("context_length", 2048), per_token


def llama_cpp_buffer_bytes(
    metadata: dict[str, str], n_vocab: int, n_ctx: int, *, flash_attention: bool, all_logits: bool, n_batch: int = 512
) -> float:
    """What one llama-cpp-python context's buffers hold once a long prompt ran: compute scratch and output logits.

    llama.cpp reserves a compute buffer for its largest scratch, the logits of a micro-batch
    (``n_vocab × n_ubatch`` float32, ``n_ubatch = min(n_batch, 512)``, llama_cpp/llama.py) or the
    attention of one — without flash attention every head's scores and the mask in float32,
    ``n_ctx × n_ubatch × (4·heads + 4)`` bytes, with it the float16 mask. A context that keeps the
    last position's logits only computes one row of them, so of that reservation it touches the
    attention scratch; a ``logits_all`` context fills the logits scratch and an output buffer of
    ``n_vocab × n_batch`` float32 besides. Measured (``python -m studies.llama_cpp_memory``,
    docs/measurements.md): the synthetic target's reserved buffer 8.5 → 83.5 MiB from n_ctx 512 to
    8192 without flash attention; Gemma 3 270M's 514.5 MiB at any n_ctx, of which a plain context
    evaluating 512 tokens touched 24 MiB of memory and a ``logits_all`` one 1,542 MiB (scores
    matrix, logits scratch and output buffer). The few MiB of other activations are left out.
    """
    heads = max(_metadata_number(metadata, "attention.head_count", 1), 1)
    ubatch = min(n_batch, 512, n_ctx)
    attention = n_ctx * ubatch * (2 if flash_attention else 4 * heads + 4)
    if not all_logits:
        return float(max(n_vocab * 4, attention))
    return float(max(n_vocab * ubatch * 4, attention) + n_vocab * min(n_batch, n_ctx) * 4)


def gguf_file_metadata(path: Path) -> dict[str, str]:
    """A GGUF file's scalar metadata as text (what :func:`gguf_context` reads), by the ``gguf`` package.

    Read once per file version and process: ``GGUFReader`` parses every field, a 262K-token
    vocabulary included, several seconds of Python on this CPU (:mod:`~pytest_specdec.embedded.gguf_reader`).
    """
    stat = Path(path).stat()
    return dict(_read_metadata(str(path), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _read_metadata(path: str, _mtime_ns: int, _size: int) -> dict[str, str]:
    from gguf import GGUFValueType

    from pytest_specdec.embedded.gguf_reader import open_gguf

    found: dict[str, str] = {}
    for name, field in open_gguf(path).fields.items():
        if not field.data or not field.types:
            continue
        if field.types[0] == GGUFValueType.STRING:
            found[name] = bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
        elif field.types[0] == GGUFValueType.ARRAY:
            if len(field.types) > 1 and field.types[1] != GGUFValueType.STRING and len(field.data) < 4096:
                found[name] = " ".join(str(field.parts[i][0]) for i in field.data)
        else:
            found[name] = str(field.parts[field.data[0]][0])
    return found
