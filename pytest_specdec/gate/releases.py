"""Which releases the gate runs: the pinned set-up, the upgrade, and what changed.

* ``lock`` — where the environment the last accepted run used is pinned, every package
  with its hash (``baselines/<machine class>/gate-lock.txt``, :mod:`.lockfile`); set-up
  installs exactly that, so a night measures the accepted state until the upgrade moves it.
* ``versions`` — every runtime and server the gate can see: the packages the legs name,
  and the servers' own answers (``ollama --version``, ``llama-server --version``,
  ``mtplx --version``). Before and after the upgrade they make the release change that
  a flip's issue names (``specdec-testbackend 1.0 → 1.1``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from pytest_specdec.backends import server_releases
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import read_json, write_atomically

LOCK_NAME = "gate-lock.txt"
NOT_INSTALLED = "not installed"


def lock_path(baselines: Path, machine_class: str) -> Path:
    """``baselines/<machine class>/gate-lock.txt``."""
    return baselines / machine_class / LOCK_NAME


def package_versions(names: Sequence[str]) -> dict[str, str]:
    """Installed versions of ``names`` in this interpreter (``not installed`` when absent)."""
    found: dict[str, str] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = NOT_INSTALLED
    return found


def collect_versions(packages: Sequence[str], backend: str = "") -> dict[str, str]:
    """Packages and the leg's servers in one mapping, ready to be compared before and after."""
    return {**package_versions(packages), **server_releases(backend)}


def release_changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """``name old → new`` for every runtime or server whose release moved."""
    return [
        f"{name} {before.get(name, NOT_INSTALLED)} → {after[name]}"
        for name in sorted(after)
        if before.get(name, NOT_INSTALLED) != after[name]
    ]


def write_versions(path: Path, versions: Mapping[str, str]) -> None:
    """The versions as sorted JSON."""
    write_atomically(path, json.dumps(dict(versions), indent=2, sort_keys=True) + "\n")


def read_versions(path: Path) -> dict[str, str]:
    """Versions written by :func:`write_versions`; empty when the step did not run."""
    if not path.is_file():
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise SpecdecUsageError(
            f"{path} is not a versions file — re-run the set-up step ('.github/scripts/gate.sh setup')"
        )
    return {str(key): str(value) for key, value in data.items()}
