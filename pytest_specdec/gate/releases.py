"""Which releases the gate runs: the pinned set-up, the upgrade, and what changed.

* ``lock`` — the packages the last accepted run used, ``name==version`` per line, kept
  beside its baselines (``baselines/<machine class>/gate-lock.txt``); set-up installs
  exactly these, so a night measures the accepted state until the upgrade step moves it.
* ``versions`` — every runtime and server the gate can see: the packages the legs name,
  and the servers' own answers (``ollama --version``, ``llama-server --version``,
  ``mtplx --version``). Before and after the upgrade they make the release change that
  a flip's issue names (``specdec-testbackend 1.0 → 1.1``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError
from pytest_specdec.store.files import read_json, write_atomically

LOCK_NAME = "gate-lock.txt"
NOT_INSTALLED = "not installed"
LOCK_HEADER = "# written by 'specdec gate lock' with the accepted baselines; set-up installs these\n"


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


def _first_line(command: Sequence[str]) -> str | None:
    binary = shutil.which(command[0])
    if binary is None:
        return None
    try:
        done = subprocess.run([binary, *command[1:]], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (done.stdout.strip() or done.stderr.strip()).splitlines()
    return text[0].strip() if text else None


def server_versions() -> dict[str, str]:
    """The servers' releases, as each one reports itself (absent servers are left out)."""
    found: dict[str, str] = {}
    ollama = _first_line(["ollama", "--version"])  # "ollama version is 0.30.1"
    if ollama:
        found["ollama (server)"] = ollama.rsplit(" ", 1)[-1]
    mtplx = _first_line(["mtplx", "--version"])  # "mtplx 2.12.2"
    if mtplx:
        found["mtplx (server)"] = mtplx.rsplit(" ", 1)[-1]
    from pytest_specdec.backends.llama_binary import find_binary, server_release

    try:
        release, _ = server_release(find_binary(""))
        found["llama-server"] = release
    except (BackendUnavailable, SpecdecUsageError):
        pass
    return found


def collect_versions(packages: Sequence[str]) -> dict[str, str]:
    """Packages and servers in one mapping, ready to be compared before and after."""
    return {**package_versions(packages), **server_versions()}


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
        raise SpecdecUsageError(f"{path} is not a versions file — re-run 'specdec gate versions'")
    return {str(key): str(value) for key, value in data.items()}


def read_lock(path: Path) -> list[str]:
    """The pinned requirements of a lock file (comments and blank lines dropped)."""
    if not path.is_file():
        return []
    lines = [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()]
    pinned = [line for line in lines if line]
    for line in pinned:
        if "==" not in line:
            raise SpecdecUsageError(
                f"{path}: {line!r} is not pinned as name==version — rewrite it with 'specdec gate lock'"
            )
    return pinned
