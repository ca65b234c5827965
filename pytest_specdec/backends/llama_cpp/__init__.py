"""llama-cpp-python: a second GGUF as draft, or prompt lookup, vs plain decoding on its own ``Llama``."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET
from pytest_specdec.embedded.packaged import GEMMA_GGUF

SPEC = BackendSpec(
    name="llama-cpp",
    target="pytest_specdec.backends.llama_cpp.adapter:LlamaCppBackend",
    summary="llama-cpp-python with a draft GGUF or prompt lookup vs plain decoding",
    requires=("llama_cpp", "gguf"),
    extra="llama-cpp",
    distributions=("llama-cpp-python",),
    options=(
        OptionSpec(
            "spec", "str", "auto, draft or prompt-lookup: how the SD arm drafts (auto: the draft if given)", arm=True
        ),
        OptionSpec("ngram", "int", "prompt lookup's n-gram length", arm=True),
        OptionSpec("chat_template", "bool", "wrap instruction prompts in the model's chat template", arm=True),
        OptionSpec("n_ctx", "int", "context length of each Llama", arm=True),
        OptionSpec("n_batch", "int", "llama.cpp's batch size", arm=True),
        OptionSpec("n_gpu_layers", "int", "layers offloaded to the GPU (-1: all)", arm=True),
        OptionSpec("flash_attn", "bool", "flash attention", arm=True),
        OptionSpec("n_threads", "int", "CPU threads for decoding (0: the cores this process may use)", arm=True),
        OptionSpec(
            "n_threads_batch",
            "int",
            "CPU threads for prompts and batches (0: the cores this process may use)",
            arm=True,
        ),
        OptionSpec(
            "plain_instance", "str", "own (the plain arm loads its own Llama) or shared (when two do not fit)", arm=True
        ),
    ),
    pairs={
        "embedded": ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT),
        "gemma": ModelPair(GEMMA_GGUF, None),
        "seed": ModelPair("~/models/Qwen3.6-35B-A3B-Q4_K_M.gguf", None),
        "embedded-1b": ModelPair("embedded:target-1b", "embedded:draft-1b-aligned"),
    },
    kinds=(SpeculationKind.DRAFT_MODEL, SpeculationKind.NGRAM_LOOKUP),
    evidence_family="llama.cpp",
    # On some CUDA images numpy's native libraries, loaded first, make the first Llama(...) crash.
    native_first="llama_cpp",
    in_process=True,
)
