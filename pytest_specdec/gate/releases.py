"""Which releases the gate runs: the pinned set-up, the upgrade, and what changed.

* ``lock`` — where the environment the last accepted run used is pinned, every package
  with its hash (``baselines/<machine class>/gate-lock.txt``, :mod:`.lockfile`); set-up
  installs exactly that, so a night measures the accepted state until the upgrade moves it.
* ``versions`` — every runtime and server the gate can see: the packages the legs name,
  and the servers' own answers (``ollama --version``, ``llama-server --version``,
  ``mtplx --version``). Before and after the upgrade they make the release change that
  a flip's issue names (``specdec-testbackend 1.0 → 1.1``).
* ``server upgrade`` — the runner owner's command that moves the servers (``upgrade-servers``)
  runs once a night, by the first leg that upgrades: the legs run one after another, and a
  second run would clean away the keg the first one kept (so no old server to run beside
  the new one) and find nothing to move (so no release change for a later leg). The
  servers' releases before it ran are kept for the night (:func:`night_upgrade_path`), and
  a later leg's "before" reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from pytest_specdec.backends import registered_backends, server_releases
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.runner_state import read_state_json, state_root
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


def with_libraries(names: Sequence[str]) -> list[str]:
    """``names`` and every installed distribution they require, all the way down (markers read for this
    interpreter, extras left out): the libraries under an engine that can move its answer (MLX under
    mlx-vlm), which the upgrade step moves too (pip's eager strategy).

    >>> "numpy" in with_libraries(["scipy"])
    True
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    found = {canonicalize_name(name): name for name in names}
    todo = list(names)
    while todo:
        try:
            requires = metadata.requires(todo.pop()) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            key = canonicalize_name(requirement.name)
            if key not in found:  # one spelling for each, whichever requirement named it first
                found[key] = key
                todo.append(key)
    return list(names) + sorted(n for n in found.values() if n not in names and _installed(n))


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def collect_versions(packages: Sequence[str], backend: str = "") -> dict[str, str]:
    """The leg's packages (with every library under them for an in-process backend, whose arms those libraries
    run; a server's client libraries do not) and the leg's servers in one mapping, ready to be compared before and
    after."""
    spec = registered_backends().get(backend)
    names = with_libraries(packages) if spec is not None and spec.in_process else list(packages)
    return {**package_versions(names), **server_releases(backend)}


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


def night_upgrade_path() -> Path | None:
    """Where tonight's server upgrade is recorded: one workflow run is one night, its re-run attempts
    included (they find the servers already moved); ``None`` outside a workflow, and under act, whose
    every run has the same id."""
    run = os.environ.get("GITHUB_RUN_ID", "")
    if not run.isdigit() or os.environ.get("ACT"):
        return None
    return state_root() / "server-upgrades" / f"{run}.json"


def forget_other_nights(path: Path) -> None:
    """Remove the records of earlier nights' upgrades (only tonight's is ever read)."""
    for other in path.parent.glob("*.json"):
        if other != path:
            other.unlink(missing_ok=True)


def night_upgrade(path: Path | None) -> dict[str, object] | None:
    """What an earlier leg recorded of tonight's server upgrade (``before``: releases, ``exit``); ``None``: not run."""
    if path is None or not path.is_file():
        return None
    found = read_state_json(path)
    return found if isinstance(found.get("before"), dict) else None


def servers_before_tonight(versions: Mapping[str, str], upgrade: Mapping[str, object] | None) -> dict[str, str]:
    """``versions`` with each server an earlier leg's upgrade moved tonight at its release from before it."""
    before = upgrade.get("before") if upgrade is not None else None
    if not isinstance(before, dict):
        return dict(versions)
    return {name: str(before[name]) if name in before else value for name, value in versions.items()}
