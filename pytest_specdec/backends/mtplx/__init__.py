"""MTPLX: ``generation_mode`` ``mtp`` (depth γ) vs ``ar`` on ``mtplx serve``."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, ServeRecipe
from pytest_specdec.backends.http_client import HTTP_OPTIONS
from pytest_specdec.backends.kinds import SpeculationKind

SPEC = BackendSpec(
    name="mtplx",
    target="pytest_specdec.backends.mtplx.adapter:MtplxBackend",
    summary="MTPLX: generation_mode mtp vs ar on mtplx serve",
    requires=("httpx",),
    extra="mtplx",
    distributions=("httpx",),
    options=HTTP_OPTIONS,
    # MTPLX reports the model it serves; the pair is a placeholder until it does.
    pairs={"embedded": ModelPair("server-model", None), "seed": ModelPair("server-model", None)},
    kinds=(SpeculationKind.MTP_HEAD,),
    evidence_family="mtplx",
    server_releases="pytest_specdec.backends.mtplx.releases:server_releases",
    previous_release="pytest_specdec.backends.mtplx.releases:previous_release",
    # The release measured is the server's `mtplx --version`; its Python side here is only httpx.
    upgrade_packages=("mtplx",),
    # The `serve` sub-command takes --model, --host, --port and --no-auth (mtplx/cli.py in the 2.12.2
    # wheel) and answers GET /health (mtplx/server/openai.py).
    serve=ServeRecipe(
        ("mtplx", "serve", "--model", "{model}", "--host", "127.0.0.1", "--port", "{port}", "--no-auth"),
        {},
        "/health",
        "url",
    ),
    standin="pytest_specdec.backends.mtplx.standin:MtplxHandler",
)
