"""An out-of-tree pytest-specdec backend: the whole of it is this package's ``SPEC`` and two modules.

The server it measures speaks OpenAI's ``/v1/completions`` and serves the plain and the
speculative configuration as two models (as a router in front of two vLLM processes
does: vLLM chooses speculative decoding when it starts, ``--speculative-config``), and
counts drafted and accepted tokens on ``/metrics`` as vLLM's v1 engine does
(``vllm/v1/spec_decode/metrics.py``).
"""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec, ServeRecipe
from pytest_specdec.backends.kinds import SpeculationKind

SPEC = BackendSpec(
    name="openai-spec",
    target="specdec_openai_spec.adapter:OpenAISpecBackend",
    summary="an OpenAI-compatible server: the SD model vs the plain model, drafts counted on /metrics",
    requires=("httpx",),
    distributions=("specdec-openai-spec",),
    options=(
        OptionSpec("url", "str", "the server's URL", flag="openai_spec_url"),
        OptionSpec("plain_model", "str", "the served model that decodes plainly"),
        OptionSpec("sd_model", "str", "the served model that speculates"),
        OptionSpec("timeout", "float", "seconds a request may take in all"),
        OptionSpec("serve", "bool", "start specdec-openai-spec-serve for the run and stop it after (instead of url=)"),
    ),
    pairs={"embedded": ModelPair("served-target", "served-draft")},
    kinds=(SpeculationKind.DRAFT_MODEL,),  # the "sd" model speculates with a draft model, as vLLM's draft_model method
    evidence_family="vllm",
    server_releases="specdec_openai_spec.adapter:server_releases",
    serve=ServeRecipe(("specdec-openai-spec-serve", "--port", "{port}"), {}, "/health", "url"),
    standin="specdec_openai_spec.standin:OpenAISpecHandler",
)
