"""Ollama: ``draft_num_predict`` γ vs 0 on one tag, or two tags (``sd=tag``), judged with the engagement probe."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec, ServeRecipe
from pytest_specdec.backends.kinds import SpeculationKind

SPEC = BackendSpec(
    name="ollama",
    target="pytest_specdec.backends.ollama.adapter:OllamaBackend",
    summary="Ollama: options.draft_num_predict γ vs 0 on one tag, or an SD tag vs a plain tag",
    requires=("ollama", "httpx"),
    extra="ollama",
    distributions=("ollama",),
    options=(
        OptionSpec("host", "str", "Ollama server URL (default: $OLLAMA_HOST or 127.0.0.1:11434)", flag="ollama_host"),
        OptionSpec("timeout", "float", "seconds a request may take"),
        OptionSpec(
            "sd", "str", "option (draft_num_predict on one tag) or tag (two tags: plain_model= is plain)", arm=True
        ),
        OptionSpec("plain_model", "str", "the plain tag when sd=tag", arm=True),
        OptionSpec("raw", "bool", "send prompts raw (no template)", arm=True),
        OptionSpec(
            "serve",
            "bool",
            "start 'ollama serve' on a free loopback port for the run, and stop it after",
            flag="ollama_serve",
        ),
        OptionSpec("serve_env", "str", "NAME=VALUE,... for a managed 'ollama serve'"),
    ),
    pairs={"seed": ModelPair("qwen3-coder:30b", None)},
    kinds=(SpeculationKind.MTP_HEAD,),
    evidence_family="ollama",
    server_releases="pytest_specdec.backends.ollama.releases:server_releases",
    previous_release="pytest_specdec.backends.ollama.releases:previous_release",
    doctor="pytest_specdec.backends.ollama.doctor:tag_findings",
    local_models="pytest_specdec.backends.ollama.releases:pulled_tags",
    # `ollama serve` listens on OLLAMA_HOST (envconfig/config.go) and answers GET /api/version (server/routes.go).
    serve=ServeRecipe(("ollama", "serve"), {"OLLAMA_HOST": "127.0.0.1:{port}"}, "/api/version", "host"),
    standin="pytest_specdec.backends.ollama.standin:OllamaHandler",
)
