"""Ollama's releases as ``ollama --version`` prints them.

``ollama --version`` (versionHandler in ollama's cmd/cmd.go) asks the running server's
/api/version and prints "ollama version is S"; when the binary's own version differs, or
no server answers ("Warning: could not connect to a running Ollama instance"), it adds
"Warning: client version is C". The binary is what a managed ``ollama serve`` runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pytest_specdec.backends.base import OldRelease
from pytest_specdec.backends.homebrew import kept_program
from pytest_specdec.backends.server_process import program_output

OLLAMA_SERVER = re.compile(r"^ollama version is (\S+)", re.MULTILINE)
OLLAMA_CLIENT = re.compile(r"client version is (\S+)")


def server_releases() -> dict[str, str]:
    """The running server's release and the binary's own, as ``ollama --version`` says them."""
    said = program_output(["ollama", "--version"])
    running, binary = OLLAMA_SERVER.findall(said), OLLAMA_CLIENT.findall(said)
    found: dict[str, str] = {}
    if running:
        found["ollama (running server, /api/version)"] = running[0]
    if binary or running:
        found["ollama (binary)"] = (binary or running)[0]
    return found


def pulled_tags() -> list[str]:
    """The tags ``ollama list`` shows (its first column), full names such as ``qwen3-coder:30b``."""
    rows = program_output(["ollama", "list"]).splitlines()
    return [row.split()[0] for row in rows[1:] if row.strip() and ":" in row.split()[0]]


def previous_release(old_venv: Path | None, before: Mapping[str, str]) -> OldRelease | None:
    """Last night's ``ollama`` binary from Homebrew's kept keg, when it says the release recorded before the upgrade.

    The gate serves it (``ollama serve`` on its own port) beside tonight's. The macOS
    app keeps no old release: then there is none, and the flip is re-run instead.
    """
    old = before.get("ollama (binary)", "")
    keg = kept_program("ollama", old, "ollama")
    if keg is None:
        return None
    said = program_output([str(keg), "--version"])
    own = (OLLAMA_CLIENT.findall(said) or OLLAMA_SERVER.findall(said) or [""])[0]
    return OldRelease(f"ollama {old}", program=str(keg)) if own == old else None
