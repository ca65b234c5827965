"""LM Studio: one loaded target, each request with and without ``draftModel``, counted by LM Studio itself."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind

SPEC = BackendSpec(
    name="lmstudio",
    target="pytest_specdec.backends.lmstudio.adapter:LmStudioBackend",
    summary="LM Studio (its lmstudio SDK): the same request without and with draftModel, LM Studio's own counts",
    requires=("lmstudio",),
    extra="lmstudio",
    distributions=("lmstudio",),
    options=(
        OptionSpec("host", "str", "HOST:PORT of LM Studio's server (default: $LMSTUDIO_HOST, else the SDK's ports)"),
        OptionSpec("timeout", "float", "seconds the SDK waits between two messages"),
        OptionSpec("lms", "str", "LM Studio's lms program (default: on PATH; it loads, unloads, names the runtime)"),
    ),
    # No pair of its own: --specdec-model and --specdec-draft are LM Studio model keys (`lms ls`).
    kinds=(SpeculationKind.DRAFT_MODEL,),
    evidence_family="lmstudio",
    doctor="pytest_specdec.backends.lmstudio.doctor:server_findings",
    standin="pytest_specdec.backends.lmstudio.standin:LmStudioHandler",
)
