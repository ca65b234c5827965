"""Backends by name: a lazy registry plus the ``pytest_specdec.backends`` entry points.

Nothing here imports a runtime library. A backend module is imported only when
:func:`load_backend` builds it, so ``import pytest_specdec`` stays light.
Third-party packages register a :class:`~pytest_specdec.backends.base.BackendSpec`
under the entry-point group ``pytest_specdec.backends``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import cast

from pytest_specdec.backends.base import Backend, BackendSpec, ModelPair, OldRelease, load_attribute
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError

ENTRY_POINT_GROUP = "pytest_specdec.backends"


@cache
def builtin_backends() -> dict[str, BackendSpec]:
    """The backends that ship as folders of this package: each folder's ``SPEC``.

    A folder is found by looking, not by a list, so adding a backend is adding a folder.
    """
    found: dict[str, BackendSpec] = {}
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        spec = getattr(importlib.import_module(f"{__name__}.{module.name}"), "SPEC", None)
        if isinstance(spec, BackendSpec):
            found[spec.name] = spec
    return found


def _entry_points() -> tuple[dict[str, BackendSpec], dict[str, str]]:
    """Backends other packages declare, and one line for each entry point that cannot be loaded."""
    found: dict[str, BackendSpec] = {}
    broken: dict[str, str] = {}
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = entry.load()
        except Exception as error:  # a broken third-party package must not break the other backends
            distribution = entry.dist.name if entry.dist is not None else "its package"
            said = str(error).splitlines()[0][:200] if str(error) else ""
            broken[entry.name] = (
                f"the backend {entry.name!r} of {distribution} (entry point {entry.value}) cannot be loaded: "
                f"{type(error).__name__}{': ' + said if said else ''} — fix or uninstall {distribution}"
            )
            continue
        if isinstance(spec, BackendSpec):
            found.setdefault(spec.name, spec)
    return found, broken


def registered_backends() -> dict[str, BackendSpec]:
    """Built-in backends plus those that other packages declare as entry points (the loadable ones)."""
    found = dict(builtin_backends())
    for name, spec in _entry_points()[0].items():
        found.setdefault(name, spec)
    return found


def broken_backends() -> dict[str, str]:
    """Each declared backend that cannot be loaded, with its one line (said by ``pytest-specdec backends``, doctor and
    the run's header; an error only when that backend is asked for)."""
    return _entry_points()[1]


def backend_spec(name: str, *, option: str = "--backend") -> BackendSpec:
    """The spec registered under ``name``, or a usage error naming ``option`` and listing the choices."""
    known = registered_backends()
    if name not in known:
        broken = broken_backends()
        if name in broken:
            raise SpecdecUsageError(broken[name])
        choices = ", ".join(sorted(known))
        raise SpecdecUsageError(f"unknown backend {name!r} — choose one of: {choices} ({option} NAME)")
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
    check_options(spec, options)
    backend_class = load_attribute(spec.target)
    return cast(Backend, backend_class(pair, options))  # type: ignore[operator]


def check_options(spec: BackendSpec, options: Mapping[str, str]) -> None:
    """A key the backend does not declare is a usage error naming its options (typos never pass silently)."""
    if not spec.options:
        return  # a third-party spec that declares none checks its own
    unknown = sorted(set(options) - spec.option_keys)
    if unknown:
        known = ", ".join(sorted(spec.option_keys))
        raise SpecdecUsageError(
            f"backend {spec.name!r} has no option {unknown[0]!r} (its options: {known}) — fix --specdec-backend-option"
        )


def profile_pairs(profile: str) -> dict[str, ModelPair]:
    """The model pair each registered backend gives a named profile (``embedded``: the defaults)."""
    return {name: spec.pairs[profile] for name, spec in registered_backends().items() if profile in spec.pairs}


def known_profiles() -> set[str]:
    """Every profile some registered backend has a pair for."""
    return {profile for spec in registered_backends().values() for profile in spec.pairs}


def server_releases(backend: str = "") -> dict[str, str]:
    """The releases of the servers ``backend`` talks to (every registered backend's for ``""``), as each says."""
    found: dict[str, str] = {}
    for name, spec in sorted(registered_backends().items()):
        if spec.server_releases and backend in ("", name):
            reader = load_attribute(spec.server_releases)
            found.update(reader())  # type: ignore[operator]
    return found


def previous_release(backend: str, old_venv: Path | None, before: Mapping[str, str]) -> OldRelease | None:
    """Where last night's release of ``backend`` can run beside tonight's, or None (then the gate re-runs).

    In-process backends run it from the environment rebuilt from the lock; a server backend
    says where its previous release still is (``BackendSpec.previous_release``).
    """
    spec = registered_backends().get(backend)
    if spec is None:
        return None
    if spec.in_process:
        python = old_venv / "bin" / "python" if old_venv is not None else None
        return OldRelease("the locked environment", python=str(python)) if python and python.is_file() else None
    if not spec.previous_release:
        return None
    finder = load_attribute(spec.previous_release)
    found = finder(old_venv, before)  # type: ignore[operator]
    return found if isinstance(found, OldRelease) else None
